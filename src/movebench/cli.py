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
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from movebench import cluster, verdict_commands
from movebench import config as campaign_config
from movebench import family as families
from movebench.core import envinfo

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
    started, load = time.time(), envinfo.HostLoad()
    with services(config):
        print("movebench: " + " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
    ended = time.time()
    results.mkdir(parents=True, exist_ok=True)
    (results / "campaign_run.json").write_text(json.dumps(
        {"start": started, "end": ended, "wall_s": ended - started, "returncode": rc, "command": cmd,
         "host_load": load.finish()}, indent=2))
    report = (ROOT / results / "report.html").resolve()
    if report.exists():
        print(f"movebench: report at {report}" + ("" if rc == 0 else " (partial: some points failed)"))
    print(f"movebench: campaign took {ended - started:.0f} s, snakemake exit status {rc}")
    return rc


def _profile_settings(name: str) -> dict:
    """The profile's config.yaml, found as Snakemake finds it: a folder here, in the repository, or a path."""
    for base in (Path.cwd(), ROOT, ROOT / "profiles"):
        path = base / name / "config.yaml"
        if path.exists():
            return yaml.safe_load(path.read_text()) or {}
    sys.exit(f"movebench plan: no profile {name!r} (looked for {name}/config.yaml here, in {ROOT} and {ROOT}/profiles)")


def _key_values(items, what: str) -> dict[str, int]:
    """`a=1 b=2` (Snakemake's --group-components / --resources syntax, or a profile's list or mapping)."""
    if isinstance(items, dict):
        items = [f"{k}={v}" for k, v in items.items()]
    out = {}
    for item in items or []:
        key, sep, value = str(item).partition("=")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            sys.exit(f"movebench plan: {what} {item!r}: expected name=integer")
        if not sep:
            sys.exit(f"movebench plan: {what} {item!r}: expected name=integer")
    return out


def plan(args) -> int:
    """Jobs, nodes and node-hours the campaign asks for under a Slurm profile, before anything is submitted."""
    config = _load(args.configfile)
    grid = campaign_config.grid(config)
    profile = _profile_settings(args.profile)
    group_components = _key_values(profile.get("group-components"), "group-components")
    group_components.update(_key_values(args.group_components, "--group-components"))
    resources = _key_values(profile.get("resources"), "resources")
    resources.update(_key_values(args.resources, "--resources"))
    runtime_override = {}
    for rule, res in (profile.get("set-resources") or {}).items():
        if isinstance(res, dict) and "runtime" in res and rule.endswith("_point"):
            runtime_override[rule.removesuffix("_point")] = int(res["runtime"])
    raw = Path(config["campaign"]["results_dir"])
    raw = (raw if raw.is_absolute() else ROOT / raw) / "raw"

    def done(name, point):
        return (raw / name / f"{families.point_path(point)}.jsonl").exists()

    jobs = cluster.plan_jobs(grid, {name: families.load(name) for name in grid}, config["campaign"], done=done,
                             group_components=group_components, resources=resources,
                             runtime_override=runtime_override)
    packing = ", ".join(f"{k}={v}" for k, v in group_components.items())
    print(f"movebench plan: campaign {config['campaign']['name']!r}, profile {args.profile}"
          + (f", {packing} points per job" if packing else "")
          + (f", --resources {' '.join(f'{k}={v}' for k, v in resources.items())}" if packing and resources else ""))
    print(cluster.format_plan(jobs, config["campaign"]))
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
    p_plan = sub.add_parser("plan", help="Slurm jobs, nodes and node-hours the campaign asks for, before anything runs")
    p_plan.add_argument("--profile", default="slurm", help="the Slurm profile whose settings size the jobs")
    p_plan.add_argument("--group-components", nargs="+", default=[], metavar="FAMILY=N",
                        help="as snakemake's: pack N points of a family into one job")
    p_plan.add_argument("--resources", nargs="+", default=[], metavar="NAME=N",
                        help="as snakemake's global --resources (nodes, benchmark_slots): how grouped points share")
    sub.add_parser("efficiency", help="share of the last run's wall time inside timed regions")
    verdict_handlers = verdict_commands.add_parsers(sub)
    args = parser.parse_args(argv)
    return {"run": run, "plan": plan, "efficiency": efficiency, **verdict_handlers}[args.command](args)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)

