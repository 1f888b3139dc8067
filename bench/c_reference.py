"""movebench's uni, bidi and bcast kernels against a C reference built with the same MPICH (bench/osu_ref).

Run: .venv/bin/python bench/c_reference.py [--rounds 5] [--thread-level multiple]
(`make bench` builds build/bench/osu_ref with the venv's mpicc and runs this.)

At 2 ranks, window 64, OSU's loop counts (bw/bibw: 100 timed after 10 skipped up to 8 KiB, 20 after 2
above; bcast: 1000 after 200 up to 8 KiB, 100 after 10 above), one round runs the C program once per
test (every size, `--repeats` measurements each) and then movebench's kernel once per test and size
(`--repeats` counted repetitions after one warm-up), the order of C and Python swapped every round.
Within a round the figure of each side is the median of its measurements; the ratio is taken within
the round; the table gives the median of the per-round ratios and their min-max (this machine varies
20-50% run to run: never compare one run against another).

uni / C and bidi / C are bandwidth ratios (1.0 = parity, below 1 movebench is slower); bcast / C is a
time ratio (movebench's `buffer` repetition time over osu_bcast's average latency: above 1 movebench
is slower). Both sides run at the same MPI thread level (mpi4py's default is `multiple`) and on 4 KiB
pages: osu_ref's page-aligned buffers get base pages on this THP=madvise machine, and numpy's advice of
huge pages for arrays of 4 MiB and more is turned off for the kernels (NUMPY_MADVISE_HUGEPAGE=0), so
that 4 MiB compares loops, not memory modes (docs/kernels.md, section 5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).with_name("mpiexec"))
OSU_REF = ROOT / "build" / "bench" / "osu_ref"
SIZES = [1024, 4096, 65536, 1 << 20, 4 << 20]
BCAST_SIZES = [8, 1 << 20, 4 << 20]
WINDOW = 64
LARGE_MESSAGE_SIZE = 8192


def osu_counts(test: str, size: int) -> tuple[int, int]:
    """(timed iterations, skipped iterations) as OSU: osu_bw/osu_bibw and osu_bcast's defaults."""
    large = size > LARGE_MESSAGE_SIZE
    if test == "bcast":
        return (100, 10) if large else (1000, 200)
    return (20, 2) if large else (100, 10)


def build_osu_ref() -> Path:
    if not OSU_REF.exists():
        subprocess.run(["make", "-C", str(ROOT), "osu-ref"], check=True)
    return OSU_REF


def kernel_env(thread_level: str | None, extra: dict | None = None) -> dict:
    # the shuffle kernel's buffers come from core.memory in the point's memory_mode; numpy's advice of huge
    # pages is turned off for every other array of the kernels as well
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "NUMPY_MADVISE_HUGEPAGE": "0"}
    if thread_level:
        env["MPI4PY_RC_THREAD_LEVEL"] = thread_level
    env.update(extra or {})
    return env


def run_c(test: str, sizes: list[int], repeats: int, ranks: int = 2, thread_level: str = "multiple",
          pages: str = "4k", env: dict | None = None) -> dict[int, list[float]]:
    """osu_ref's figures per size: MB/s (bw, bibw) or average latency in us (bcast), `repeats` each."""
    cmd = [MPIEXEC, "-n", str(ranks), str(build_osu_ref()), test, "-m", ",".join(map(str, sizes)),
           "-w", str(WINDOW), "-r", str(repeats), "-t", thread_level, "-p", pages]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env or os.environ.copy(),
                         timeout=600).stdout
    figures: dict[int, list[float]] = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == test:
            figures.setdefault(int(parts[1]), []).append(float(parts[2]))
    return figures


def movebench_point(family: str, point: dict, settings: dict, repetitions: int, warmups: int,
                    measure: str = "bandwidth_Bps", env: dict | None = None) -> float:
    """Run one movebench point's kernel as a campaign runs it (its JSON task, movebench.launch), and return
    the median of `measure` over the measured repetitions."""
    from movebench.launch import make_task, run_kernel

    task = make_task(family, point, settings, repetitions, warmups)
    with tempfile.TemporaryDirectory(prefix="movebench-cref-") as tmp:
        proc, recs, _ = run_kernel(task, tmp, env=env or kernel_env(None), timeout=600)
    if proc.returncode != 0 or not recs:
        sys.exit(f"{family} {point}: failed ({proc.returncode})\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    bad = [r for r in recs if not r["ok"]]
    if bad:
        sys.exit(f"{family} {point}: {bad[0].get('error')}")
    return statistics.median(r[measure] for r in recs if not r["warmup"])


def shuffle_point(pattern: str, size: int, thread_level: str) -> tuple[dict, dict]:
    """The campaign's point at OSU's loop counts (iterations per repetition, skipped iterations)."""
    iterations, skip = osu_counts("bw", size)
    point = {"pattern": pattern, "nodes": 1, "ranks": 2, "message_size": size, "window": WINDOW,
             "mpi_thread_level": thread_level, "memory_mode": "4k"}
    return point, {"iterations": iterations, "repetition_time": 0.5, "skip": skip}


def bcast_point(size: int, method: str) -> tuple[dict, dict]:
    return ({"kind": "dense", "method": method, "nodes": 1, "ranks": 2, "shape": f"1x{max(1, size // 8)}",
             "dtype": "float64"}, {"seed": 1})


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per side, size and round")
    parser.add_argument("--thread-level", default="multiple", choices=("single", "multiple"),
                        help="MPI thread level of both sides (mpi4py's default: multiple)")
    parser.add_argument("--skip-bcast", action="store_true")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args(argv)
    env = kernel_env(args.thread_level)
    tests = [("uni", "bw", SIZES), ("bidi", "bibw", SIZES)]
    if not args.skip_bcast:
        tests.append(("bcast", "bcast", [8] + SIZES))
    rounds = []
    for rnd in range(args.rounds):
        row = {}
        for name, ctest, sizes in tests:
            steps = ("c", "py") if rnd % 2 == 0 else ("py", "c")
            for step in steps:
                if step == "c":
                    figures = run_c(ctest, sizes, args.repeats, thread_level=args.thread_level, env=env)
                    for size in sizes:
                        value = statistics.median(figures[size])
                        row[(name, "c", size)] = value * 1e6 if ctest != "bcast" else value * 1e-6
                    continue
                for size in sizes:
                    if name == "bcast":
                        row[(name, "py", size)] = movebench_point("bcast", *bcast_point(size, "buffer"), 100, 10,
                                                                  measure="elapsed_s", env=env)
                    else:
                        row[(name, "py", size)] = movebench_point(
                            "shuffle", *shuffle_point(name, size, args.thread_level), args.repeats, 1, env=env)
        rounds.append(row)
        summary = " ".join(f"{name}@{size}={row[(name, 'py', size)] / row[(name, 'c', size)]:.2f}"
                           for name, _, sizes in tests for size in sizes)
        print(f"round {rnd + 1}/{args.rounds}: {summary}", file=sys.stderr, flush=True)
    print(f"\nmovebench vs C (bench/osu_ref), 2 ranks, window {WINDOW}, thread level {args.thread_level}, 4 KiB "
          f"pages, {args.rounds} interleaved rounds: median of per-round ratios [min-max]; load average "
          f"{os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} cores")
    all_sizes = sorted({s for _, _, sizes in tests for s in sizes})
    print("| | " + " | ".join(_label(s) for s in all_sizes) + " |")
    print("|---|" + "---|" * len(all_sizes))
    for name, _, sizes in tests:
        cells = []
        for size in all_sizes:
            if size not in sizes:
                cells.append("")
                continue
            ratios = [r[(name, "py", size)] / r[(name, "c", size)] for r in rounds]
            cells.append(spread(ratios))
        what = {"uni": "uni / C osu_bw", "bidi": "bidi / C osu_bibw", "bcast": "bcast buffer time / C osu_bcast"}
        print(f"| {what[name]} | " + " | ".join(cells) + " |")
    print("\nmedians over rounds (GB/s for uni and bidi, us for bcast):")
    for name, _, sizes in tests:
        for side in ("py", "c"):
            vals = [statistics.median(r[(name, side, s)] for r in rounds) for s in sizes]
            text = [f"{v * 1e6:.2f}" if name == "bcast" else f"{v / 1e9:.2f}" for v in vals]
            print(f"  {name:5s} {'movebench' if side == 'py' else 'C':9s} " + " ".join(
                f"{_label(s)}:{t}" for s, t in zip(sizes, text, strict=True)))
    if args.json:
        Path(args.json).write_text(json.dumps([{"|".join(map(str, k)): v for k, v in r.items()} for r in rounds]))
    return 0


def _label(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


if __name__ == "__main__":
    sys.exit(main())
