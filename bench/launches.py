"""Honest uncertainty, measured: the default campaign four times (A, A2, A3, A4) and once with shuffle's window 64
replaced by 1 (B), all on one commit, then what the verdicts and intervals say about them.

Run:
  .venv/bin/python bench/launches.py                         # this checkout, about 4 default campaigns of time
  .venv/bin/python bench/launches.py --checkout DIR          # another checkout (its .venv), e.g. before a change
  .venv/bin/python bench/launches.py --keep OUT --reuse A=path/to/results   # keep the results; reuse a finished A

It prints, with the checkout's own `python -m movebench compare` (so an older checkout is judged by its own rules):
- A/A false verdicts: regressed + improved over the six pairs of A..A4, of the judged point-measures
  (those not `inconclusive`, `only in ...` or not comparable); then again with `--noise-from` the other two
  runs (disjoint from the pair judged: the run-to-run variance is measured on runs the pair does not contain);
- A/B: B's window 1 against A's window 64 (`--match-ignoring window=64:1`), each shuffle stream point's verdict
  and ratio, with the minimum detectable change where the checkout's compare reports one;
- CI coverage: the share of A2's, A3's and A4's point estimates (the summary's median) that fall inside A's 95% CI,
  per family, over every summarised measure; and inside A's rerun interval (where a rerun lands), where the
  checkout's summaries have one; then the same with every run as the reference (12 ordered pairs: one
  reference run is one sample of the runs, and its CI's luck moves the figure by a few percent);
- the wall time of each campaign (campaign_run.json's `wall_s`).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
JUDGED_OUT = ("inconclusive",)


def run_campaign(checkout: Path, config: dict, results: Path) -> float:
    """One campaign into `results` with the checkout's own `python -m movebench run`; its wall time."""
    config = copy.deepcopy(config)
    config["campaign"]["results_dir"] = str(results)
    path = results.with_suffix(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    t0 = time.time()
    proc = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "movebench", "--configfile", str(path),
                           "run"], cwd=checkout, capture_output=True, text=True)
    info = json.loads((results / "campaign_run.json").read_text()) if (results / "campaign_run.json").exists() else {}
    wall = info.get("wall_s", time.time() - t0)
    print(f"  {results.name}: {wall:.0f} s (snakemake exit {proc.returncode})", flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
    return wall


def compare(checkout: Path, base: Path, new: Path, out: Path, *extra: str) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "movebench", "compare", str(base), str(new),
                    "--out", str(out), *extra], cwd=checkout, capture_output=True, text=True)
    return pd.read_csv(out / "compare.csv")


def judged(frame: pd.DataFrame) -> pd.DataFrame:
    keep = frame["verdict"].isin(["regressed", "improved", "unchanged"])
    if "comparable" in frame:
        keep &= frame["comparable"].astype(bool)
    return frame[keep]


def coverage(a: Path, others: list[Path], low: str = "ci_low", high: str = "ci_high") -> pd.DataFrame:
    """Per family: how many of the others' point estimates fall inside A's interval (low, high): its 95% CI, or
    where a rerun lands (rerun_low, rerun_high; empty when the checkout's summaries have no such columns)."""
    rows = []
    for summary in sorted((a / "tables").glob("*_summary.csv")):
        family = summary.name.removesuffix("_summary.csv")
        ref = pd.read_csv(summary).set_index(["point", "measure"])
        if low not in ref or high not in ref:
            continue
        if low != "ci_low":
            ref = ref.drop(columns=["ci_low", "ci_high"]).rename(columns={low: "ci_low", high: "ci_high"})
        for other in others:
            theirs = pd.read_csv(other / "tables" / summary.name).set_index(["point", "measure"])
            both = ref.merge(theirs[["median"]].rename(columns={"median": "median_other"}), left_index=True,
                             right_index=True).dropna(subset=["ci_low", "ci_high", "median_other"])
            inside = (both["median_other"] >= both["ci_low"]) & (both["median_other"] <= both["ci_high"])
            rows.append({"family": family, "run": other.name, "inside": int(inside.sum()), "of": len(both)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose .venv runs and judges")
    p.add_argument("--config", type=Path, help="the campaign (default: the checkout's config/config.yaml)")
    p.add_argument("--keep", type=Path, help="folder for the four results folders (default: a temporary one)")
    p.add_argument("--reuse", action="append", default=[], metavar="NAME=PATH",
                   help="a finished results folder to use instead of running NAME (A, A2, A3, A4 or B)")
    args = p.parse_args(argv)
    checkout = args.checkout.resolve()
    config = yaml.safe_load((args.config or checkout / "config" / "config.yaml").read_text())
    changed = copy.deepcopy(config)
    changed["shuffle"]["windows"] = sorted({1 if w == 64 else w for w in config["shuffle"]["windows"]})
    out = args.keep or Path(tempfile.mkdtemp(prefix="movebench-launches-"))
    reuse = dict(item.split("=", 1) for item in args.reuse)
    folders, walls = {}, {}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    print(f"checkout {checkout} ({commit.stdout.strip()}), results in {out}")
    for name, cfg in (("A", config), ("A2", config), ("A3", config), ("A4", config), ("B", changed)):
        if name in reuse:
            folders[name] = Path(reuse[name]).resolve()
            run = json.loads((folders[name] / "campaign_run.json").read_text())
            walls[name] = run.get("wall_s")
            print(f"  {name}: reused {folders[name]} ({walls[name]:.0f} s)")
            continue
        folders[name] = out / name
        walls[name] = run_campaign(checkout, cfg, folders[name])

    runs = ["A", "A2", "A3", "A4"]
    pairs = [(x, y) for i, x in enumerate(runs) for y in runs[i + 1:]]
    for label, noise in (("plain", False), ("with --noise-from the other two runs", True)):
        print(f"\nA/A (no change), {label}: false verdicts = regressed + improved, of the judged point-measures")
        false_total = judged_total = 0
        for x, y in pairs:
            extra = ["--noise-from", *(str(folders[r]) for r in runs if r not in (x, y))] if noise else []
            frame = compare(checkout, folders[x], folders[y], out / f"compare-{x}-{y}{'-noise' if noise else ''}",
                            *extra)
            ok = judged(frame)
            wrong = ok["verdict"].isin(["regressed", "improved"]).sum()
            false_total, judged_total = false_total + wrong, judged_total + len(ok)
            print(f"  {x}/{y}: {wrong} of {len(ok)} judged ({len(frame)} point-measures): "
                  + ", ".join(f"{k} {v}" for k, v in frame["verdict"].value_counts().items()))
        print(f"  all {len(pairs)} pairs: {false_total} of {judged_total} = {false_total / max(judged_total, 1):.1%}")

    print("\nA/B: B's shuffle window 1 against A's 64 (bandwidth_Bps of the stream points)")
    frame = compare(checkout, folders["A"], folders["B"], out / "compare-A-B", "--match-ignoring", "window=64:1")
    ab = frame[(frame["family"] == "shuffle") & (frame["measure"] == "bandwidth_Bps")
               & frame["point"].str.contains("window~64") & ~frame["point"].str.contains("pattern~shuffle")]
    cols = [c for c in ("point", "ratio", "ci_low", "ci_high", "verdict", "launches", "mdc") if c in ab]
    print(ab[cols].to_string(index=False))
    print("  with --noise-from A3 A4:")
    frame = compare(checkout, folders["A"], folders["B"], out / "compare-A-B-noise", "--match-ignoring", "window=64:1",
                    "--noise-from", str(folders["A3"]), str(folders["A4"]))
    ab = frame[(frame["family"] == "shuffle") & (frame["measure"] == "bandwidth_Bps")
               & frame["point"].str.contains("window~64") & ~frame["point"].str.contains("pattern~shuffle")]
    print(ab[cols].to_string(index=False))

    others = [folders[r] for r in runs[1:]]
    print("\nCI coverage: A2's, A3's and A4's point estimates inside A's 95% CI")
    cov = coverage(folders["A"], others)
    per_family = cov.groupby("family")[["inside", "of"]].sum()
    per_family["share"] = per_family["inside"] / per_family["of"]
    print(per_family.to_string())
    print(f"  all: {cov['inside'].sum()} of {cov['of'].sum()} = {cov['inside'].sum() / max(cov['of'].sum(), 1):.1%}")
    print("  (a rerun's estimate carries its own launch noise: an exact 95% CI of 3 launches holds it ~89% of the time,"
          " tests/test_launch_stats.py)")
    rerun = coverage(folders["A"], others, "rerun_low", "rerun_high")
    if not rerun.empty:
        print("\nRerun interval: A2's, A3's and A4's point estimates inside where A says a rerun lands (95%)")
        per_family = rerun.groupby("family")[["inside", "of"]].sum()
        per_family["share"] = per_family["inside"] / per_family["of"]
        print(per_family.to_string())
        print(f"  all: {rerun['inside'].sum()} of {rerun['of'].sum()} = "
              f"{rerun['inside'].sum() / max(rerun['of'].sum(), 1):.1%}")

    print("\nEvery run as the reference (all ordered pairs of A..A4): the others' estimates inside its interval")
    for label, low, high in (("95% CI", "ci_low", "ci_high"), ("rerun interval", "rerun_low", "rerun_high")):
        parts, inside, total = [], 0, 0
        for ref in runs:
            cov = coverage(folders[ref], [folders[r] for r in runs if r != ref], low, high)
            if cov.empty:
                continue
            inside, total = inside + cov["inside"].sum(), total + cov["of"].sum()
            parts.append(f"{ref} {cov['inside'].sum() / max(cov['of'].sum(), 1):.1%}")
        if total:
            print(f"  {label}: {inside} of {total} = {inside / total:.1%} ({', '.join(parts)})")

    print("\nwall time per campaign: " + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
