import sys

from movebench.cli import main

try:
    sys.exit(main())
except KeyboardInterrupt:
    sys.exit("movebench: interrupted")
