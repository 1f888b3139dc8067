"""kv on one node: aggregate DDict bandwidth, the batch_put/put and frozen_get/get ratios, Dragon's set-up cost.

Run: .venv/bin/python bench/kv.py [--rounds 2] [--sizes 1KiB,4KiB,16KiB,64KiB,256KiB,1MiB]
Every point is launched as a campaign's point rule launches it (python -m movebench.engine.launch ->
movebench.engine.launchers.dragon -> dragon -s -> the kv kernel): 1 node, 2 clients, 1 manager, keys by
gups_ddict's rule (total_mem 256 MiB, mem_frac 0.1, at most 200 keys per client), 5 counted rounds
after 1 warm-up. The four operations of a size run one after the other, and the whole sweep is
repeated `--rounds` times, so that each ratio is the median of ratios taken within one round
(design.md: single runs vary 20-50% on these machines). Start-up = Dragon until the head runs +
the DDict's creation + the clients' start; teardown = the DDict's destruction + Dragon's exit
after the head; both as a share of the point's wall time (dragonrun's, launch to exit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families  # noqa: E402
from movebench.core.records import read_jsonl  # noqa: E402
from movebench.core.sizes import format_size, parse_size  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.families.kv import keys_per_client  # noqa: E402
from movebench.families.kv.kernel import OPERATIONS  # noqa: E402

SECTION = {"total_mem": "256MiB", "mem_frac": 0.1, "max_keys": 200, "keys_per_client": None}


def run_point(operation: str, size: int, tmp: Path) -> dict:
    keys = keys_per_client(SECTION, 1, 2, size)
    point = {"operation": operation, "nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "value_size": size}
    settings = {"streams_per_manager": 5, "total_mem": parse_size(SECTION["total_mem"]), "iterations": 1,
                "keys_per_client": keys}
    out, meta = tmp / f"{operation}-{size}.jsonl", tmp / f"{operation}-{size}.meta.json"
    task = families.load("kv").task(point, settings, 5, 1)
    proc = subprocess.run([sys.executable, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()),
                           "--timeout", "300", "--out", str(out),
                           "--meta", str(meta), "--failed", str(tmp / "failed.json")], capture_output=True, text=True,
                          cwd=tmp)
    if proc.returncode != 0:
        raise SystemExit(f"{operation} {size}: failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    recs = counted(read_jsonl(out))
    m = json.loads(meta.read_text())
    launch = m["dragon_launch"]
    startup = launch["runtime_startup_s"] + m["ddict_create_s"] + m["clients_start_s"]
    teardown = m["ddict_destroy_s"] + launch["runtime_teardown_s"]
    return {"operation": operation, "size": size, "keys": keys,
            "bw": statistics.median(r["bandwidth_Bps"] for r in recs),
            "ops_per_s": statistics.median(r["ops_per_s"] for r in recs),
            "wall_s": launch["wall_s"], "startup_s": startup, "teardown_s": teardown}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="1KiB,4KiB,16KiB,64KiB,256KiB,1MiB")
    parser.add_argument("--json", help="write every point's figures here")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="movebench-bench-kv-") as tmp:
        for rnd in range(args.rounds):
            for size in sizes:
                for operation in OPERATIONS:
                    row = run_point(operation, size, Path(tmp)) | {"round": rnd}
                    rows.append(row)
                    print(f"round {rnd} {operation:10s} {format_size(size):>7s}: {row['bw'] / 1e6:9.2f} MB/s "
                          f"{row['ops_per_s']:8.0f} ops/s  wall {row['wall_s']:5.1f} s  start-up "
                          f"{row['startup_s']:4.1f} s  teardown {row['teardown_s']:4.1f} s",
                          file=sys.stderr, flush=True)
                    if args.json:
                        Path(args.json).write_text(json.dumps(rows, indent=1))

    def pick(op, size, key):
        return [r[key] for r in rows if r["operation"] == op and r["size"] == size]

    print("| value size | keys/client | put MB/s | batch_put MB/s | get MB/s | frozen_get MB/s "
          "| batch_put/put | frozen_get/get |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        bws = {op: statistics.median(pick(op, size, "bw")) / 1e6 for op in OPERATIONS}
        ratio = {pair: statistics.median(a / b for a, b in zip(pick(pair[0], size, "bw"), pick(pair[1], size, "bw"),
                                                               strict=True))
                 for pair in (("batch_put", "put"), ("frozen_get", "get"))}
        print(f"| {format_size(size)} | {pick('put', size, 'keys')[0]} | "
              + " | ".join(f"{bws[op]:.2f}" for op in OPERATIONS)
              + f" | {ratio[('batch_put', 'put')]:.2f} | {ratio[('frozen_get', 'get')]:.2f} |")
    walls = [r["wall_s"] for r in rows]
    starts = [r["startup_s"] for r in rows]
    tears = [r["teardown_s"] for r in rows]
    start_share = statistics.median(s / w for s, w in zip(starts, walls, strict=True))
    tear_share = statistics.median(t / w for t, w in zip(tears, walls, strict=True))
    print(f"\nper point (median of {len(rows)}): wall {statistics.median(walls):.1f} s, start-up "
          f"{statistics.median(starts):.2f} s ({start_share:.0%}), teardown {statistics.median(tears):.2f} s "
          f"({tear_share:.0%})")


if __name__ == "__main__":
    main()
