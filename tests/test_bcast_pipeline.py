"""bcast through snakemake: a tiny campaign to the report, and a refused one that starts no job."""

import json
import subprocess

import pandas as pd
import pytest

from conftest import PYTHON, ROOT, snakemake
from movebench.core.records import read_jsonl

TINY = {
    "campaign": {"name": "tiny-bcast", "results_dir": "results",
                 "launches": 1, "repetitions": 3, "warmups": 1, "timeout": 60},
    "bcast": {
        "kinds": ["dense", "sparse"],
        "methods": ["pickle", "buffer"],
        "shapes": [[64, 64]],
        "densities": [0.05, 0.5],
        "ranks": [2],
    },
}


@pytest.mark.pipeline
@pytest.mark.mpi
def test_tiny_campaign_reaches_the_report(tmp_path):
    (tmp_path / "config.yaml").write_text(json.dumps(TINY))
    snakemake(tmp_path)
    raw = sorted((tmp_path / "results" / "raw" / "bcast").rglob("*.jsonl"))
    assert len(raw) == 2 + 2 * 2
    sparse = tmp_path / "results/raw/bcast/kind~sparse/method~buffer/nodes~1/ranks~2/shape~64x64/density~0.5"
    recs = read_jsonl(sparse / "dtype~float64.jsonl")
    assert [r["warmup"] for r in recs] == [True, False, False, False]
    assert all(r["ok"] and r["verified"] and r["method"] == "buffer" for r in recs)
    summary = pd.read_csv(tmp_path / "results" / "tables" / "bcast_summary.csv")
    assert {"elapsed_s", "bandwidth_Bps", "rss_hwm_delta_bytes", "tracemalloc_peak_bytes"} <= set(summary["measure"])
    html = (tmp_path / "results" / "report.html").read_text()
    section = html[html.index('id="bcast"') :]
    for heading in (
        "Speed-up over pickle",
        "where in place starts to win",
        "Receiver peak extra memory",
        "Time and memory per method",
    ):
        assert heading in section
    assert "buffer vs pickle" in section and "sparse 64x64 d=0.5 float64, 2 ranks" in section


def test_a_shape_too_large_for_memory_stops_snakemake_before_any_job(tmp_path):
    config = {"campaign": {}, "bcast": {"kinds": ["dense"], "shapes": [[100, 100], [1_000_000, 1_000_000]]}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--configfile",
            str(tmp_path / "config.yaml"),
            "-c1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "refused before any job" in out
    assert "bcast kind~dense/method~pickle/nodes~1/ranks~2/shape~1000000x1000000/dtype~float64: plans" in out
    assert "MemAvailable" in out and "Traceback" not in out
    assert not (tmp_path / "results" / "raw").exists() and not (tmp_path / "results" / "logs").exists()
