"""MPI facts for a point's meta: library, thread level, where each rank ran."""

from __future__ import annotations

import os
import socket

_THREAD_LEVELS = {0: "single", 1: "funneled", 2: "serialized", 3: "multiple"}


def mpi_meta(comm) -> dict | None:
    """Gathered on every rank; rank 0 gets the dict, the others None."""
    from mpi4py import MPI

    where = (socket.gethostname(), os.environ.get("SLURMD_NODENAME"))
    placed = comm.gather(where, root=0)
    if comm.rank != 0:
        return None
    hosts = [h for h, _ in placed]
    nodes = [n or h for h, n in placed]
    level = MPI.Query_thread()
    return {
        "ranks": comm.size,
        "hostnames": hosts,
        "rank_nodes": nodes,
        "nodes": sorted(set(nodes)),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_version": "{}.{}".format(*MPI.Get_version()),
        # Thread level matters: MPICH at "single" busy-polls and is 100x slower oversubscribed.
        "mpi_thread_level": _THREAD_LEVELS.get(level, str(level)),
    }
