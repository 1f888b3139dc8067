"""OSU-style bandwidth between rank 0 and rank 1 (osu_bw, osu_bibw), for the namespace cluster's link tests.

    srun --mpi=pmi2 -N 2 -n 2 python tests/mpi/link_bw.py [--bidi] [--window 64] [--sizes 4096,1048576]
         [--reps 5] [--seconds 0.5]

Per size: a warm-up, then `reps` timed repetitions of `iterations` windows; the iteration count is chosen
in the warm-up so that one repetition takes about `seconds`. One window is, as in OSU's osu_bw, `window`
MPI_Isend of `size` bytes from rank 0 (rank 1 posts as many MPI_Irecv), a Waitall, and a 4-byte ack from
rank 1; osu_bibw sends windows both ways at once and has no ack (both sides Waitall on both directions).

    bandwidth = size * window * iterations * directions / (t_end - t_start)   [bytes/s]

with t from rank 0's MPI_Wtime, as OSU does. One JSON line per repetition on rank 0's stdout, and a first
line with each rank's host name and address.
"""

import argparse
import json
import socket
import time

import numpy as np
from mpi4py import MPI


def window(comm, peer, sbuf, rbuf, size, win, bidi):
    reqs = []
    if comm.rank == 0 or bidi:
        reqs += [comm.Isend([sbuf[:size], MPI.BYTE], dest=peer, tag=1) for _ in range(win)]
    if comm.rank == 1 or bidi:
        reqs += [comm.Irecv([rbuf[i * size:(i + 1) * size], MPI.BYTE], source=peer, tag=1) for i in range(win)]
    MPI.Request.Waitall(reqs)
    if not bidi:
        ack = np.zeros(4, dtype=np.uint8)
        if comm.rank == 0:
            comm.Recv([ack, MPI.BYTE], source=peer, tag=2)
        else:
            comm.Send([ack, MPI.BYTE], dest=peer, tag=2)


def timed(comm, peer, sbuf, rbuf, size, win, bidi, iterations):
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iterations):
        window(comm, peer, sbuf, rbuf, size, win, bidi)
    return MPI.Wtime() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bidi", action="store_true")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--sizes", default="1048576,4194304")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.5)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit(f"link_bw runs on exactly 2 ranks, not {comm.size}")
    peer = 1 - comm.rank
    host = socket.gethostname()
    where = comm.gather({"rank": comm.rank, "host": host, "addr": socket.gethostbyname(host),
                         "processor": MPI.Get_processor_name()})
    if comm.rank == 0:
        print(json.dumps({"ranks": where}), flush=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    sbuf = np.ones(max(sizes), dtype=np.uint8)
    rbuf = np.zeros(max(sizes) * a.window, dtype=np.uint8)
    directions = 2 if a.bidi else 1
    for size in sizes:
        # warm-up: one window, then as many as fill `seconds`, which also sizes the timed repetitions
        timed(comm, peer, sbuf, rbuf, size, a.window, a.bidi, 1)
        t = timed(comm, peer, sbuf, rbuf, size, a.window, a.bidi, 2)
        iterations = comm.bcast(max(1, int(a.seconds / max(t / 2, 1e-9))))
        for rep in range(a.reps):
            took = timed(comm, peer, sbuf, rbuf, size, a.window, a.bidi, iterations)
            if comm.rank == 0:
                moved = size * a.window * iterations * directions
                print(json.dumps({"size": size, "window": a.window, "bidi": a.bidi, "rep": rep,
                                  "iterations": iterations, "seconds": took, "bytes": moved,
                                  "bandwidth_Bps": moved / took, "t": time.time()}), flush=True)


if __name__ == "__main__":
    main()
