"""Under mpiexec: shuffle with the right route, then with one tuple sent to the wrong rank."""

import json
import sys

from mpi4py import MPI

from movebench.families.shuffle.kernel import checksum, destination, make_tuples, run_shuffle

comm = MPI.COMM_WORLD
tuples = make_tuples(5000, 32, 1.1, 7, comm.rank)
good = run_shuffle(comm, tuples, 1024, 4, checksum(tuples))


def misroute(keys, ranks):
    dest = destination(keys, ranks)
    if comm.rank == 0:
        dest[0] = (dest[0] + 1) % ranks  # one tuple goes to a rank that does not own its key
    return dest


bad = run_shuffle(comm, tuples, 1024, 4, checksum(tuples), route=misroute)
corrupt_sum = checksum(tuples) + (1 if comm.rank == 0 else 0)  # as if a payload bit flipped
flipped = run_shuffle(comm, tuples, 1024, 4, corrupt_sum)
if comm.rank == 0:
    json.dump({"good": good[2], "bad": bad[2], "flipped": flipped[2], "good_bytes": good[1]}, sys.stdout, default=str)
