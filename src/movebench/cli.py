"""`python -m movebench`: run a campaign, preview it, and measure how much of it is benchmark.

`run` is what `make run` calls: `snakemake --profile local` (and any argument it does not know,
passed on to snakemake), then where the report is. It adds nothing plain snakemake lacks: the
workflow itself starts and stops the services a campaign needs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from movebench import __version__, families
from movebench import campaign as campaign_run
from movebench.core.layout import ResultsLayout
from movebench.core.resources import load_yaml
from movebench.core.task import LAUNCH, launch_path
from movebench.engine import cluster
from movebench.engine import config as campaign_config
from movebench.engine import plan as planning
from movebench.judging import verdict_commands
from movebench.judging.history import cli as history_cli

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = "config/config.yaml"


def _load(config_path) -> dict:
    try:
        return campaign_run.validate(campaign_config.load(config_path or DEFAULT_CONFIG))
    except campaign_config.ConfigFileError as error:
        sys.exit(f"movebench: {error}")
    except campaign_config.ConfigError as error:
        sys.exit(error.message())


def _snakemake(cmd: list[str]) -> int:
    """Run snakemake and wait for it, however the user interrupts.

    Ctrl-C reaches snakemake itself (it is in this process group): it stops its jobs, writes the
    partial report and releases its lock. This process only waits for that; killing snakemake
    here instead would leave the lock behind ("Directory cannot be locked" on the next run).
    SIGTERM and SIGHUP, sent to this process alone, are passed on.
    """
    proc = subprocess.Popen(cmd, cwd=ROOT)

    def forward(signum, frame):
        if proc.poll() is None:
            proc.send_signal(signum)

    handlers = {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: forward, signal.SIGHUP: forward}
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(args, snakemake_args: list[str]) -> int:
    """`snakemake --profile PROFILE [--configfile F] ARGS...` from the repository, then where the report is."""
    config_file = Path(args.configfile).resolve() if args.configfile else ROOT / DEFAULT_CONFIG
    try:
        # Snakemake reads the file before any workflow code and says only "not valid JSON or YAML":
        # the file's own problems are told here, with the line.
        campaign = campaign_config.load(config_file)
    except campaign_config.ConfigFileError as error:
        sys.exit(f"movebench: {error}")
    cmd = [sys.executable, "-m", "snakemake", "--profile", args.profile]
    if args.configfile:
        # One value (=): snakemake's --configfile takes several, and would take a target that follows as a file.
        cmd += [f"--configfile={config_file}"]
    cmd += snakemake_args
    started = time.time()
    print("movebench: " + " ".join(cmd), flush=True)
    if DRY_RUN.intersection(snakemake_args):
        os.environ[campaign_run.DRY_RUN_VERDICT_ENV] = "said"  # said below, once, with the exit status it earns
    rc = _snakemake(cmd)
    if rc == 0 and DRY_RUN.intersection(snakemake_args):
        # Admission runs in the real run's onstart, which a dry run never reaches: what it would refuse is said
        # here, and the dry run fails as the run would.
        refused = _refusal(campaign, args.profile)
        if refused:
            print(refused.replace("refused before any job", "the real run would stop before any job"),
                  file=sys.stderr)
            return 1
    try:
        layout = ResultsLayout.of(campaign, ROOT)
    except (KeyError, TypeError):
        return rc
    for report, note in ((layout.report, ""), (layout.partial_report, " (partial: some points failed or did not run)")):
        report = report.resolve()
        if report.exists() and report.stat().st_mtime >= started:
            print(f"movebench: report at {report}{note}")
    print(f"movebench: snakemake took {time.time() - started:.0f} s, exit status {rc}")
    return rc


DRY_RUN = {"-n", "--dry-run", "--dryrun"}


def _refusal(raw_config, profile: str, default_executor: str = "local") -> str | None:
    """Admission's verdict on the points still to run, where the profile runs them (None: all fit, or unknown);
    a profile that names no executor runs them under `default_executor` (Snakemake's local; plan's Slurm)."""
    try:
        config = campaign_run.validate(raw_config, warn=lambda line: None)
    except campaign_config.ConfigError:
        return None  # snakemake said what is wrong
    settings = _profile_settings(profile)
    executor = settings.get("executor", default_executor)
    if executor not in ("local", "slurm"):
        return None
    defaults = _profile_defaults(settings)
    partition = defaults.get("slurm_partition")
    if executor == "local" and "allocation" in defaults:
        executor = "allocation"  # profiles/allocation: the allocation it runs in, not this host, is what points get
    grid, _ = campaign_run.leave_out_unreachable(config, planning.grid(config), executor)
    tasks = planning.tasks(config, grid)
    return campaign_run.refusal(config, tasks, executor, partition and partition.strip("'\""), ROOT)


def _profile_defaults(settings: dict) -> dict[str, str]:
    """A profile's default resources, name -> value (unquoted)."""
    return {key: value.strip("'\"") for key, value in (item.split("=", 1) for item in settings.get("default-resources")
                                                       or [] if isinstance(item, str) and "=" in item)}


def _profile_settings(name: str) -> dict:
    """The profile's config.yaml, found as Snakemake finds it: a folder here, in the repository, or a path."""
    for base in (Path.cwd(), ROOT, ROOT / "profiles"):
        path = base / name / "config.yaml"
        if path.exists():
            return load_yaml(path.read_text()) or {}
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
    profile = _profile_settings(args.profile)
    # what the workflow leaves out under the profile (io's blob points under Slurm), said as the workflow says it
    grid, left_out = campaign_run.leave_out_unreachable(config, planning.grid(config),
                                                        campaign_run.executor_of(_profile_defaults(profile)))
    for line in left_out:
        print(line, file=sys.stderr)
    group_components = _key_values(profile.get("group-components"), "group-components")
    group_components.update(_key_values(args.group_components, "--group-components"))
    resources = _key_values(profile.get("resources"), "resources")
    resources.update(_key_values(args.resources, "--resources"))
    time_limit_override = {}
    for rule, res in (profile.get("set-resources") or {}).items():
        if isinstance(res, dict) and "runtime" in res and rule.endswith("_point"):
            time_limit_override[rule.removesuffix("_point")] = int(res["runtime"])
    layout = ResultsLayout.of(config, ROOT)

    # Each launch of a point is a job of its own (campaign.launches): the plan counts launches as points.
    launches = {name: planning.planned_launches(config[name]["launches"]) for name in grid}
    by_launch = {name: [{**point, LAUNCH: k} for point in points for k in range(launches[name])]
                 for name, points in grid.items()}

    # A launch group (launch_groups) is one job: its members' entries, found by their launch paths.
    tasks = planning.tasks(config, grid)
    groups = {name: [[{**tasks[name][path].point, LAUNCH: tasks[name][path].launch} for path in group.members]
                     for group in family_groups]
              for name, family_groups in planning.launch_groups(config, tasks).items()}
    # what the workflow takes as measured in a grouped family: records of this task and kernel
    measured = campaign_run.measured_launches(config, tasks, {f: campaign_run.sources_digest(f) for f in groups},
                                              ROOT)

    def done(name, entry):
        point = {k: v for k, v in entry.items() if k != LAUNCH}
        path = launch_path(families.point_path(point), entry[LAUNCH])
        return (name, path) in measured if name in groups else layout.records(name, path).exists()

    def planned(name, entry):
        point = {k: v for k, v in entry.items() if k != LAUNCH}
        return families.load(name).planned_seconds(tasks[name][launch_path(families.point_path(point), entry[LAUNCH])])

    jobs = cluster.plan_jobs(by_launch, {name: families.load(name) for name in grid}, config["campaign"], done=done,
                             group_components=group_components, resources=resources,
                             time_limit_override=time_limit_override, launch_groups=groups, planned=planned)
    packing = ", ".join(f"{k}={v}" for k, v in group_components.items())
    print(f"movebench plan: campaign {config['campaign']['name']!r}, profile {args.profile}, launches per point "
          + ", ".join(f"{name} {n}" for name, n in launches.items()) + " (a launch is a job of its own"
          + (f"; {', '.join(groups)}: a launch group of points is one job" if groups else "") + ")"
          + (f", {packing} points per job" if packing else "")
          + (f", --resources {' '.join(f'{k}={v}' for k, v in resources.items())}" if packing and resources else ""))
    print(cluster.format_plan(jobs, config["campaign"]))
    print(wall_time_budget(config, layout))
    refused = _refusal(config, args.profile, default_executor="slurm")
    if refused:
        print(refused.replace("refused before any job", "the run would stop before any job"), file=sys.stderr)
        return 1
    return 0


def wall_time_budget(config: dict, layout: ResultsLayout) -> str:
    """The campaign's wall time one point at a time, priced from the launches of an earlier run there: per
    family the seconds of one round (every point's launch k, launch groups once), times the launches a point
    always runs and at most runs (an adaptive rule's min and max), and the retries' budget."""
    import json
    import statistics

    rounds, lines = {}, []
    raw = layout.raw
    for name in config:
        if name == "campaign" or not (raw / name).is_dir():
            continue
        walls: dict[int, dict] = {}
        for meta_file in (raw / name).rglob("*.meta.json"):
            meta = json.loads(meta_file.read_text())
            if meta.get("launch_wall_s") and not meta.get("skipped"):
                # a launch group's members share its wall: counted once, by its start
                walls.setdefault(int(meta.get("launch") or 0), {})[meta.get("launch_start")] = meta["launch_wall_s"]
        if walls:
            rounds[name] = statistics.median(sum(w.values()) for w in walls.values())
    retries = float((config["campaign"].get("disturbed") or {}).get("retry_budget_s", 120))
    if not rounds:
        return (f"wall time: no earlier run in {layout.root} to price it; run the campaign once (or a smaller one) "
                f"and plan again. Disturbed launches may add up to {retries:g} s (campaign.disturbed.retry_budget_s).")
    low = high = 0.0
    for name, seconds in rounds.items():
        rule = config[name].get("launches", 1)
        least, most = (rule.get("min", 2), rule["max"]) if isinstance(rule, dict) else (int(rule), int(rule))
        low, high = low + seconds * least, high + seconds * most
        lines.append(f"{name} {seconds:.0f} s x {least}" + (f"-{most}" if most != least else ""))
    missing = [name for name in config if name != "campaign" and name not in rounds]
    return (f"wall time here, one point at a time (a round priced from the launches in {raw}): "
            + ", ".join(lines) + f": {low:.0f}-{high:.0f} s of launches, plus up to {retries:g} s of disturbed "
            "launches measured again (campaign.disturbed.retry_budget_s)"
            + (f"; not priced (no earlier launch): {', '.join(missing)}" if missing else ""))


def efficiency(args) -> int:
    """Share of the last `run`'s wall time inside the kernels' timed regions, and each family's fixed cost: a
    launch's wall time (launch_wall_s in its meta) less the timed seconds of the points it measured, per launch and
    per point (a launch group's cost shared by its points)."""
    config = _load(args.configfile)
    layout = ResultsLayout.of(config)
    if not layout.run_record.exists():
        print(f"movebench: no finished run in {layout.root} (no campaign_run.json, written when snakemake ends): "
              "run the campaign first (snakemake --profile local), or name its config with --configfile",
              file=sys.stderr)
        return 1
    run_info = json.loads(layout.run_record.read_text())
    timed = counted = 0.0
    per_family: dict[str, float] = {}
    # (family, launch) -> [wall, timed seconds of its points, points]
    launches: dict[tuple, list] = {}
    # (family, launch) -> each point's (start of its repetitions, end, the launch's end)
    spans: dict[tuple, list] = {}
    # Only what the last run measured: the results folder also keeps the points of earlier runs, which a rerun
    # did not redo (and a point whose meta does not say when it ran cannot be placed in either).
    earlier = 0
    for path in layout.raw.rglob("*.jsonl"):
        family = layout.launch_of(path)[0]
        meta_path = layout.meta_of(path)
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if meta.get("launch_start") is None or not run_info["start"] <= meta["launch_start"] <= run_info["end"]:
            earlier += 1
            continue
        point_timed = 0.0
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            seconds = rec.get("timed_s") or rec.get("elapsed_s") or 0.0
            point_timed += seconds
            if not rec.get("warmup"):
                counted += seconds
        timed += point_timed
        per_family[family] = per_family.get(family, 0.0) + point_timed
        if meta.get("launch_wall_s") is None:
            continue
        group = (meta.get("launch_group") or {}).get("name")
        key = (family, group or str(path), meta.get("launch_start"))
        entry = launches.setdefault(key, [meta["launch_wall_s"], 0.0, 0])
        entry[1] += point_timed
        entry[2] += 1
        spans.setdefault(key, []).append((meta.get("kernel_start"), meta.get("kernel_end"), meta.get("launch_end")))
    wall = run_info["wall_s"]
    print(f"campaign wall time            {wall:8.1f} s")
    if earlier:
        print(f"  ({earlier} point-launches in {layout.raw} were not measured by this run: left out)")
    print(f"inside timed regions          {timed:8.1f} s  ({100 * timed / wall:.1f}% of wall, warm-ups included)")
    print(f"  of which counted reps       {counted:8.1f} s  ({100 * counted / wall:.1f}% of wall)")
    for family, seconds in sorted(per_family.items()):
        print(f"  {family:28s}{seconds:8.1f} s")
    inside = covered([(start, start + w) for (_, _, start), (w, _, _) in launches.items() if start is not None])
    print(f"inside launches               {inside:8.1f} s  ({100 * inside / wall:.1f}% of wall; the rest is "
          "Snakemake's scheduling and job starts, the services' start, the tables and the report)")
    print("fixed cost (a launch's wall time less the timed seconds of its points): median [min-max]")
    print(f"  {'':28s}{'per launch':>22s}   {'per point':>22s}   launches, points")
    for family in sorted({key[0] for key in launches}):
        mine = [v for key, v in launches.items() if key[0] == family]
        per_launch = sorted(w - t for w, t, _ in mine)
        per_point = sorted((w - t) / n for w, t, n in mine)
        points = sum(n for *_, n in mine)
        print(f"  {family:28s}{statistics.median(per_launch):8.2f} s [{per_launch[0]:.2f}-{per_launch[-1]:.2f}]"
              f"   {statistics.median(per_point):8.2f} s [{per_point[0]:.2f}-{per_point[-1]:.2f}]"
              f"   {len(mine)}, {points}")
    parts = {key: fixed_cost_parts(key[2], launches[key], spans[key]) for key in launches}
    print("where a launch's fixed cost goes, per launch: median s (start: to the first point's repetitions; set-up: "
          "between points' repetitions, each point's buffers, data, probe and files; untimed: inside points' "
          "repetitions, outside their timed regions; end: after the last point's)")
    print(f"  {'':28s}{'start':>8s}{'set-up':>9s}{'untimed':>9s}{'end':>8s}")
    for family in sorted({key[0] for key in launches}):
        known = [p for key, p in parts.items() if key[0] == family and p is not None]
        if not known:
            print(f"  {family:28s}    (its metas do not say where points' repetitions start)")
            continue
        print(f"  {family:28s}" + "".join(f"{statistics.median(p[i] for p in known):{w}.2f}"
                                         for i, w in enumerate((8, 9, 9, 8))))
    return 0


def fixed_cost_parts(launch_start, launch: list, spans: list) -> tuple[float, float, float, float] | None:
    """A launch's fixed cost (its wall time less its points' timed seconds) in four parts: start, set-up between the
    points' repetitions, untimed seconds inside them, end (efficiency's header says which is which); None for a
    launch whose metas lack the times."""
    wall, timed, _ = launch
    if launch_start is None or any(None in span for span in spans):
        return None
    start = min(s for s, _, _ in spans) - launch_start
    end = spans[0][2] - max(e for _, e, _ in spans)
    in_points = sum(e - s for s, e, _ in spans)
    return start, wall - start - end - in_points, in_points - timed, end


def covered(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) intervals (launches that ran side by side count once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


CONFIG_ENV = "MOVEBENCH_CONFIG"
CONFIGFILE_HELP = (f"the campaign's config file (default: ${CONFIG_ENV} when set, else the profile's, "
                   f"{DEFAULT_CONFIG}); a file given replaces the whole campaign. Accepted before or after the "
                   "subcommand")


def profiles_help() -> str:
    """One line per profile folder in profiles/: its name and the first sentence of its config's opening comment."""
    lines = []
    for folder in sorted((ROOT / "profiles").iterdir()):
        if not (folder / "config.yaml").is_file():
            continue
        comment = []
        for line in (folder / "config.yaml").read_text().splitlines():
            if not line.startswith("#"):
                break
            comment.append(line.lstrip("#").strip())
        text = " ".join(comment)
        ends = [i for i in (text.find(": "), text.find(". ")) if i >= 0]
        first = text[: min(ends)] if ends else text.rstrip(".")
        if first.endswith(")") and " (" in first:  # its pointer to the docs, not what it is
            first = first[: first.rindex(" (")]
        lines.append(f"  {folder.name:18s}{first}")
    return "profiles (--profile NAME, from profiles/; or a profile folder's path):\n" + "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m movebench", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=textwrap.fill(
                                         f"environment: {CONFIG_ENV}=path/to/campaign.yaml names the campaign for "
                                         "every subcommand, as --configfile does (a --configfile given wins)."))
    parser.add_argument("--version", action="version", version=f"movebench {__version__}")
    parser.add_argument("--configfile", default=os.environ.get(CONFIG_ENV), help=CONFIGFILE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="snakemake --profile local (arguments it does not know go to snakemake)",
                           allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
                           description=textwrap.fill("Runs `snakemake --profile PROFILE` from the repository; "
                                                     "every argument not listed here goes to snakemake: -n, "
                                                     "--unlock, targets, --cores ..."),
                           epilog=profiles_help())
    p_run.add_argument("--profile", default="local", help="snakemake profile, one of those below (default: local)")
    p_plan = sub.add_parser("plan", help="Slurm jobs, nodes and node-hours the campaign asks for, before anything runs")
    p_plan.add_argument("--profile", default="slurm", help="the Slurm profile whose settings size the jobs")
    p_plan.add_argument("--group-components", nargs="+", default=[], metavar="FAMILY=N",
                        help="as snakemake's: pack N points of a family into one job")
    p_plan.add_argument("--resources", nargs="+", default=[], metavar="NAME=N",
                        help="as snakemake's global --resources (nodes, benchmark_slots): how grouped points share")
    sub.add_parser("efficiency", help="share of the last run's wall time inside timed regions")
    verdict_handlers = verdict_commands.add_parsers(sub) | history_cli.add_parser(sub)
    for command in sub.choices.values():
        # SUPPRESS: given only after the subcommand, it must not reset one given before it (or $MOVEBENCH_CONFIG)
        command.add_argument("--configfile", default=argparse.SUPPRESS, help=CONFIGFILE_HELP)
    args, rest = parser.parse_known_args(argv)
    if args.command == "run":
        return run(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return {"plan": plan, "efficiency": efficiency, **verdict_handlers}[args.command](args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("movebench: interrupted")

