"""The io family through Snakemake: points, tables and the report section, blob on a live Azurite."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import snakemake
from io_support import azurite_fixture  # noqa: F401 - fixture
from movebench import io as io_family
from movebench.services import azurite as azurite_service

pytestmark = pytest.mark.pipeline


def test_a_small_io_campaign_end_to_end(campaign, azurite, monkeypatch, tmp_path):
    # As `make run` does, the Azurite connection reaches every point job through the environment.
    monkeypatch.setenv(io_family.AZURITE_ENV, azurite.connection_string)
    target = tmp_path / "target"
    workdir = campaign(
        {
            "campaign": {
                "name": "io-pipeline",
                "results_dir": "results",
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
            # The engine includes every family's rules, so every section must be there.
            "shuffle": {"enabled": False},
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
