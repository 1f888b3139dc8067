"""One-node MPI points with and without UCX's memory hooks: the data path's figures and the fixed cost.

Run: .venv/bin/python bench/ucx_mem_events.py [--rounds 5]

movebench.engine.launch gives a one-node MPI point UCX_MEM_EVENTS=no (installing the hooks when libucs
loads costs each rank about 40 ms; they keep UCX's registration cache right for RDMA between
nodes, and on one node MPICH moves data through its own shared memory). This checks that the
figures do not move: each round runs every point below once as launch runs it (A: the default,
no hooks) and once with UCX_MEM_EVENTS=yes (B), in an order alternating every round, through
movebench.engine.launch.run_kernel (the point's kernel under mpiexec, as a campaign runs it).

Per point: the median over rounds of the per-round ratio A / B of the median counted bandwidth
(bytes / elapsed_s; above 1 A is faster) [min-max], and of the fixed cost, the job's wall time
less its timed seconds (timed_s where a record has it, else elapsed_s; below 1 A costs less).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine.launch import run_kernel  # noqa: E402

REPS, WARMUPS = 6, 1
# shuffle loops sized to move about 64 MiB per repetition; broadcasts at 1 MiB and 32 MB (2000 x 2000 float64)
STREAMS = [("uni", 4096), ("uni", 1 << 20), ("bidi", 4096), ("bidi", 4 << 20), ("alltoall", 65536)]
BCASTS = [("osu", "131072"), ("buffer", "131072"), ("pickle", "2000x2000"), ("buffer", "2000x2000")]


def tasks() -> dict[str, dict]:
    named = {}
    for pattern, size in STREAMS:
        point = {"pattern": pattern, "nodes": 1, "ranks": 2, "message_size": size, "window": 64}
        iterations = max(1, (64 << 20) // (size * 64))
        named[f"shuffle {pattern} {size} B"] = families.load("shuffle").task(point, {"iterations": iterations}, REPS,
                                                                             WARMUPS)
    for method, shape in BCASTS:
        point = {"kind": "dense", "method": method, "nodes": 1, "ranks": 2, "shape": shape, "dtype": "float64"}
        named[f"bcast {method} {shape}"] = families.load("bcast").task(point, {"seed": 2024}, REPS, WARMUPS)
    return named


def run(task: dict, folder: Path, env: dict) -> tuple[float, float]:
    """(median counted bandwidth, fixed cost in seconds) of one job."""
    start = time.perf_counter()
    done, recs, _ = run_kernel(task, folder, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0 or not recs or not all(r.get("ok", True) for r in recs):
        sys.exit(f"failed: {task.point}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    timed = sum(r.get("timed_s") or r["elapsed_s"] for r in recs)
    return statistics.median(r["bytes"] / r["elapsed_s"] for r in counted(recs)), wall - timed


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if k != "UCX_MEM_EVENTS"}
    sides = {"A": base, "B": {**base, "UCX_MEM_EVENTS": "yes"}}
    named = tasks()
    figures = {name: {"A": [], "B": []} for name in named}
    with tempfile.TemporaryDirectory(prefix="movebench-ucx-") as tmp:
        for rnd in range(args.rounds):
            order = ["A", "B"] if rnd % 2 == 0 else ["B", "A"]
            for name, task in named.items():
                for side in order:
                    figures[name][side].append(run(task, Path(tmp) / side, sides[side]))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"\nUCX_MEM_EVENTS unset (A, launch sets no) vs yes (B), 2 ranks, one node: median of {args.rounds} "
          "per-round ratios [min-max]")
    print("| point | bandwidth A/B | fixed cost A/B | fixed cost A, s | fixed cost B, s |")
    print("|---|---|---|---|---|")
    for name, sides_ in figures.items():
        bw = [a[0] / b[0] for a, b in zip(sides_["A"], sides_["B"], strict=True)]
        fixed = [a[1] / b[1] for a, b in zip(sides_["A"], sides_["B"], strict=True)]
        print(f"| {name} | {spread(bw)} | {spread(fixed)} | {statistics.median(a[1] for a in sides_['A']):.3f} | "
              f"{statistics.median(b[1] for b in sides_['B']):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
