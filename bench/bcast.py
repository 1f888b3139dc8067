#!/usr/bin/env python
"""Benchmark of the bcast family, in one run:

1. The study's cases at 2 ranks: dense 10000x10000 float64 (800 MB) and sparse
   10000x10000 CSR at densities 0.0008, 0.008 and 0.6, by every method: median time,
   receiver and root memory, and each method's speed-up over pickle. A case that
   would not fit in memory_fraction of MemAvailable is scaled down (rows), and said so.
   (The study's five methods; `osu`, a loop of 110 calls per repetition, would take
   minutes per repetition at 800 MB and says nothing new there: part 2 has it.)
2. The `buffer` and `osu` methods beside mpi4py's demo/osu_bcast.py (bench/mpi4py_demo/)
   at 1 MiB, 2 and 4 ranks: buffer - osu is what metadata and the object cost.

Both parts interleave what they compare (design.md: repetitions vary 20-50% here):
part 1 runs every method once per round, in an order rotated each round; part 2
rotates osu_bcast.py, buffer and osu, the first one changed each round. A speed-up or
ratio is the median over rounds of the ratio within a round (pairwise), never one
run against another. Each kernel run is the bcast kernel under mpiexec, started by
movebench.engine.launch's command exactly as a campaign point runs (warm-ups recorded, not counted).

    python bench/bcast.py                  # the full benchmark (about 10 minutes on 2 cores)
    python bench/bcast.py --quick          # 1000x1000 and 2 rounds: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT_DIR / "src"))

from movebench import families  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine import admission  # noqa: E402
from movebench.engine.launch import run_kernel  # noqa: E402
from movebench.families import bcast  # noqa: E402
from movebench.families.bcast.kernel import IN_PLACE  # noqa: E402

MPIEXEC = Path(sys.executable).with_name("mpiexec")
OSU_BCAST = ROOT_DIR / "bench" / "mpi4py_demo" / "osu_bcast.py"
ENV = {**os.environ, "PYTHONPATH": f"{ROOT_DIR / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
OSU_SIZE = 1 << 20
MiB = 2**20
METHODS = ("pickle", "buffer", "pkl5", "p2p", "rma")  # the study's; osu is in part 2


def run(cmd: list[str], timeout: float = 900) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


LOAD = []  # 1-minute load average before each kernel run: this machine may be shared


def kernel(ranks: int, case: dict, method: str, repetitions: int, warmups: int) -> tuple[list[dict], dict]:
    LOAD.append(os.getloadavg()[0])
    point = {"kind": case["kind"], "method": method, "nodes": 1, "ranks": ranks, "shape": case["shape"]}
    if case["kind"] == "sparse":
        point["density"] = case["density"]
    point["dtype"] = "float64"
    with tempfile.TemporaryDirectory(prefix="bench-bcast-") as tmp:
        done, recs, info = run_kernel(families.load("bcast").task(point, {"seed": 2024}, repetitions, warmups), tmp,
                                      str(MPIEXEC), env=ENV)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): bcast {point}\n{done.stdout}\n{done.stderr}")
    bad = [r for r in recs if not r["ok"]]
    if bad:
        sys.exit(f"verification failed in {point}: {bad[0]['error']}")
    return recs, info


def osu_bcast_us(ranks: int) -> float:
    """osu_bcast.py's latency in microseconds at 1 MiB (rank 0's mean over 100 back-to-back Bcasts)."""
    text = run([str(MPIEXEC), "-n", str(ranks), sys.executable, str(OSU_BCAST)])
    match = re.search(rf"^\s*{OSU_SIZE}\s+([\d.]+)\s*$", text, re.M)
    if not match:
        sys.exit(f"no {OSU_SIZE}-byte line in osu_bcast.py's output:\n{text}")
    return float(match.group(1))


def fit_case(kind: str, shape: tuple[int, int], density: float | None, ranks: int, fraction: float):
    """The shape, rows scaled down until pickle (the hungriest method) fits; and a note if it was scaled."""
    budget = fraction * admission.mem_available()
    rows, cols = shape
    while True:
        point = {"kind": kind, "method": "pickle", "nodes": 1, "ranks": ranks, "shape": f"{rows}x{cols}",
                 "density": density, "dtype": "float64"}
        if bcast.FAMILY.node_memory_bytes(point, {}) <= budget:
            break
        rows = rows * 3 // 4
    note = "" if rows == shape[0] else f"scaled from {shape[0]}x{cols} to {rows}x{cols} to fit in memory"
    return (rows, cols), note


def median(values):
    return statistics.median(values) if values else float("nan")


# --- part 1: the study's cases ---


def study_cases(quick: bool):
    side = 1000 if quick else 10000
    cases = [("dense", (side, side), None)] + [("sparse", (side, side), d) for d in (0.0008, 0.008, 0.6)]
    return cases


def case_of(kind, shape, density):
    return {"kind": kind, "shape": bcast.shape_text(shape), "density": density}


SMALL_PAYLOAD = 64 * MiB


def part_study(rounds: int, repetitions: int, small_repetitions: int, warmups: int, quick: bool, fraction: float):
    ranks, results, notes, meta = 2, {}, {}, {}
    cases = []
    for kind, shape, density in study_cases(quick):
        fitted, note = fit_case(kind, shape, density, ranks, fraction)
        cases.append((kind, fitted, density))
        if note:
            notes[(kind, density)] = note
    for rnd in range(rounds):
        order = METHODS[rnd % len(METHODS) :] + METHODS[: rnd % len(METHODS)]
        for kind, shape, density in cases:
            for method in order:
                started = time.time()
                # Milliseconds-long broadcasts need more repetitions than 3 for a stable median, and cost nothing.
                small = bcast.payload_bytes(kind, shape, "float64", density) < SMALL_PAYLOAD
                reps = small_repetitions if small else repetitions
                recs, meta = kernel(ranks, case_of(kind, shape, density), method, reps, warmups)
                results.setdefault((kind, bcast.shape_text(shape), density), {}).setdefault(method, []).append(recs)
                print(
                    f"  round {rnd + 1}/{rounds} {kind} {bcast.shape_text(shape)} d={density} {method}: "
                    f"median {median([r['elapsed_s'] for r in counted(recs)]):.4f} s "
                    f"({time.time() - started:.0f} s wall)",
                    flush=True,
                )
    return results, notes, meta


def summarize_study(results):
    rows = []
    for (kind, shape, density), by_method in results.items():
        pickle_rounds = [median([r["elapsed_s"] for r in counted(recs)]) for recs in by_method["pickle"]]
        for method, runs in by_method.items():
            recs = [r for run_ in runs for r in counted(run_)]
            round_medians = [median([r["elapsed_s"] for r in counted(run_)]) for run_ in runs]
            ratios = [p / m for p, m in zip(pickle_rounds, round_medians, strict=True)]
            payload = recs[0]["payload_bytes"]
            rows.append(
                {
                    "kind": kind,
                    "shape": shape,
                    "density": density,
                    "method": method,
                    "payload_bytes": payload,
                    "nnz": recs[0].get("nnz"),
                    "n": len(recs),
                    "median_s": median([r["elapsed_s"] for r in recs]),
                    "cold_s": median([run_[0]["elapsed_s"] for run_ in runs if run_[0]["warmup"]]),
                    "speedup_vs_pickle": median(ratios),
                    "speedup_min": min(ratios),
                    "speedup_max": max(ratios),
                    "receiver_rss_bytes": median([r["rss_hwm_delta_bytes"] for r in recs]),
                    "receiver_traced_bytes": median([r["tracemalloc_peak_bytes"] for r in recs]),
                    "root_rss_bytes": median([r["root_rss_hwm_delta_bytes"] for r in recs]),
                    "root_traced_bytes": median([r["root_tracemalloc_peak_bytes"] for r in recs]),
                }
            )
    return rows


def print_study(rows, notes):
    print("\nPart 1: 2 ranks, float64. time = median of counted repetitions (slowest rank, barrier-aligned);")
    print("speed-up = median over rounds of pickle's round median / the method's; [min-max] over rounds.")
    print("receiver extra = RSS high-water delta (reused receive buffers included) / payload;")
    print("allocated = tracemalloc peak during the repetition (the study's 'allocated').")
    header = (
        f"{'case':<32} {'method':<7} {'n':>3} {'time s':>8} {'cold s':>8} {'vs pickle':>18} "
        f"{'recv extra':>10} {'recv alloc':>11} {'root extra':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        case = f"{row['kind']} {row['shape']}" + (f" d={row['density']:g}" if row["density"] else "")
        spread = f"{row['speedup_vs_pickle']:.2f}x [{row['speedup_min']:.2f}-{row['speedup_max']:.2f}]"
        print(
            f"{case:<32} {row['method']:<7} {row['n']:>3} {row['median_s']:>8.4f} {row['cold_s']:>8.4f} "
            f"{spread:>18} {row['receiver_rss_bytes'] / row['payload_bytes']:>9.2f}x "
            f"{row['receiver_traced_bytes'] / MiB:>7.1f} MiB {row['root_rss_bytes'] / row['payload_bytes']:>10.2f}x"
        )
    for (kind, density), note in notes.items():
        print(f"note: {kind} d={density}: {note}")
    payloads = {(r["kind"], r["shape"], r["density"]): r for r in rows if r["method"] == "pickle"}
    for (kind, shape, density), row in payloads.items():
        nnz = f", nnz {row['nnz']}" if row["nnz"] is not None else ""
        print(
            f"payload {kind} {shape}"
            + (f" d={density:g}" if density else "")
            + f": {row['payload_bytes'] / 1e6:.1f} MB{nnz}"
        )
    dense = [r for r in rows if r["kind"] == "dense" and r["method"] in IN_PLACE]
    for row in dense:
        fast = row["speedup_vs_pickle"] >= 3
        lean = row["receiver_rss_bytes"] <= 1.1 * row["payload_bytes"]
        print(
            f"expectation (dense, {row['method']}): >= 3x faster than pickle: "
            f"{'holds' if fast else 'does not hold'} ({row['speedup_vs_pickle']:.2f}x); receiver extra <= 1.1 "
            f"payloads: {'holds' if lean else 'does not hold'} "
            f"({row['receiver_rss_bytes'] / row['payload_bytes']:.3f}x)"
        )


# --- part 2: buffer beside osu_bcast.py ---


def ratios(tops, bottoms) -> dict:
    """Per-round ratios: their median, min and max."""
    values = [t / b for t, b in zip(tops, bottoms, strict=True)]
    return {"median": median(values), "min": min(values), "max": max(values)}


def part_osu(rounds: int, repetitions: int, warmups: int, osu_repetitions: int = 5):
    rows = []
    case = {"kind": "dense", "shape": str(OSU_SIZE // 8), "density": None}
    steps = ("osu_bcast.py", "buffer", "osu")
    for ranks in (2, 4):
        times = {step: [] for step in steps}
        for rnd in range(rounds):
            for step in steps[rnd % 3:] + steps[:rnd % 3]:
                if step == "osu_bcast.py":
                    times[step].append(osu_bcast_us(ranks))
                else:
                    # osu: each repetition is osu_bcast's 100 timed calls already
                    reps = repetitions if step == "buffer" else osu_repetitions
                    recs, _ = kernel(ranks, case, step, reps, warmups if step == "buffer" else 1)
                    times[step].append(median([r["elapsed_s"] for r in counted(recs)]) * 1e6)
            print(f"  round {rnd + 1}/{rounds} {ranks} ranks: "
                  + ", ".join(f"{step} {times[step][-1]:.1f} us" for step in steps), flush=True)
        rows.append({"ranks": ranks, **{f"{step}_us": median(times[step]) for step in steps},
                     "buffer/osu_bcast.py": ratios(times["buffer"], times["osu_bcast.py"]),
                     "osu/osu_bcast.py": ratios(times["osu"], times["osu_bcast.py"]),
                     "buffer/osu": ratios(times["buffer"], times["osu"]),
                     "rounds": times})
    return rows


def print_osu(rows, repetitions):
    print("\nPart 2: 1 MiB broadcast. osu_bcast.py: rank 0's mean over 100 back-to-back Bcasts (10 skipped);")
    print(
        f"buffer: median of {repetitions} repetitions, each a barrier, the metadata bcast and the Bcast, "
        "timed to the slowest rank;\nosu: movebench's osu method, the average over ranks of each rank's mean of 100 "
        "back-to-back Bcasts (10 skipped), median of its repetitions. Ratios: median over rounds [min-max]."
    )
    print(f"{'ranks':>5} {'osu_bcast.py us':>15} {'buffer us':>10} {'osu us':>8} {'buffer / osu_bcast.py':>22} "
          f"{'osu / osu_bcast.py':>19} {'buffer / osu':>19}")
    for row in rows:
        cells = [f"{r['median']:.2f} [{r['min']:.2f}-{r['max']:.2f}]"
                 for r in (row["buffer/osu_bcast.py"], row["osu/osu_bcast.py"], row["buffer/osu"])]
        print(f"{row['ranks']:>5} {row['osu_bcast.py_us']:>15.1f} {row['buffer_us']:>10.1f} {row['osu_us']:>8.1f} "
              f"{cells[0]:>22} {cells[1]:>19} {cells[2]:>19}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of part 1")
    parser.add_argument("--repetitions", type=int, default=3, help="counted repetitions per kernel run, part 1")
    parser.add_argument(
        "--small-repetitions", type=int, default=30, help=f"the same, for payloads under {SMALL_PAYLOAD // MiB} MiB"
    )
    parser.add_argument("--warmups", type=int, default=1, help="warm-ups per kernel run, part 1 (the cold one)")
    parser.add_argument("--osu-rounds", type=int, default=5, help="interleaved rounds of part 2")
    parser.add_argument("--osu-repetitions", type=int, default=100, help="buffer's repetitions per run, part 2")
    parser.add_argument("--memory-fraction", type=float, default=0.8, help="share of MemAvailable part 1 may plan")
    parser.add_argument("--quick", action="store_true", help="1000x1000 and 2 rounds: a smoke run")
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--skip-osu", action="store_true")
    parser.add_argument("--out", default=str(ROOT_DIR / "results" / "bench" / "bcast.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.osu_rounds = min(args.rounds, 2), min(args.osu_rounds, 2)
    report, started = {"argv": sys.argv[1:], "started": time.time()}, time.time()
    if not args.skip_study:
        print("Part 1: study cases", flush=True)
        results, notes, meta = part_study(
            args.rounds, args.repetitions, args.small_repetitions, args.warmups, args.quick, args.memory_fraction
        )
        rows = summarize_study(results)
        print_study(rows, notes)
        report.update(
            study=rows,
            notes={f"{k} {d}": n for (k, d), n in notes.items()},
            mpi_library=meta.get("mpi_library"),
            mpi_thread_level=meta.get("mpi_thread_level"),
            cpu_model=meta.get("cpu_model"),
        )
    if not args.skip_osu:
        print("\nPart 2: buffer and osu beside osu_bcast.py at 1 MiB", flush=True)
        rows = part_osu(args.osu_rounds, args.osu_repetitions, 10)
        print_osu(rows, args.osu_repetitions)
        report["osu"] = rows
    report["wall_s"] = time.time() - started
    report["load_1min"] = {"min": min(LOAD), "median": median(LOAD), "max": max(LOAD), "cores": os.cpu_count()}
    print(
        f"\n1-minute load average before the kernel runs: min {min(LOAD):.1f}, median {median(LOAD):.1f}, "
        f"max {max(LOAD):.1f} on {os.cpu_count()} cores; more than the ranks means other work shared the machine"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\n{report['wall_s']:.0f} s; numbers in {out}")


if __name__ == "__main__":
    main()
