"""Several points per launch, measured: the default campaign's kv section run with `launch_groups: false` (a
launch per point, A) and `true` (one Dragon runtime for the 8 points, B), interleaved A B A B ... for --rounds
rounds, one launch per point, on this checkout. Round r uses launch_order_seed r + 1 in every arm, so a point's
place in its group changes from round to round (a place effect is not taken for a point's).

Run:
  .venv/bin/python bench/launch_groups.py                 # 5 rounds, about 12 minutes here
  .venv/bin/python bench/launch_groups.py --rounds 3 --family shuffle   # another family that may group (any of
      # calibration, shuffle, bcast, io)
  .venv/bin/python bench/launch_groups.py --family campaign   # the whole default campaign: A with launch_groups
      # false in every family, B as config/config.yaml ships it; its launches as shipped (about 40 minutes here)
  .venv/bin/python bench/launch_groups.py --family campaign --before REV   # a change, before and after: A the
      # campaign as shipped run by commit REV (a git worktree), B by this checkout (about 30 minutes here)

It prints per round and as the median of per-round values [min-max]:
- the campaign's wall time and B / A;
- the fixed cost per point: each launch's wall (launch_wall_s) less its points' timed seconds, shared by the
  points of a launch group; B's target is <= 1 s amortised for kv, from about 7 s;
- the share of wall time inside timed regions (warm-ups included);
- grouping leaves the figures alone: per point, B's median bandwidth over A's in the same round; the median over
  points of those ratios per round, and over rounds, with the per-point spread.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from movebench import families

ROOT = Path(__file__).resolve().parents[1]


def campaign(family: str, grouped: bool, results: Path, seed: int, **settings) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    section = copy.deepcopy(config[family])
    section.update(enabled=True, launch_groups=grouped, launches=1, **settings)
    return {"campaign": {**config["campaign"], "name": f"groups-{family}", "results_dir": str(results),
                         "launches": 1, "launch_order_seed": seed},
            family: section, **{name: {"enabled": False} for name in config if name not in ("campaign", family)}}


# the families whose section has launch_groups (Family.launch_group_axes), and those that run a launch per point
GROUPING = tuple(name for name in families.names() if families.load(name).launch_group_axes)
UNGROUPED = tuple(name for name in families.names() if name not in GROUPING)


def whole_campaign(grouped: bool, results: Path, seed: int) -> dict:
    """The default campaign as shipped (B), or with a launch per point in every family (A)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["campaign"].update(name="groups-campaign", results_dir=str(results), launch_order_seed=seed)
    if not grouped:
        for family in GROUPING:
            config[family]["launch_groups"] = False
    return config


def run(config: dict, results: Path, checkout: Path = ROOT) -> float:
    """The campaign run by `checkout`'s movebench (its Snakefile, rules and kernels; this venv's packages)."""
    path = results.with_suffix(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ)
    if checkout != ROOT:  # ahead of the venv's editable path (a .pth entry), in the jobs too, which inherit it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout / "src"), env.get("PYTHONPATH")]))
        # this checkout's Azurite, rather than an install into the worktree inside A's first run
        env.setdefault("MOVEBENCH_NODE_PREFIX", str(ROOT / ".node"))
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(path), "run"], cwd=checkout,
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
    info = json.loads((results / "campaign_run.json").read_text())
    return info.get("wall_s", time.time() - t0)


def costs(results: Path, family: str) -> tuple[float, float]:
    """(fixed seconds per point, shared within a launch group; seconds inside timed regions); every family's
    when `family` is "campaign"."""
    launches: dict[tuple, list] = {}
    timed_total = 0.0
    for path in (results / "raw" / ("" if family == "campaign" else family)).rglob("*.jsonl"):
        timed = sum(json.loads(line).get("timed_s") or json.loads(line).get("elapsed_s") or 0.0
                    for line in path.read_text().splitlines())
        timed_total += timed
        meta = json.loads(path.with_name(path.name[: -len(".jsonl")] + ".meta.json").read_text())
        key = ((meta.get("launch_group") or {}).get("name") or str(path), meta["launch_start"])
        entry = launches.setdefault(key, [meta["launch_wall_s"], 0.0, 0])
        entry[1] += timed
        entry[2] += 1
    fixed = sum(w - t for w, t, _ in launches.values()) / sum(n for *_, n in launches.values())
    return fixed, timed_total


def medians(results: Path, family: str) -> pd.Series:
    if family == "campaign":
        return pd.concat([medians(results, name).rename(lambda point, name=name: f"{name} {point}")
                          for name in (*UNGROUPED, *GROUPING)])
    table = pd.read_csv(results / "tables" / f"{family}_summary.csv")
    return table[table["measure"] == "bandwidth_Bps"].set_index("point")["median"]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--family", default="kv", choices=[*GROUPING, "campaign"])
    parser.add_argument("--keep", type=Path, help="keep the results here")
    parser.add_argument("--reuse-ddict", action="store_true",
                        help="kv: B with a DDict per point (ddict_per_group: false), and a third arm C with the "
                             "default, one DDict per group")
    parser.add_argument("--before", metavar="REV",
                        help="with --family campaign: A is the default campaign as shipped, run by the commit REV (a "
                             "git worktree), B the same by this checkout: a change's effect on wall time, fixed "
                             "costs and figures")
    args = parser.parse_args()
    if args.before and args.family != "campaign":
        parser.error("--before compares whole campaigns: give --family campaign")
    out = args.keep or Path(tempfile.mkdtemp(prefix="movebench-groups-"))
    before = None
    if args.before:
        before = out / "before"
        if not before.exists():
            subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                           capture_output=True)
        print(f"A: {args.before} in {before}; B: this checkout", flush=True)
    rows, ratios, reuse_ratios = [], [], []
    for rnd in range(args.rounds):
        row = {"round": rnd}
        # --before: both arms as shipped (grouped), the commits differ, not the config
        arms = [("A", before is not None, {}), ("B", True, {"ddict_per_group": False} if args.reuse_ddict else {})]
        if args.reuse_ddict:
            arms.append(("C", True, {"ddict_per_group": True}))
        for label, grouped, settings in arms:
            results = out / f"{label}{rnd}"
            config = (whole_campaign(grouped, results, rnd + 1) if args.family == "campaign"
                      else campaign(args.family, grouped, results, rnd + 1, **settings))
            row[f"wall_{label}"] = run(config, results, before if before is not None and label == "A" else ROOT)
            row[f"fixed_{label}"], timed = costs(results, args.family)
            row[f"timed_share_{label}"] = timed / row[f"wall_{label}"]
        per_point = (medians(out / f"B{rnd}", args.family) / medians(out / f"A{rnd}", args.family)).dropna()
        row["ratio_median"], row["ratio_min"], row["ratio_max"] = (per_point.median(), per_point.min(),
                                                                   per_point.max())
        ratios.append(per_point)
        if args.reuse_ddict:
            reuse = (medians(out / f"C{rnd}", args.family) / medians(out / f"A{rnd}", args.family)).dropna()
            row["reuse_ratio_median"] = reuse.median()
            reuse_ratios.append(reuse)
        rows.append(row)
        print(f"round {rnd}: wall A {row['wall_A']:.0f} s, B {row['wall_B']:.0f} s; fixed per point A "
              f"{row['fixed_A']:.2f} s, B {row['fixed_B']:.2f} s; timed share A {row['timed_share_A']:.0%}, "
              f"B {row['timed_share_B']:.0%}; bandwidth B/A median over points {row['ratio_median']:.3f} "
              f"[{row['ratio_min']:.3f}-{row['ratio_max']:.3f}]", flush=True)
    frame = pd.DataFrame(rows)
    print(f"\n{args.family}, {args.rounds} rounds, median of per-round values [min-max]:")
    a_is, b_is = (f"({args.before})", "(this checkout)") if before else ("(a launch per point)", "(launch groups)")
    print(f"  wall A {a_is:23s} {spread(frame['wall_A'].tolist())} s")
    print(f"  wall B {b_is:23s} {spread(frame['wall_B'].tolist())} s")
    print(f"  wall B / A                     {spread((frame['wall_B'] / frame['wall_A']).tolist())}")
    print(f"  fixed cost per point A         {spread(frame['fixed_A'].tolist())} s")
    print(f"  fixed cost per point B         {spread(frame['fixed_B'].tolist())} s")
    print(f"  share inside timed regions A   {spread(frame['timed_share_A'].tolist())}")
    print(f"  share inside timed regions B   {spread(frame['timed_share_B'].tolist())}")
    print("  bandwidth B / A, per point (median of per-round ratios [min-max]):")
    by_point = pd.concat(ratios, axis=1)
    if args.family == "campaign":  # ~360 points: each family's median over its points per round, and its extremes
        for name in (*UNGROUPED, *GROUPING):
            mine = by_point[by_point.index.str.startswith(f"{name} ")]
            per_point = mine.median(axis=1).sort_values()
            print(f"    {name:12s} over its {len(mine)} points, per round: {spread(mine.median().tolist())}; "
                  f"lowest point {per_point.index[0]} {per_point.iloc[0]:.3g}, highest {per_point.index[-1]} "
                  f"{per_point.iloc[-1]:.3g}")
        by_point.to_csv(out / "ratios_by_point.csv")
    else:
        for point, values in by_point.iterrows():
            print(f"    {point}: {spread(values.dropna().tolist())}")
    print(f"  over points: {spread(frame['ratio_median'].tolist())}")
    if args.reuse_ddict:
        print(f"  C (one DDict per group): wall C / A {spread((frame['wall_C'] / frame['wall_A']).tolist())}, fixed "
              f"per point {spread(frame['fixed_C'].tolist())} s; bandwidth C / A per point:")
        for point, values in pd.concat(reuse_ratios, axis=1).iterrows():
            print(f"    {point}: {spread(values.dropna().tolist())}")
        print(f"  over points: {spread(frame['reuse_ratio_median'].tolist())}")
    if before is not None:
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
