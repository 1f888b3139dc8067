"""A sixth family plugs in without editing the engine or another test: `pingpong` (tests/fixtures/families) is
copied to a temporary folder, named in MOVEBENCH_FAMILIES, and then validates, plans, runs one campaign through
`snakemake --profile local` and appears in the report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import snakemake

FIXTURE = Path(__file__).parent / "fixtures" / "families" / "pingpong"


@pytest.fixture
def sixth(tmp_path, monkeypatch):
    folder = tmp_path / "site-families"
    shutil.copytree(FIXTURE, folder / "pingpong")
    monkeypatch.setenv("MOVEBENCH_FAMILIES", str(folder))
    return folder


def test_the_sixth_family_validates_and_plans(sixth):
    probe = """
import json
from movebench import families
from movebench.engine import config, plan
assert "pingpong" in families.names()
bad = None
try:
    config.validate({"campaign": {}, "pingpong": {"ranks": [3]}})
except config.ConfigError as error:
    bad = error.message()
sizes = {"from": 8, "to": 64, "factor": 8}
good = config.validate({"campaign": {"repetitions": 3, "launches": 1}, "pingpong": {"message_sizes": sizes}})
tasks = plan.tasks(good, plan.grid(good))["pingpong"]
print(json.dumps({"bad": bad, "tasks": {path: task.to_dict() for path, task in tasks.items()}}))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "pingpong.ranks[0] = 3: must be one of 2" in out["bad"]
    assert list(out["tasks"]) == ["operation~pingpong/ranks~2/message_size~8",
                                  "operation~pingpong/ranks~2/message_size~64"]
    task = out["tasks"]["operation~pingpong/ranks~2/message_size~64"]
    assert task["settings"] == {"iterations": 200} and task["repetitions"] == 3 and task["ranks"] == 2


@pytest.mark.pipeline
@pytest.mark.mpi
def test_the_sixth_family_runs_through_snakemake_and_reaches_the_report(sixth, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    config = {"campaign": {"name": "sixth", "results_dir": "results", "launches": 1, "repetitions": 3, "warmups": 1},
              "pingpong": {"message_sizes": [8], "iterations": 50}}
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--cores", "2")
    results = work / "results"
    records = [json.loads(line) for line in
               (results / "raw" / "pingpong" / "operation~pingpong" / "ranks~2" / "message_size~8.jsonl").open()]
    counted = [r for r in records if not r["warmup"]]
    assert len(counted) == 3 and all(r["ok"] and r["latency_s"] > 0 for r in counted)
    assert all(r["bytes"] == 2 * 8 * 50 for r in records)
    summary = pd.read_csv(results / "tables" / "pingpong_summary.csv")
    assert set(summary["measure"]) >= {"latency_s", "bandwidth_Bps"}
    html = (results / "report.html").read_text()
    assert "pingpong latency (medians and their 95% CI over launches)" in html
    assert "operation~pingpong/ranks~2/message_size~8" in html
