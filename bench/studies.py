#!/usr/bin/env python
"""Runs the four studies' `here` campaigns (config/studies/<study>.yaml) to their reports, one after another, and
prints per study the command, its wall time and every claim with its verdict and evidence (movebench.judging.claims).

A benchmark, not a test: each campaign takes minutes (the issue's budget is under ~15 min each on 2 cores).
A study's campaign is run as a user runs it, `snakemake --profile local --configfile config/studies/<s>.yaml`,
from the repository root, so its results land in results/studies/<s>/ (rerunning skips the points already
measured: delete that folder for a fresh measurement, or pass --results-root for another place).

    python bench/studies.py                         # all four
    python bench/studies.py bcast shuffle           # some
    python bench/studies.py --results-root /tmp/s   # results in /tmp/s/<study>/ (a copy of each config)
    python bench/studies.py --json out.json         # also the rows as JSON
    python bench/studies.py shuffle-cluster ddict-cluster   # across nodes (as root: the namespace test cluster)
    python bench/studies.py --docs                  # also rewrite each study's table in docs/studies.md

`--docs` replaces, for each study run, the block between `<!-- study:<s> -->` and `<!-- /study:<s> -->` in
docs/studies.md ("What the studies gave here") with the command, the commit, the wall time and every claim's
verdict and evidence as the study's report judges them (claims.check on its results folder).

The `-cluster` campaigns (config/studies/<study>-cluster.yaml: the claims over nodes) run as a user runs them on
the test cluster, `snakemake --profile slurm --workflow-profile profiles/slurm-testcluster --configfile ...`,
on the running cluster (`make slurm-up NODES=4`), or on a 4-node one started here and stopped after;
shuffle-cluster with every node's link shaped to LINKS[study] for the run (the link, not the 2 shared cores,
limits a transfer between nodes), restored after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from movebench.judging import claims  # noqa: E402

STUDIES = ("bcast", "shuffle", "cloud-output", "ddict", "shuffle-cluster", "ddict-cluster")
CLUSTER_NODES = 4
LINKS = {"shuffle-cluster": "rate=1gbit"}


def run(study: str, results_root: Path | None, extra: list[str]) -> dict:
    config = ROOT / "config" / "studies" / f"{study}.yaml"
    if results_root is not None:
        document = yaml.safe_load(config.read_text())
        document["campaign"]["results_dir"] = str(results_root / study)
        config = Path(tempfile.mkdtemp(prefix=f"movebench-{study}-")) / f"{study}.yaml"
        config.write_text(yaml.safe_dump(document, sort_keys=False))
    results = Path(yaml.safe_load(config.read_text())["campaign"]["results_dir"])
    results = results if results.is_absolute() else ROOT / results
    shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    command = [sys.executable, "-m", "snakemake", "--profile", "local", "--configfile", str(shown), *extra]
    env = None
    cluster = started = before = None
    if study.endswith("-cluster"):
        from movebench_testcluster.slurm import LocalSlurmCluster, running_cluster

        cluster = running_cluster()
        if cluster is not None and len(cluster.nodes) < CLUSTER_NODES:
            raise SystemExit(f"{study}: the running test cluster has {len(cluster.nodes)} nodes; make slurm-down, "
                             f"or make slurm-up NODES={CLUSTER_NODES}")
        if cluster is None:
            cluster = started = LocalSlurmCluster(Path(tempfile.mkdtemp(prefix="movebench-studies-")),
                                                  nodes=CLUSTER_NODES)
            cluster.start()
        before = cluster.link
        cluster.set_link(LINKS.get(study))
        command[3:5] = ["--profile", "slurm", "--workflow-profile", "profiles/slurm-testcluster"]
        env = cluster.client_env()
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env)
    finally:
        if cluster is not None:
            cluster.set_link(before)
        if started is not None:
            started.stop()
    wall = time.monotonic() - start
    out = {"study": study, "command": " ".join(["snakemake", *command[3:]]), "returncode": done.returncode,
           "wall_s": round(wall, 1),
           "report": str(results / "report.html"), "claims": []}
    if (results / "tables").is_dir() or (results / "raw").is_dir():
        studies = yaml.safe_load(config.read_text())["campaign"]["studies"]
        frame = claims.check(results, studies=studies)
        out["claims"] = frame[["id", "status", "evidence"]].to_dict("records")
    return out


DOCS = ROOT / "docs" / "studies.md"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(row: dict, commit: str, day: str) -> str:
    """One study's block of docs/studies.md: how it was run, and its claims as the report judges them."""
    counts = {}
    for c in row["claims"]:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no claim judged"
    lines = [f"<!-- study:{row['study']} -->", f"**{row['study']}**: `{row['command']}` at {commit}, {day}: "
             f"{row['wall_s']:.0f} s, exit {row['returncode']}; {tally}.", "",
             "| claim | verdict | evidence |", "|---|---|---|"]
    lines += [f"| {c['id']} | {c['status']} | {_cell(c['evidence'])} |" for c in row["claims"]]
    return "\n".join(lines + [f"<!-- /study:{row['study']} -->"])


def rewrite_docs(rows: list[dict], path: Path = DOCS) -> None:
    """Each run study's block of `path` replaced by `table` (a study without a block: an error naming it)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    day = dt.date.today().isoformat()
    text = path.read_text()
    for row in rows:
        block = re.compile(rf"<!-- study:{re.escape(row['study'])} -->.*?<!-- /study:{re.escape(row['study'])} -->",
                           re.S)
        if not block.search(text):
            raise SystemExit(f"{path}: no <!-- study:{row['study']} --> block to rewrite")
        text = block.sub(lambda _m, r=row: table(r, commit, day), text)
    path.write_text(text)
    print(f"rewrote {', '.join(r['study'] for r in rows)} in {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="*", help="some of " + ", ".join(STUDIES) + " (default: all)")
    parser.add_argument("--results-root", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--docs", action="store_true", help="rewrite each run study's table in docs/studies.md")
    parser.add_argument("--snakemake-args", nargs=argparse.REMAINDER, default=[])
    args = parser.parse_args()
    unknown = sorted(set(args.studies) - set(STUDIES))
    if unknown:
        parser.error(f"unknown studies {unknown}: choose from {', '.join(STUDIES)}")
    rows = []
    for study in args.studies or STUDIES:
        row = run(study, args.results_root, args.snakemake_args)
        rows.append(row)
        print(f"\n== {study}: exit {row['returncode']}, wall {row['wall_s']} s, {row['report']}")
        for c in row["claims"]:
            print(f"  {c['status']:15s} {c['id']}: {c['evidence'][:400]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.docs:
        rewrite_docs(rows)
    return max((r["returncode"] for r in rows), default=0)


if __name__ == "__main__":
    sys.exit(main())
