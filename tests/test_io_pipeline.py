"""The io family through Snakemake: points, tables and the report section, blob on a live Azurite."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import snakemake
from io_support import azurite_fixture  # noqa: F401 - fixture
from movebench.families import io as io_family
from movebench.services import azurite as azurite_service

pytestmark = pytest.mark.pipeline


def test_a_small_io_campaign_end_to_end(campaign, azurite, monkeypatch, tmp_path):
    # An Azurite already up (e.g. `python -m movebench.services.azurite up`): the workflow uses it, not its own.
    monkeypatch.setenv(io_family.AZURITE_ENV, azurite.connection_string)
    target = tmp_path / "target"
    workdir = campaign(
        {
            "campaign": {
                "name": "io-pipeline",
                "results_dir": "results",
                "launches": 1,
                "repetitions": 2,
                "warmups": 1,
                "timeout": 120,
            },
            "io": {
                "patterns": ["sfmw", "mfmw"],
                "backends": ["posix", "blob"],
                "size_per_proc": ["64KiB"],
                "ranks": [2],
                "block_size": "16KiB",
                "posix": {"path": str(target)},
                "blob": {"emulator": "azurite"},
            },
        }
    )
    snakemake(workdir, timeout=600)
    results = workdir / "results"
    raw = sorted(p.relative_to(results / "raw" / "io").as_posix() for p in (results / "raw" / "io").rglob("*.jsonl"))
    assert raw == [
        f"pattern~{p}/backend~{b}/nodes~1/ranks~2/size_per_proc~65536.jsonl"
        for p in ("mfmw", "sfmw")
        for b in ("blob", "posix")
    ]
    for path in (results / "raw" / "io").rglob("*.jsonl"):
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(recs) == 3 and all(r["ok"] and r["verified"] for r in recs)
    for meta in (results / "raw" / "io").rglob("*.meta.json"):
        assert azurite_service.DEV_KEY not in meta.read_text()
    report = (results / "report.html").read_text()
    assert "Blob figures here come from Azurite" in report and "sfmw: POSIX, Blob" in report
    assert list(target.iterdir()) == []  # every run space removed
    assert yaml.safe_load((workdir / "config.yaml").read_text())["io"]["backends"] == ["posix", "blob"]


def test_plain_snakemake_starts_and_stops_azurite_for_the_blob_points(campaign, monkeypatch, tmp_path):
    """No wrapper, no Azurite given: the workflow starts one for its blob points and stops it at the end."""
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    workdir = campaign({
        "campaign": {"name": "io-plain", "results_dir": "results",
                     "launches": 1, "repetitions": 2, "warmups": 0, "timeout": 120},
        "io": {"patterns": ["sfmw"], "backends": ["posix", "blob"], "size_per_proc": ["64KiB"], "ranks": [2],
               "posix": {"path": str(tmp_path / "target")}, "blob": {"emulator": "azurite"}},
    })
    proc = snakemake(workdir, timeout=600)
    log = proc.stdout + proc.stderr
    up = re.search(r"Azurite up on 127\.0\.0\.1:(\d+) \(pid (\d+)\)", log)
    assert up and "Azurite stopped" in log, log[-3000:]
    assert not azurite_service.answers(int(up.group(1)))
    blob = [p for p in (workdir / "results" / "raw" / "io").rglob("*.jsonl") if "backend~blob" in p.as_posix()]
    assert len(blob) == 1 and all(json.loads(line)["ok"] for line in blob[0].read_text().splitlines())
    # A rerun with nothing to do starts no Azurite.
    again = snakemake(workdir)
    assert "Azurite up" not in again.stdout + again.stderr
