"""The page mode of the buffers as a factor: uni and bidi at 1-4 MiB with 4 KiB pages, huge pages, numpy's.

Run: .venv/bin/python bench/memory_mode.py [--rounds 5]

A round runs bench/stream_loops.py's worker (2 ranks, window 64, OSU's counts; the C loop and the
persistent Python loop alternating repetition by repetition on the same buffers) once per memory
mode of movebench.core.memory.allocate, in an order rotated every round:
- 4k: base pages only (MADV_NOHUGEPAGE), as OSU's posix_memalign buffers on a THP=madvise system;
- thp: buffers on a 2 MiB boundary with MADV_HUGEPAGE;
- numpy: np.empty, what the kernels allocate today (numpy advises huge pages from 4 MiB, unaligned).
The figure per round is a mode's median bandwidth over 4k's (same loop); the table gives the median
over rounds [min-max]. MPICH's own shared-memory cells are not the buffers': they follow
/sys/kernel/mm/transparent_hugepage/shmem_enabled, recorded with the rest by core.memory.system_facts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from c_reference import kernel_env, spread  # noqa: E402
from stream_loops import run_worker  # noqa: E402

from movebench.core import memory  # noqa: E402

MODES = ("4k", "thp", "numpy")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1048576,2097152,4194304")
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--variants", default="C,persistent")
    parser.add_argument("--thread-level", default="multiple", choices=("single", "multiple"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    env = kernel_env(args.thread_level)
    env.pop("NUMPY_MADVISE_HUGEPAGE")  # the numpy mode is numpy's own behaviour, advice included
    rows, facts = [], {}
    for rnd in range(args.rounds):
        order = MODES[rnd % len(MODES):] + MODES[: rnd % len(MODES)]
        got = {}
        for mode in order:
            for pattern in ("uni", "bidi"):
                out = run_worker(pattern, sizes, variants, args.repetitions, 1, env, memory_mode=mode)
                facts[mode] = out["memory"]
                for variant in variants:
                    for size in sizes:
                        got[(mode, pattern, variant, size)] = statistics.median(out["results"][variant][size])
        rows.append({"|".join(map(str, k)): v for k, v in got.items()})
        print(f"round {rnd + 1}/{args.rounds}: " + " ".join(
            f"{p}/{v}@{s}:thp/4k={got[('thp', p, v, s)] / got[('4k', p, v, s)]:.2f}" for p in ("uni", "bidi")
            for v in variants for s in sizes), file=sys.stderr, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"rounds": rows, "memory": facts}, indent=1))
    system = memory.system_facts()
    print(f"\nmemory: page {system['page_size']} B, THP enabled={system['thp_enabled']} "
          f"defrag={system['thp_defrag']} shmem={system['thp_shmem_enabled']}, numpy advises huge pages: "
          f"{system['numpy_madvise_hugepage']}, allocator env {system['allocator_env'] or 'none'}")
    for mode, fact in facts.items():
        buf = fact["buffers"]["send"]
        print(f"  {mode}: send buffer of {buf['nbytes']} B: address mod 4 KiB {buf['address_mod_4k']}, "
              f"mod 2 MiB {buf['address_mod_2m']}, in huge pages {buf['huge_page_bytes']} B")
    print(f"\nbandwidth by memory mode, 2 ranks, window 64, {args.rounds} rounds of {args.repetitions} interleaved "
          "repetitions: GB/s medians, and mode / 4k: median of per-round ratios [min-max]")
    print("| pattern | loop | size | 4k GB/s | thp GB/s | numpy GB/s | thp / 4k | numpy / 4k |")
    print("|---|---|---|---|---|---|---|---|")
    for pattern in ("uni", "bidi"):
        for variant in variants:
            for size in sizes:
                def val(r, mode, p=pattern, v=variant, s=size):
                    return r[f"{mode}|{p}|{v}|{s}"]
                med = {m: statistics.median(val(r, m) for r in rows) / 1e9 for m in MODES}
                print(f"| {pattern} | {variant} | {size} | {med['4k']:.2f} | {med['thp']:.2f} | {med['numpy']:.2f} | "
                      f"{spread([val(r, 'thp') / val(r, '4k') for r in rows])} | "
                      f"{spread([val(r, 'numpy') / val(r, '4k') for r in rows])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
