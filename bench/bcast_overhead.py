"""Where a bcast `buffer` repetition's fixed cost goes, and an OSU-comparable broadcast beside C osu_bcast.

Run: .venv/bin/python bench/bcast_overhead.py [--rounds 5] [--ranks 2] [--sizes 8,1048576,4194304]

One MPI job per round (`--worker` is that job). In it, for every size, these take turns repetition
by repetition (order rotated every repetition):
- buffer: broadcast_once with method `buffer` as the kernel ran it before issue 13 (tracemalloc on,
  RSS high-water reset, barrier, metadata bcast, Bcast, allreduce of the time, CRC verification,
  allgather of the probes).
- buffer_noprobe: the same with tracemalloc stopped and no RSS reset: what the probes cost inside,
  and how the kernel times `buffer` since (its probes run in an untimed broadcast of their own).
- phases: the same repetition with a clock around each step, on every rank (see PHASES); the wall
  time of the whole repetition is `total`.
- osu: the kernel's `osu` method (families/bcast/kernel.py's bcast_osu): the shape known to every rank,
  receive buffers preallocated (movebench.core.memory.allocate), `iterations` back-to-back comm.Bcast,
  each timed on its own (Wtime before and after) and followed by an untimed Barrier, as osu_bcast; the
  repetition's latency is the average over ranks of each rank's mean. Verified by CRC after.
- C: bench/osu_ref's osu_bcast loop (build/bench/libosu_ref.so) through ctypes on the same buffer.
OSU's counts: 1000 timed after 200 skipped up to 8 KiB, 100 after 10 above. The ratio of a round is
the median of a method's repetitions over C's median; the table gives the median over rounds [min-max].
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

METHODS = ("C", "osu", "buffer", "buffer_noprobe")
PHASES = ("probe_reset", "barrier", "metadata", "Bcast", "assemble", "probe_read", "time_allreduce", "verify",
          "allgather", "total")


def osu_counts(size: int) -> tuple[int, int]:
    return (100, 10) if size > 8192 else (1000, 200)


def buffer_once(comm, source, state, expected, rss_baseline, probes=True, clock=None):
    """broadcast_once for method buffer as it was before issue 13; `clock(name)` marks the end of each phase."""
    import tracemalloc

    from mpi4py import MPI

    from movebench.families.bcast import kernel as bcast

    mark = clock or (lambda name: None)
    if probes:
        bcast.reset_rss_peak()
        tracemalloc.reset_peak()
        traced_start = tracemalloc.get_traced_memory()[0]
    mark("probe_reset")
    comm.Barrier()
    mark("barrier")
    start = MPI.Wtime()
    meta = comm.bcast(bcast.metadata_of(source) if comm.rank == 0 else None, root=0)
    mark("metadata")
    arrays = bcast.buffers_of(source) if comm.rank == 0 else state["receive"].for_meta(meta)
    for array in arrays:
        comm.Bcast(array, root=0)
    mark("Bcast")
    received = source if comm.rank == 0 else bcast.assemble(meta, arrays)
    mine = MPI.Wtime() - start
    mark("assemble")
    if probes:
        traced_peak = tracemalloc.get_traced_memory()[1] - traced_start
        rss_delta = bcast.rss_peak_bytes() - rss_baseline
    else:
        traced_peak = rss_delta = 0
    mark("probe_read")
    elapsed = comm.allreduce(mine, op=MPI.MAX)
    mark("time_allreduce")
    error = bcast.verify(received, expected) if comm.rank != 0 else None
    mark("verify")
    per_rank = comm.allgather((traced_peak, rss_delta, error))
    mark("allgather")
    if any(row[2] for row in per_rank):
        raise SystemExit(f"verification failed: {per_rank}")
    return elapsed


def worker(args) -> int:
    import ctypes
    import tracemalloc

    from mpi4py import MPI

    from movebench.core import memory
    from movebench.families.bcast import kernel as bcast

    comm = MPI.COMM_WORLD
    lib = ctypes.CDLL(str(ROOT / "build" / "bench" / "libosu_ref.so"))
    lib.osu_ref_bcast.restype = ctypes.c_double
    lib.osu_ref_bcast.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    tracemalloc.start()
    rss_baseline = bcast.rss_bytes()
    cases = {}
    for size in sizes:
        source = bcast.make_dense((size // 8,), "float64", 2024) if comm.rank == 0 else None
        expected = comm.bcast({"meta": bcast.metadata_of(source), "crc32": bcast.checksum(source),
                               "payload_bytes": source.nbytes} if comm.rank == 0 else None, root=0)
        state = bcast.setup(comm, "buffer", source)
        osu_buf = memory.allocate(size, "uint8", args.memory_mode)
        if comm.rank == 0:
            osu_buf[:] = source.view(np.uint8)
        cases[size] = (source, expected, state, osu_buf)
    times = {m: {s: [] for s in sizes} for m in methods}
    phases = {s: {p: [] for p in PHASES} for s in sizes}
    for rep in range(args.warmups + args.repetitions):
        for size in sizes:
            source, expected, state, osu_buf = cases[size]
            iterations, skip = osu_counts(size)
            turn = rep % len(methods)
            for method in methods[turn:] + methods[:turn]:
                # only the old `buffer` is timed under tracemalloc, as the kernel timed it before issue 13
                if method == "buffer" and not tracemalloc.is_tracing():
                    tracemalloc.start()
                elif method != "buffer" and tracemalloc.is_tracing():
                    tracemalloc.stop()
                if method == "C":
                    comm.Barrier()
                    mine = lib.osu_ref_bcast(size, iterations, skip, osu_buf.ctypes.data) * 1e-6
                    value = comm.allreduce(mine, op=MPI.SUM) / comm.size
                elif method == "osu":
                    if comm.rank != 0:
                        osu_buf.fill(0)
                    comm.Barrier()
                    value = bcast.bcast_osu(comm, [osu_buf], iterations, skip)
                    crc = comm.allgather(zlib.crc32(osu_buf))
                    if len(set(crc)) != 1:
                        raise SystemExit(f"osu: receive differs from the root's at {size} bytes")
                elif method == "buffer":
                    value = buffer_once(comm, source, state, expected, rss_baseline)
                elif method == "buffer_noprobe":
                    value = buffer_once(comm, source, state, expected, rss_baseline, probes=False)
                if rep >= args.warmups:
                    times[method][size].append(value)
            # the phases: one more instrumented repetition, kept apart from the timings above
            if not tracemalloc.is_tracing():
                tracemalloc.start()
            stamps = []
            start = time.perf_counter()
            buffer_once(comm, source, state, expected, rss_baseline,
                        clock=lambda name, stamps=stamps: stamps.append((name, time.perf_counter())))
            stamps.append(("total", time.perf_counter()))
            if rep >= args.warmups:
                last, mine = start, {}
                for name, at in stamps:
                    mine[name] = at - (start if name == "total" else last)
                    last = at if name != "total" else last
                every = comm.allgather(mine)
                for name in PHASES:
                    phases[size][name].append(max(row[name] for row in every))
    if comm.rank == 0:
        print(json.dumps({"times": times, "phases": phases, "ranks": comm.size, "thread_level": MPI.Query_thread()}))
    return 0


def main(argv=None) -> int:
    from c_reference import MPIEXEC, kernel_env, spread

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--sizes", default="8,1048576,4194304")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--memory-mode", default="4k")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--thread-level", default="multiple", choices=("single", "multiple"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    subprocess.run(["make", "-C", str(ROOT), "osu-ref"], check=True, capture_output=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    cmd = [MPIEXEC, "-n", str(args.ranks), sys.executable, __file__, "--worker", "--sizes", args.sizes,
           "--methods", args.methods, "--repetitions", str(args.repetitions), "--warmups", str(args.warmups),
           "--memory-mode", args.memory_mode]
    rounds = []
    for rnd in range(args.rounds):
        done = subprocess.run(cmd, capture_output=True, text=True, env=kernel_env(args.thread_level), timeout=900)
        if done.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        rounds.append(out)
        print(f"round {rnd + 1}/{args.rounds}: " + " ".join(
            f"{m}@{s}={statistics.median(out['times'][m][str(s)]) * 1e6:.1f}us" for s in sizes for m in methods),
            file=sys.stderr, flush=True)
    print(f"\nbcast at {args.ranks} ranks, thread level {args.thread_level}, {args.rounds} rounds of "
          f"{args.repetitions} interleaved repetitions; time / C osu_bcast: median of per-round ratios [min-max]")
    print("| method | " + " | ".join(f"{s} B" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for method in methods:
        med = [statistics.median(statistics.median(r["times"][method][str(s)]) for r in rounds) * 1e6 for s in sizes]
        print(f"| {method} (us) | " + " | ".join(f"{m:.1f}" for m in med) + " |")
    for method in methods:
        if method == "C":
            continue
        cells = [spread([statistics.median(r["times"][method][str(s)]) / statistics.median(r["times"]["C"][str(s)])
                         for r in rounds]) for s in sizes]
        print(f"| {method} / C | " + " | ".join(cells) + " |")
    print("\nphases of one buffer repetition, slowest rank, us (median over rounds of the round medians):")
    print("| phase | " + " | ".join(f"{s} B" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for phase in PHASES:
        cells = [statistics.median(statistics.median(r["phases"][str(s)][phase]) for r in rounds) * 1e6
                 for s in sizes]
        print(f"| {phase} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
