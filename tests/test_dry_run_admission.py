"""What a dry run and a plan promise: the points the real run would refuse before its first job (admission, in
its onstart, which a dry run never reaches) are named by `make dry-run` / `python -m movebench run --dry-run` and
by `python -m movebench plan`, which then exit non-zero."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from conftest import PYTHON, ROOT

TOO_MANY_RANKS = {"shuffle": {"patterns": ["uni"], "ranks": [64], "nodes": [1], "message_sizes": ["4KiB"],
                              "windows": [1]}}
TOO_MUCH_MEMORY = {"bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[100000, 100000]],
                             "dtypes": ["float64"], "ranks": [2], "nodes": [1]}}
FITS = {"shuffle": {**TOO_MANY_RANKS["shuffle"], "ranks": [2]}}


def movebench(tmp_path, sections: dict, *args) -> subprocess.CompletedProcess:
    config = {"campaign": {"name": "dry", "results_dir": str(tmp_path / "results"), "launches": 1}, **sections}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(path), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("sections", "named"), [
    (TOO_MANY_RANKS, "ranks~64/message_size~4096/window~1: 64 ranks on one node"),
    (TOO_MUCH_MEMORY, "shape~100000x100000/dtype~float64: plans 149.3 GiB on its busiest node"),
])
def test_plan_and_dry_run_name_the_points_the_run_would_refuse(tmp_path, sections, named):
    plan = movebench(tmp_path, sections, "plan", "--profile", "local")
    assert plan.returncode == 1 and "the run would stop before any job" in plan.stderr, plan.stderr
    assert named in plan.stderr and "family" in plan.stdout  # the plan itself is still printed
    dry = movebench(tmp_path, sections, "run", "--dry-run", "--quiet", "rules")
    assert dry.returncode == 1, dry.stdout[-2000:] + dry.stderr[-2000:]
    assert "the real run would stop before any job" in dry.stderr and named in dry.stderr
    assert dry.stderr.count("the real run would stop") == 1  # said once, by the wrapper
    # plain snakemake -n says it too (after its own summary; its exit status stays Snakemake's)
    plain = subprocess.run([PYTHON, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--profile",
                            str(ROOT / "profiles" / "local"), "--configfile", str(tmp_path / "config.yaml"), "-n"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and "the real run would stop before any job" in plain.stderr, plain.stderr[-2000:]
    assert named in plain.stderr
    assert not (tmp_path / "results" / "raw").exists()  # nothing ran


def test_a_campaign_that_fits_plans_and_dry_runs_cleanly(tmp_path):
    plan = movebench(tmp_path, FITS, "plan", "--profile", "local")
    assert plan.returncode == 0 and "would stop" not in plan.stderr, plan.stderr
    dry = movebench(tmp_path, FITS, "run", "--dry-run")
    assert dry.returncode == 0 and "would stop" not in dry.stderr, dry.stderr[-2000:]
