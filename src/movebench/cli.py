"""`python -m movebench`: run a campaign, preview it, and measure how much of it is benchmark.

`run` is what `make run` calls: it starts the services the config needs, runs
Snakemake with a profile, stops the services whatever happens, and prints where
the report is. Everything it does is also doable by hand with `snakemake
--profile local` (see the README).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from movebench import config as campaign_config
from movebench import family as families

ROOT = Path(__file__).resolve().parents[2]


def _load(config_path) -> dict:
    try:
        return campaign_config.validate(campaign_config.load(config_path))
    except campaign_config.ConfigError as error:
        sys.exit(error.message())


@contextlib.contextmanager
def services(config: dict):
    """Start what the enabled families need (e.g. Azurite for blob) for the whole run."""
    stack = contextlib.ExitStack()
    with stack:
        for name in campaign_config.enabled_families(config):
            hook = getattr(families.load(name), "services", None)
            if hook is not None:
                stack.enter_context(hook(config[name], config["campaign"]))
        yield


def run(args) -> int:
    config = _load(args.configfile)
    results = Path(config["campaign"]["results_dir"])
    cmd = [sys.executable, "-m", "snakemake", "--profile", args.profile, "--configfile", args.configfile,
           *args.snakemake_args]
    started = time.time()
    with services(config):
        print("movebench: " + " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
    ended = time.time()
    results.mkdir(parents=True, exist_ok=True)
    (results / "campaign_run.json").write_text(json.dumps(
        {"start": started, "end": ended, "wall_s": ended - started, "returncode": rc, "command": cmd}, indent=2))
    report = (ROOT / results / "report.html").resolve()
    if report.exists():
        print(f"movebench: report at {report}" + ("" if rc == 0 else " (partial: some points failed)"))
    print(f"movebench: campaign took {ended - started:.0f} s, snakemake exit status {rc}")
    return rc


def plan(args) -> int:
    """Jobs, nodes and node-hours the campaign asks for, from the grid and the profile's runtime."""
    config = _load(args.configfile)
    grid = campaign_config.grid(config)
    timeout_h = config["campaign"]["timeout"] / 3600
    rows, total_jobs, total_nh = [], 0, 0.0
    for name, points in grid.items():
        fam = families.load(name)
        nodes = [fam.nodes(p) for p in points]
        node_hours = sum(n * timeout_h for n in nodes)
        rows.append((name, len(points), max(nodes, default=0), sum(nodes), node_hours))
        total_jobs += len(points)
        total_nh += node_hours
    print(f"{'family':10s} {'jobs':>6s} {'max nodes':>10s} {'node-jobs':>10s} {'node-hours (at timeout)':>24s}")
    for name, jobs, maxn, sumn, nh in rows:
        print(f"{name:10s} {jobs:6d} {maxn:10d} {sumn:10d} {nh:24.2f}")
    print(f"{'total':10s} {total_jobs:6d} {'':10s} {'':10s} {total_nh:24.2f}")
    print(f"(each point's runtime limit is campaign.timeout = {config['campaign']['timeout']:g} s, rounded up to "
          f"{math.ceil(config['campaign']['timeout'] / 60) + 1} min in the Slurm request)")
    return 0


def efficiency(args) -> int:
    """Share of the last `run`'s wall time spent inside the kernels' timed regions."""
    config = _load(args.configfile)
    results = Path(config["campaign"]["results_dir"])
    run_info = json.loads((results / "campaign_run.json").read_text())
    timed = counted = 0.0
    per_family = {}
    for path in (results / "raw").rglob("*.jsonl"):
        family = path.relative_to(results / "raw").parts[0]
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            seconds = rec.get("timed_s") or rec.get("elapsed_s") or 0.0
            timed += seconds
            per_family[family] = per_family.get(family, 0.0) + seconds
            if not rec.get("warmup"):
                counted += seconds
    wall = run_info["wall_s"]
    print(f"campaign wall time            {wall:8.1f} s")
    print(f"inside timed regions          {timed:8.1f} s  ({100 * timed / wall:.1f}% of wall, warm-ups included)")
    print(f"  of which counted reps       {counted:8.1f} s  ({100 * counted / wall:.1f}% of wall)")
    for family, seconds in sorted(per_family.items()):
        print(f"  {family:28s}{seconds:8.1f} s")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m movebench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", default=os.environ.get("MOVEBENCH_CONFIG", "config/config.yaml"))
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="start services, run the campaign with snakemake, stop services")
    p_run.add_argument("--profile", default="local", help="snakemake profile: local or slurm")
    p_run.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="passed on to snakemake")
    sub.add_parser("plan", help="jobs, nodes and node-hours the campaign asks for, before anything runs")
    sub.add_parser("efficiency", help="share of the last run's wall time inside timed regions")
    args = parser.parse_args(argv)
    return {"run": run, "plan": plan, "efficiency": efficiency}[args.command](args)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)

