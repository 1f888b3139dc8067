"""movebench's kv beside Dragon's own gups_ddict.py at the same parameters, interleaved.

Run: .venv/bin/python bench/kv_gups.py [--rounds 5] [--passes 4] [--part ab]

gups_ddict.py is Dragon's (examples/benchmarks, tag v0.12.2, the release beside the pinned
dragonhpc 0.12.3); it is not part of movebench. Put it at bench/.cache/gups_ddict.py (ignored by git):
    curl -o bench/.cache/gups_ddict.py \
      https://raw.githubusercontent.com/DragonHPC/dragon/v0.12.2/examples/benchmarks/gups_ddict.py

Parameters of both: 1 node, 2 clients, 1 manager, DDict of 256 MiB, mem_frac 0.1, at most 200 keys
per client (200 keys at 4 KiB, 51 at 256 KiB: the same rule on both sides), the same Dragon segment
sizes, both launched through movebench.engine.launchers.dragon.

Part A: for every operation, value size and passes per timed round, one movebench point per data format
(kv.data_formats: bytes, movebench's default, and numpy, gups_ddict's own keys and values; 5 counted
rounds after 1 warm-up, each timing `passes` passes; `python -m movebench.engine.launch`, as a campaign
runs it) and one gups_ddict run (`--iterations passes`), in an order rotated every round. gups_ddict
starts its timer one pass early (i == skips, after `i += 1`): it times passes + 1 passes and divides
the keys of `passes` passes by that time, so its per-pass rate is its printed rate x (passes + 1) /
passes. Ratio = movebench's median aggregate bandwidth / gups_ddict's corrected one, per round; the
table: median over rounds [min-max].
To resolve 10 %, time long rounds: at 4 passes of 50 keys a round lasts ~0.1 s after a cold start and
single rounds span 0.4-1.6x; `--passes 40 --max-keys 200 --repetitions 1 --warmups 0` gave per-round
ranges of about +-20 % (docs/notes/kernels.md, section 7, "Same data").
Part B: bench/kv_variants.py, where the get loops of both tools alternate inside one Dragon job, and
movebench's put loops: one batch per timed round against N batches back to back.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine.launch import run_kernel  # noqa: E402
from movebench.families.kv import keys_per_client  # noqa: E402
from movebench.families.kv.kernel import segment_env, shm_bytes  # noqa: E402

PY = sys.executable
GUPS = ROOT / "bench" / ".cache" / "gups_ddict.py"
SECTION = {"total_mem": str(256 << 20), "mem_frac": 0.1, "max_keys": 200, "keys_per_client": None}  # --max-keys
TOTAL_MEM = 256 << 20
OPS = {"put": "put", "batch_put": "batchput", "get": "get", "frozen_get": "frozenget"}


def dragonrun(value_size: int) -> list[str]:
    cmd = [PY, "-m", "movebench.engine.launchers.dragon", "--shm-bytes", str(shm_bytes(TOTAL_MEM, value_size, 2))]
    for name, value in segment_env(value_size, 2).items():
        cmd += ["--env", f"{name}={value}"]
    return cmd + ["--", str(Path(PY).with_name("dragon")), "-s"]


def movebench_kv_point(operation: str, size: int, passes: int, tmp: Path, repetitions: int = 5,
                       warmups: int = 1, data_format: str = "bytes") -> dict:
    """One kv point run as a campaign runs it (its JSON task, movebench.engine.launch); the median of its counted
    rounds."""
    keys = keys_per_client(SECTION, 1, 2, size)
    point = {"operation": operation, "nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "value_size": size,
             "data_format": data_format}
    settings = {"streams_per_manager": 5, "total_mem": TOTAL_MEM, "iterations": passes, "keys_per_client": keys}
    task = families.load("kv").task(point, settings, repetitions, warmups)
    proc, recs, _ = run_kernel(task, tmp, timeout=600)
    if proc.returncode != 0 or not recs:
        sys.exit(f"movebench kv {operation} {size}: failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    bad = [r for r in recs if not r["ok"]]
    if bad:
        sys.exit(f"movebench kv {operation} {size}: {bad[0]['error']}")
    measured = counted(recs)
    assert all(r["iterations"] == passes for r in measured)
    return {"bw": statistics.median(r["bandwidth_Bps"] for r in measured), "keys": keys}


def gups_point(operation: str, size: int, passes: int) -> dict:
    """gups_ddict.py at one value size; its aggregate rate corrected for the extra timed pass."""
    if not GUPS.exists():
        sys.exit(f"{GUPS} is missing: see `python {Path(__file__).name} --help`")
    cmd = dragonrun(size) + [PY, str(GUPS), "--operation", OPS[operation], "--value_size_min", str(size),
                             "--value_size_max", str(size), "--nclients", "2", "--managers_per_node", "1",
                             "--num_nodes", "1", "--total_mem_size", str(TOTAL_MEM / 1024**3), "--mem_frac", "0.1",
                             "--max_keys", str(SECTION["max_keys"]), "--iterations", str(passes)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    row = re.search(rf"^\s*{size}\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", proc.stdout, re.M)
    if proc.returncode != 0 or not row:
        sys.exit(f"gups_ddict {operation} {size}: failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    iters, keys, ops_sum = int(row.group(1)), int(row.group(2)), float(row.group(5))
    # printed: keys x iters / T, T covering iters + 1 passes; per pass: keys x (iters + 1) / T
    return {"bw": ops_sum * (iters + 1) / iters * size, "bw_uncorrected": ops_sum * size, "keys": keys}


def part_a(args) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="movebench-kvgups-") as name:
        tmp = Path(name)
        for rnd in range(args.rounds):
            for passes in args.passes:
                for size in args.sizes:
                    for operation in args.operations:
                        steps = [*args.data_formats, "gups"]
                        turn = rnd % len(steps)
                        got = {}
                        for step in steps[turn:] + steps[:turn]:
                            if step == "gups":
                                got[step] = gups_point(operation, size, passes)
                            else:
                                got[step] = movebench_kv_point(operation, size, passes, tmp, args.repetitions,
                                                               args.warmups, step)
                        for data_format in args.data_formats:
                            row = {"round": rnd, "operation": operation, "size": size, "passes": passes,
                                   "data_format": data_format, "movebench": got[data_format]["bw"],
                                   "gups": got["gups"]["bw"], "gups_uncorrected": got["gups"]["bw_uncorrected"],
                                   "keys": (got[data_format]["keys"], got["gups"]["keys"])}
                            rows.append(row)
                            print(f"round {rnd} passes {passes} {operation:10s} {size:7d} {data_format:5s}: movebench "
                                  f"{row['movebench'] / 1e6:8.2f} MB/s, gups {row['gups'] / 1e6:8.2f} MB/s "
                                  f"(keys {row['keys']})", file=sys.stderr, flush=True)
                        if args.json:
                            Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


def print_a(rows, args):
    """The table, from whatever rounds `rows` holds (a run stopped early, read back with --table)."""
    rounds = len({r["round"] for r in rows})
    print("\nPart A: movebench kv / gups_ddict (corrected), aggregate bandwidth, median of per-round ratios "
          f"[min-max] over the rounds (n); MB/s medians; {rounds} round(s) started")
    print("| operation | value | passes | data | n | movebench MB/s | gups MB/s | movebench / gups |")
    print("|---|---|---|---|---|---|---|---|")
    formats = list(dict.fromkeys(r.get("data_format", "bytes") for r in rows))
    for passes in args.passes:
        for size in args.sizes:
            for operation in args.operations:
                for data_format in formats:
                    sel = [r for r in rows if (r["operation"], r["size"], r["passes"], r.get("data_format", "bytes"))
                           == (operation, size, passes, data_format)]
                    if sel:
                        print_row(sel, operation, size, passes, data_format)


def print_row(sel, operation, size, passes, data_format):
    ratios = [r["movebench"] / r["gups"] for r in sel]
    print(f"| {operation} | {size} | {passes} | {data_format} | {len(sel)} | "
          f"{statistics.median(r['movebench'] for r in sel) / 1e6:.2f}"
          f" | {statistics.median(r['gups'] for r in sel) / 1e6:.2f} | {statistics.median(ratios):.2f} "
          f"[{min(ratios):.2f}-{max(ratios):.2f}] |")


def part_b(args) -> list[dict]:
    results = []
    for operation in args.b_operations:
        for size in args.sizes:
            for _ in range(args.b_jobs):
                cmd = dragonrun(size) + [PY, str(ROOT / "bench" / "kv_variants.py"), "--operation", operation,
                                         "--value-size", str(size), "--passes", str(max(args.passes)),
                                         "--rounds", str(args.b_rounds),
                                         "--put-counts", args.put_counts, "--max-keys", str(args.max_keys)]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
                if proc.returncode != 0 or line is None:
                    sys.exit(f"kv_variants {operation} {size}: failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
                results.append(json.loads(line))
                print(f"part B {operation} {size}: done", file=sys.stderr, flush=True)
    print("\nPart B: loops in one Dragon job (2 clients), ops/s summed over clients; median over rounds "
          "[min-max]; per-round ratios to movebench's loop (bytes/discard: the kv kernel's timed_passes on its "
          "data; for put batch/1, one pass per round)")
    print("| operation | value | variant | ops/s | / movebench's loop |")
    print("|---|---|---|---|---|")
    for operation in args.b_operations:
        for size in args.sizes:
            rounds = [r for res in results if (res["operation"], res["value_size"]) == (operation, size)
                      for r in res["rounds"][1:]]  # each job's first round warms the connections
            first = "batch/1" if operation == "put" else "bytes/discard"
            for variant in rounds[0]:
                ratios = [r[variant] / r[first] for r in rounds]
                print(f"| {operation} | {size} | {variant} | {statistics.median(r[variant] for r in rounds):.0f} | "
                      f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] |")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=5, help="part A: movebench's counted rounds per point")
    parser.add_argument("--warmups", type=int, default=1,
                        help="part A: movebench's warm-up rounds per point (0 with --repetitions 1: one cold round "
                        "in a fresh DDict, as gups_ddict times it)")
    parser.add_argument("--passes", default="4", help="passes per timed round, comma-separated")
    parser.add_argument("--sizes", default="4096,262144")
    parser.add_argument("--operations", default=",".join(OPS))
    parser.add_argument("--data-formats", default="bytes,numpy",
                        help="part A: movebench's kv.data_formats to run, each beside gups_ddict (numpy is its data)")
    parser.add_argument("--part", default="ab", help="a, b or ab")
    parser.add_argument("--b-jobs", type=int, default=2, help="part B: Dragon jobs per operation and size")
    parser.add_argument("--b-rounds", type=int, default=7, help="part B: rounds per job (the first is dropped)")
    parser.add_argument("--b-operations", default="get,frozen_get,put", help="part B: get, frozen_get, put")
    parser.add_argument("--put-counts", default="1,2,4,8", help="part B, put: batches back to back per variant")
    parser.add_argument("--max-keys", type=int, default=200, help="cap of keys per client, both sides")
    parser.add_argument("--json", help="part A's rows, written as they come")
    parser.add_argument("--table", help="print part A's table from a --json file and stop")
    args = parser.parse_args(argv)
    SECTION["max_keys"] = args.max_keys
    args.passes = [int(p) for p in args.passes.split(",")]
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.operations = args.operations.split(",")
    args.data_formats = args.data_formats.split(",")
    args.b_operations = args.b_operations.split(",")
    if args.table:
        print_a(json.loads(Path(args.table).read_text()), args)
        return 0
    if "a" in args.part:
        print_a(part_a(args), args)
    if "b" in args.part:
        part_b(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
