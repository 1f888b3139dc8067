import sys

from movebench.cli import main

sys.exit(main())
