"""A point never shares this machine with movebench's own work: under the local profile no aggregation or
report job runs while a point measures (they hold the profile's one benchmark slot too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import snakemake

pytestmark = [pytest.mark.pipeline, pytest.mark.mpi]


def job_interval(log: Path) -> tuple[float, float]:
    lines = dict(line.split(" ", 1) for line in log.read_text().splitlines() if line.startswith(("started", "ended")))
    return float(lines["started"]), float(lines["ended"])


# orders in which a family's points finish while another's still run (before the fix, both ran an aggregation
# beside a point on this 2-core machine)
@pytest.mark.parametrize("seed", [1, 5])
def test_no_aggregation_or_report_runs_while_a_point_measures(tmp_path, seed):
    config = {"campaign": {"name": "quiet", "results_dir": "results", "launches": 1, "repetitions": 2, "warmups": 0,
                           "launch_order_seed": seed},
              "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "iterations": 20,
                          "message_sizes": ["1KiB", "2KiB", "4KiB"]},
              "bcast": {"kinds": ["dense"], "methods": ["buffer", "osu"], "shapes": [[10, 10]], "dtypes": ["float64"],
                        "ranks": [2], "nodes": [1]}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(tmp_path, "--cores", "2")
    results = tmp_path / "results"
    points = []
    for meta_file in (results / "raw").rglob("*.meta.json"):
        meta = json.loads(meta_file.read_text())
        points.append((meta["launch_start"], meta["launch_end"], meta_file.name))
        assert meta["overlapped_with"] == []
    assert len(points) == 5
    jobs = [(*job_interval(log), log.name) for log in [*(results / "logs" / "aggregate").glob("*.log"),
                                                       results / "logs" / "report.log"]]
    assert len(jobs) == 3
    for start, end, name in jobs:
        for p_start, p_end, point in points:
            assert end <= p_start or start >= p_end, f"{name} ran from {start} to {end}, beside {point}"
