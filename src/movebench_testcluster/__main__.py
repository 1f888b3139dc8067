import sys

from movebench_testcluster.slurm import main

sys.exit(main())
