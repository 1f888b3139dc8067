"""Under mpiexec: bcast's timed broadcasts run without memory probes, and osu's latency is osu_bcast's average.

Prints, on the last rank, JSON with per method the sequence of calls each repetition made (timed
broadcast or osu loop, RSS reset, probe broadcast) with whether tracemalloc was tracing at each, and
whether the receive buffers were zeroed when the timed broadcast began; and osu's latency under a
clock that makes rank r's every timed round last (r + 1) ms.
"""

import json
import sys
import tracemalloc

from mpi4py import MPI

from movebench.families.bcast import kernel

comm = MPI.COMM_WORLD
events = []
state = {}


def traced(name, fn):
    def call(*args, **kwargs):
        receive = state.get("receive")
        zeroed = None if receive is None else all(not array.any() for array in receive.arrays)
        events.append({"call": name, "tracing": tracemalloc.is_tracing(), "receive_zeroed": zeroed})
        return fn(*args, **kwargs)

    return call


osu_loop = kernel.bcast_osu
kernel.BROADCASTS = {method: traced("broadcast", fn) for method, fn in kernel.BROADCASTS.items()}
kernel.PROBE_BROADCASTS = {method: traced("broadcast", fn) for method, fn in kernel.PROBE_BROADCASTS.items()}
kernel.bcast_osu = traced("osu_loop", kernel.bcast_osu)
kernel.reset_rss_peak = traced("rss_reset", kernel.reset_rss_peak)

out = {"methods": {}}
for method in ("buffer", "pickle", "osu"):
    source = kernel.place(kernel.make_dense((1000,), "float64", 7)) if comm.rank == kernel.ROOT else None
    expected = None
    if comm.rank == kernel.ROOT:
        expected = {"meta": kernel.metadata_of(source), "crc32": kernel.checksum(source),
                    "payload_bytes": source.nbytes}
    expected = comm.bcast(expected, root=kernel.ROOT)
    state.clear()
    state.update(kernel.setup(comm, method, source))
    events.clear()
    reps = []
    for _ in range(2):
        elapsed, nbytes, extras = kernel.broadcast_once(comm, method, source, state, expected, kernel.rss_bytes())
        reps.append({"elapsed": elapsed, "bytes": nbytes, "verified": extras["verified"],
                     "iterations": extras.get("iterations"), "skip": extras.get("skip"),
                     "tracing_after": tracemalloc.is_tracing()})
    out["methods"][method] = {"events": comm.gather(list(events), root=comm.size - 1), "reps": reps}

# osu_bcast's figure: the average over ranks of each rank's mean timed round.
real_wtime, ticks = MPI.Wtime, [0.0]


def clock():
    ticks[0] += (comm.rank + 1) * 1e-3  # start -> stop of a round is one tick on this rank
    return ticks[0]


MPI.Wtime = clock
try:
    buffer = kernel.place(kernel.make_dense((16,), "float64", 1))
    out["osu_fake_clock"] = osu_loop(comm, [buffer], 5, 2)
finally:
    MPI.Wtime = real_wtime
out["ranks"] = comm.size
if comm.rank == comm.size - 1:
    json.dump(out, sys.stdout)
