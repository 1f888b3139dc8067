import os
import sys

from movebench.cli import main

try:
    sys.exit(main())
except KeyboardInterrupt:
    sys.exit("movebench: interrupted")
except BrokenPipeError:
    # The reader went away (`python -m movebench efficiency | head`): what it did not read is not an error to print.
    # Python would also complain flushing stdout at exit; point it at /dev/null first.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
