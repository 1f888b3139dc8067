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

uni / C and bidi / C are bandwidth ratios (1.0 = parity, below 1 movebench is slower); the bcast rows
are time ratios over osu_bcast's average latency (above 1 movebench is slower): `buffer` (the study's
in-place method: one call with its metadata, timed from a barrier to the slowest rank, median of 100
repetitions) and `osu` (the pure transfer timed as osu_bcast: the average over ranks of each rank's mean
call, `--repeats` repetitions of OSU's counts). The issue's target: osu within 1.1x of C at 1 and 4 MiB.
The two methods run one after the other inside movebench's turn, their order swapped every round.
Both sides run at the same MPI thread level (mpi4py's default is `multiple`) and on 4 KiB pages:
osu_ref's page-aligned buffers get base pages on this THP=madvise machine, the bcast kernel's timed
buffers come from core.memory.allocate in mode 4k, and numpy's advice of huge pages for arrays of
4 MiB and more is turned off for the other kernels (NUMPY_MADVISE_HUGEPAGE=0), so
that 4 MiB compares loops, not memory modes (docs/notes/kernels.md, section 5).
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
    subprocess.run(["make", "-s", "-C", str(ROOT), "osu-ref"], check=True)  # rebuilds when osu_ref.c changed
    return OSU_REF


def kernel_env(thread_level: str | None, extra: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "NUMPY_MADVISE_HUGEPAGE": "0"}
    if thread_level:
        env["MPI4PY_RC_THREAD_LEVEL"] = thread_level
    env.update(extra or {})
    return env


def run_c(test: str, sizes: list[int], repeats: int, ranks: int = 2, thread_level: str = "multiple",
          pages: str = "4k", env: dict | None = None) -> dict[int, list[float]]:
    """osu_ref's figures per size: MB/s (bw, bibw) or average latency in us (bcast), `repeats` each."""
    # -u 1: one uncounted measurement per size, as the shuffle points' one warm-up repetition
    cmd = [MPIEXEC, "-n", str(ranks), str(build_osu_ref()), test, "-m", ",".join(map(str, sizes)),
           "-w", str(WINDOW), "-r", str(repeats), "-u", "1", "-t", thread_level, "-p", pages]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env or os.environ.copy(),
                         timeout=600).stdout
    figures: dict[int, list[float]] = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == test:
            figures.setdefault(int(parts[1]), []).append(float(parts[2]))
    return figures


def movebench_point(family: str, params: tuple[dict, dict], repetitions: int, warmups: int,
                    measure: str = "bandwidth_Bps", env: dict | None = None) -> float:
    """Run one movebench point (its JSON task, as a campaign runs its kernel) and return the median of `measure`."""
    sys.path.insert(0, str(ROOT / "src"))
    from movebench import families
    from movebench.core.tables import counted
    from movebench.engine.launch import run_kernel

    point, settings = params
    with tempfile.TemporaryDirectory(prefix="movebench-cref-") as tmp:
        done, recs, _ = run_kernel(families.load(family).task(point, settings, repetitions, warmups), tmp, MPIEXEC,
                                   timeout=600, env=env or kernel_env(None))
    if done.returncode != 0 or recs is None:
        sys.exit(f"failed ({done.returncode}): {family} {point}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    bad = [r for r in recs if not r["ok"]]
    if bad:
        sys.exit(f"{family} {point}: {bad[0].get('error')}")
    return statistics.median(r[measure] for r in counted(recs))


def shuffle_params(pattern: str, size: int, ranks: int = 2, thread_level: str = "multiple") -> tuple[dict, dict]:
    """The campaign's point at OSU's loop counts (iterations per repetition, skipped iterations), 4 KiB pages."""
    iterations, skip = osu_counts("bw", size)
    point = {"pattern": pattern, "nodes": 1, "ranks": ranks, "message_size": size, "window": WINDOW,
             "mpi_thread_level": thread_level, "memory_mode": "4k"}
    return point, {"iterations": iterations, "skip": skip, "repetition_time": 0.25}


def bcast_params(size: int, method: str = "buffer", ranks: int = 2) -> tuple[dict, dict]:
    """A dense float64 array of `size` bytes (8 bytes at least)."""
    point = {"kind": "dense", "method": method, "nodes": 1, "ranks": ranks, "shape": str(max(size // 8, 1)),
             "dtype": "float64"}
    return point, {"seed": 2024}


# buffer: one call per repetition, so many repetitions; osu: each repetition is OSU's loop of 100-1000 calls
BCAST_METHODS = {"buffer": (100, 10), "osu": (None, 1)}


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
    parser.add_argument("--tests", default="uni,bidi,bcast", help="which comparisons, e.g. bcast alone")
    parser.add_argument("--bcast-sizes", default=",".join(map(str, [8] + SIZES)), help="bcast payloads, bytes")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args(argv)
    env = kernel_env(args.thread_level)
    wanted = set(args.tests.split(","))
    tests = [(name, ctest, SIZES) for name, ctest in (("uni", "bw"), ("bidi", "bibw")) if name in wanted]
    if "bcast" in wanted and not args.skip_bcast:
        tests.append(("bcast", "bcast", [int(s) for s in args.bcast_sizes.split(",")]))
    # what is compared with C: one series per shuffle pattern, one per bcast method
    series = [(f"bcast {m}", sizes) if name == "bcast" else (name, sizes)
              for name, _, sizes in tests for m in (BCAST_METHODS if name == "bcast" else [None])]
    rounds = []
    for rnd in range(args.rounds):
        row = {}
        for name, ctest, sizes in tests:
            steps = ("c", "py") if rnd % 2 == 0 else ("py", "c")
            for step in steps:
                if step == "c":
                    # one size a launch, as a point: a size after another in one launch can run at another speed
                    # (docs/stacks.md, "Launch against launch, loop against loop")
                    figures = {size: run_c(ctest, [size], args.repeats, thread_level=args.thread_level,
                                           env=env)[size] for size in sizes}
                    for size in sizes:
                        value = statistics.median(figures[size])
                        if ctest == "bcast":
                            for method in BCAST_METHODS:
                                row[(f"bcast {method}", "c", size)] = value * 1e-6
                        else:
                            row[(name, "c", size)] = value * 1e6
                    continue
                for size in sizes:
                    if name == "bcast":
                        methods = list(BCAST_METHODS) if rnd % 2 == 0 else list(BCAST_METHODS)[::-1]
                        for method in methods:
                            reps, warmups = BCAST_METHODS[method]
                            row[(f"bcast {method}", "py", size)] = movebench_point(
                                "bcast", bcast_params(size, method), reps or args.repeats, warmups,
                                measure="elapsed_s", env=env)
                    else:
                        row[(name, "py", size)] = movebench_point(
                            "shuffle", shuffle_params(name, size, thread_level=args.thread_level), args.repeats, 1,
                            env=env)
        rounds.append(row)
        summary = " ".join(f"{name}@{size}={row[(name, 'py', size)] / row[(name, 'c', size)]:.2f}"
                           for name, sizes in series for size in sizes)
        print(f"round {rnd + 1}/{args.rounds}: {summary}", file=sys.stderr, flush=True)
    print(f"\nmovebench vs C (bench/osu_ref), 2 ranks, window {WINDOW}, thread level {args.thread_level}, 4 KiB "
          f"pages, {args.rounds} interleaved rounds: median of per-round ratios [min-max]; load average "
          f"{os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} cores")
    all_sizes = sorted({s for _, _, sizes in tests for s in sizes})
    print("| | " + " | ".join(_label(s) for s in all_sizes) + " |")
    print("|---|" + "---|" * len(all_sizes))
    for name, sizes in series:
        cells = []
        for size in all_sizes:
            if size not in sizes:
                cells.append("")
                continue
            ratios = [r[(name, "py", size)] / r[(name, "c", size)] for r in rounds]
            cells.append(spread(ratios))
        what = {"uni": "uni / C osu_bw", "bidi": "bidi / C osu_bibw"}.get(name, f"{name} time / C osu_bcast")
        print(f"| {what} | " + " | ".join(cells) + " |")
    print("\nmedians over rounds (GB/s for uni and bidi, us for bcast):")
    for name, sizes in series:
        for side in ("py", "c"):
            if side == "c" and name == "bcast osu":
                continue  # the same C figures as bcast buffer's
            vals = [statistics.median(r[(name, side, s)] for r in rounds) for s in sizes]
            text = [f"{v * 1e6:.2f}" if name.startswith("bcast") else f"{v / 1e9:.2f}" for v in vals]
            print(f"  {name:12s} {'movebench' if side == 'py' else 'C':9s} " + " ".join(
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
