"""MPICH at thread level single vs multiple: streams and broadcasts at 2 and 4 ranks, interleaved.

Run: .venv/bin/python bench/thread_level.py [--rounds 5] [--ranks 2,4]

mpi4py asks MPI_Init_thread for `multiple` unless told otherwise (mpi4py.rc.thread_level, or the
environment variable MPI4PY_RC_THREAD_LEVEL that sets it). A round runs, for each rank count, the
jobs below once at each level, the level first in a round alternating:
- streams: bench/stream_loops.py's worker, uni and bidi, variants current and persistent (and the C
  loop at 2 ranks), 4 KiB and 1 MiB;
- bcast: bench/bcast_overhead.py's worker, methods osu and buffer (and C), 8 B, 1 MiB and 4 MiB.
The figure per round is single / multiple of the job's median (bandwidth for streams: above 1 single
is faster; time for bcast: below 1 single is faster). 4 ranks on this 2-core machine oversubscribe it;
a job that does not end within --job-timeout seconds is stopped and counted as such (its wall time is
the figure then: MPICH at `single` busy-polls without yielding the CPU to the rank it waits for).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from c_reference import MPIEXEC, kernel_env, spread  # noqa: E402

STREAM_SIZES = [4096, 1 << 20]
BCAST_SIZES = [8, 1 << 20, 4 << 20]


def run_job(cmd: list[str], level: str, timeout: float) -> tuple[dict | None, float]:
    """(the worker's JSON or None when it ran past `timeout`, wall seconds)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kernel_env(level),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out[-3000:]}\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - start


def bcast_job(ranks: int, level: str, methods: list[str], repetitions: int, timeout: float):
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, str(ROOT / "bench" / "bcast_overhead.py"), "--worker",
           "--sizes", ",".join(map(str, BCAST_SIZES)), "--methods", ",".join(methods), "--repetitions",
           str(repetitions), "--warmups", "1"]
    out, wall = run_job(cmd, level, timeout)
    if out is None:
        return None, wall
    return {(m, int(s)): statistics.median(v) for m, by in out["times"].items() for s, v in by.items()}, wall


def stream_job(ranks: int, level: str, pattern: str, variants: list[str], repetitions: int, timeout: float):
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, str(ROOT / "bench" / "stream_loops.py"), "--worker",
           "--pattern", pattern, "--sizes", ",".join(map(str, STREAM_SIZES)), "--variants", ",".join(variants),
           "--repetitions", str(repetitions), "--warmups", "1"]
    out, wall = run_job(cmd, level, timeout)
    if out is None:
        return None, wall
    return {(v, int(s)): statistics.median(vals) for v, by in out["results"].items() for s, vals in by.items()}, wall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--job-timeout", type=float, default=120.0, help="seconds before a job counts as stalled")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    subprocess.run(["make", "-C", str(ROOT), "osu-ref"], check=True, capture_output=True)
    rows = []
    for rnd in range(args.rounds):
        for ranks in [int(r) for r in args.ranks.split(",")]:
            levels = ("single", "multiple") if rnd % 2 == 0 else ("multiple", "single")
            with_c = ["C"] if ranks == 2 else []
            figures, walls = {}, {}
            for level in levels:
                for pattern in ("uni", "bidi"):
                    got, walls[(level, pattern)] = stream_job(ranks, level, pattern, with_c + ["current", "persistent"],
                                                              args.repetitions, args.job_timeout)
                    for (variant, size), bw in (got or {}).items():
                        figures[(level, f"{pattern} {variant}", size)] = bw
                got, walls[(level, "bcast")] = bcast_job(ranks, level, with_c + ["osu", "buffer"], args.repetitions,
                                                         args.job_timeout)
                for (method, size), seconds in (got or {}).items():
                    figures[(level, f"bcast {method}", size)] = seconds
            for job in ("uni", "bidi", "bcast"):
                rows.append({"round": rnd, "ranks": ranks, "what": f"{job} job wall (s)", "size": 0,
                             "single": walls[("single", job)], "multiple": walls[("multiple", job)]})
            for (level, what, size), value in figures.items():
                if level == "single" and ("multiple", what, size) in figures:
                    rows.append({"round": rnd, "ranks": ranks, "what": what, "size": size, "single": value,
                                 "multiple": figures[("multiple", what, size)]})
            print(f"round {rnd + 1}/{args.rounds}, {ranks} ranks: " + " ".join(
                f"{r['what']}@{r['size']}={r['single'] / r['multiple']:.2f}" for r in rows
                if r["round"] == rnd and r["ranks"] == ranks), file=sys.stderr, flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\nsingle / multiple, median of per-round ratios [min-max] over {args.rounds} rounds "
          "(streams: bandwidth, >1 = single faster; bcast: time, <1 = single faster)")
    print("| ranks | measure | size | single | multiple | single / multiple |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["ranks"], r["what"], r["size"]) for r in rows})
    for ranks, what, size in keys:
        sel = [r for r in rows if (r["ranks"], r["what"], r["size"]) == (ranks, what, size)]
        unit = (1, "s") if "wall" in what else (1e6, "us") if what.startswith("bcast") else (1e-9, "GB/s")
        single = statistics.median(r["single"] for r in sel) * unit[0]
        multiple = statistics.median(r["multiple"] for r in sel) * unit[0]
        print(f"| {ranks} | {what} | {size} | {single:.2f} {unit[1]} | {multiple:.2f} {unit[1]} | "
              f"{spread([r['single'] / r['multiple'] for r in sel])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
