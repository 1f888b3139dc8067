"""A tiny campaign with adaptive repetitions through plain snakemake: the report lists the points that ran out."""

import json

import pandas as pd
import pytest

from conftest import snakemake
from movebench.core.records import read_jsonl

pytestmark = pytest.mark.pipeline

CAMPAIGN = {
    "campaign": {"name": "adaptive", "results_dir": "results", "launches": 1, "warmups": 1, "timeout": 60,
                 "repetitions": {"min": 2, "max": 3, "ci_target": 1e-9}},  # a target no point meets: all stop at max
    "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4],
                "iterations": 5},
    "calibration": {"probes": ["memcpy"], "ranks": [2], "memcpy_sizes": ["4KiB"], "iterations": 5, "repetitions": 2},
}


def test_points_that_stopped_at_max_are_in_the_tables_findings_and_report(tmp_path):
    (tmp_path / "config.yaml").write_text(json.dumps(CAMPAIGN))
    snakemake(tmp_path)
    results = tmp_path / "results"
    for path in sorted((results / "raw" / "shuffle").rglob("*.jsonl")):
        recs = read_jsonl(path)
        assert [r["rep"] for r in recs if not r["warmup"]] == [0, 1, 2]
        assert {(r["stop_reason"], r["repetitions_run"]) for r in recs} == {("max_repetitions", 3)}
    summary = pd.read_csv(results / "tables" / "shuffle_summary.csv")
    assert set(summary["stop_reason"]) == {"max_repetitions"} and (summary["ci_half_width_rel"] > 0).all()
    assert set(pd.read_csv(results / "tables" / "calibration_summary.csv")["stop_reason"]) == {"fixed"}
    assert "repetitions.ci_target" in pd.read_csv(results / "tables" / "shuffle_points.csv").columns

    html = (results / "report.html").read_text()
    assert 'id="shuffle-limited"' in html and 'id="calibration-limited"' not in html
    assert "shuffle: 2 points stopped on a limit before the CI target (max_repetitions)" in html
    table = html[html.index('class="data limited-points"'):]
    table = table[:table.index("</table>")]
    for point in summary["point"].unique():
        assert f"<td>{point}</td><td>max_repetitions</td><td>3</td>" in table
    assert "<td>1e-07</td>" in table  # the target, in % of the median
