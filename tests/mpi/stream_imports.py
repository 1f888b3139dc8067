"""Under mpiexec: run the shuffle kernel on the task in argv[1], then print which ranks loaded numpy."""

import json
import sys

from mpi4py import MPI

from movebench.families.shuffle import kernel

kernel.main(sys.argv[1:])
loaded = MPI.COMM_WORLD.gather("numpy" in sys.modules, root=0)
if MPI.COMM_WORLD.rank == 0:
    json.dump({"numpy_loaded": loaded}, sys.stdout)
