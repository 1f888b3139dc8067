"""Under mpiexec: persistent-request streams verify their data, stay reusable, and catch a bad receive.

Buffers are byte memoryviews (memory.allocate_bytes, as the shuffle kernel's) and numpy arrays (memory.allocate).
"""

import json
import sys

from mpi4py import MPI

from movebench.core import memory
from movebench.core.p2p import PairStream, fill_bytes

comm = MPI.COMM_WORLD
out = {}
ALLOCATE = {"bytes": memory.allocate_bytes, "numpy": memory.allocate}
for kind, bidirectional, size in [(k, b, s) for k in ALLOCATE for b in (False, True) for s in (1, 1000, 4096, 70000)]:
    sbuf, rbuf = ALLOCATE[kind](size, mode="4k"), ALLOCATE[kind](size, mode="4k")
    with PairStream(comm, sbuf, rbuf, size, window=4, bidirectional=bidirectional) as stream:
        runs = []
        for _ in range(3):  # the same requests serve every repetition
            elapsed = stream.run(iterations=5, skip=2)
            runs.append({"elapsed": elapsed, "verified": stream.verified(),
                         "same_elapsed": len(set(comm.allgather(elapsed))) == 1})
        # nothing may be left in flight once run() returns
        runs.append({"pending": comm.allreduce(bool(comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)), op=MPI.LOR)})
        # a receiver whose buffer does not hold its peer's bytes is caught
        stream.run(iterations=1)
        if stream.receives and comm.rank == comm.size - 1:
            rbuf[size // 2] ^= 0xFF
        runs.append({"flipped_verified": stream.verified()})
        # the sender's bytes are its own fill_bytes: what the receiver holds is the peer's, not its own
        stream.run(iterations=1)
        if stream.receives:
            held = bytes(rbuf[:size])
            runs.append({"holds_peer_bytes": held == fill_bytes(stream.peer, size),
                         "not_own_bytes": size < 2 or held != fill_bytes(comm.rank, size)})
    out[f"{kind}-{'bidi' if bidirectional else 'uni'}-{size}"] = runs
if comm.rank == comm.size - 1:
    json.dump(out, sys.stdout)
