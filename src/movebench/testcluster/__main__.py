import sys

from movebench.testcluster.slurm import main

sys.exit(main())
