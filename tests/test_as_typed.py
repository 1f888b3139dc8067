"""The workflow as users type it: plain snakemake with a profile, the config file as the whole campaign."""

import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import PYTHON, ROOT
from movebench import families
from movebench.engine import config as campaign_config
from movebench.engine import plan
from movebench.families import io as io_family
from movebench.services import azurite as azurite_service

pytestmark = pytest.mark.pipeline


def snakemake(workdir, *args, timeout=600, env=None):
    cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=env)


def planned(proc) -> dict[str, int]:
    counts = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def test_the_profile_names_the_default_campaign(tmp_path):
    proc = snakemake(tmp_path, "--profile", str(ROOT / "profiles" / "local"), "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]  # the plan as the user reads it, no upstream noise
    config = campaign_config.validate(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    grid = plan.grid(config)
    groups = plan.launch_groups(config, plan.tasks(config, grid))
    jobs = planned(proc)
    # a job per launch of each point, or per launch group (the default groups every family that can)
    assert set(groups) == {name for name in grid if families.load(name).launch_group_axes}
    assert {k: v for k, v in jobs.items() if k.endswith("_point")} == {
        f"{name}_point": len(points) * config[name]["launches"] for name, points in grid.items() if name not in groups}
    assert {k for k in jobs if "_group_" in k} == {f"{family}_group_{group.rule_suffix}" for family in groups
                                                   for group in groups[family]}
    for family in groups:
        assert {p for g in groups[family] for p in g.members} == set(plan.tasks(config, grid)[family])


def test_a_config_file_is_the_whole_campaign_not_merged_into_the_default(tmp_path):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({
        "campaign": {"name": "mine"},
        "shuffle": {"patterns": ["uni"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4]}}))
    proc = snakemake(tmp_path, "--profile", str(ROOT / "profiles" / "local"), "--configfile", "mine.yaml",
                     "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the file's one point, in the default 3 launches; nothing of the default campaign
    assert planned(proc) == {"shuffle_point": 3, "aggregate": 1, "report": 1, "all": 1}


def test_no_config_at_all_says_what_to_pass(tmp_path):
    proc = snakemake(tmp_path, "--cores", "1", "--dry-run")
    assert proc.returncode != 0
    assert "no campaign config" in proc.stderr and "--profile local" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_default_campaigns_blob_points_with_plain_snakemake(tmp_path, monkeypatch):
    """What users type, on the default config: the workflow starts Azurite for these points itself."""
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    config = campaign_config.validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    blob = [path for path, task in plan.tasks(config, plan.grid(config))["io"].items()
            if task.point["backend"] == "blob"]
    assert len(blob) >= 3
    targets = [f"results/raw/io/{path}.jsonl" for path in blob]
    proc = snakemake(tmp_path, "--profile", str(ROOT / "profiles" / "local"), *targets, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    up = re.search(r"Azurite up on 127\.0\.0\.1:(\d+)", log)
    assert up and "Azurite stopped" in log
    assert not azurite_service.answers(int(up.group(1)))
    for target in targets:
        recs = [json.loads(line) for line in (tmp_path / target).read_text().splitlines()]
        if "/launch~" in target and not recs:  # a later launch the point's sensitivity target made unneeded
            meta = json.loads((tmp_path / target.replace(".jsonl", ".meta.json")).read_text())
            assert "launches.mdc_target" in meta["skipped"], meta
            continue
        assert recs and all(r["ok"] and r["verified"] for r in recs)


def test_the_wrapper_passes_what_it_does_not_know_to_snakemake(tmp_path):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({
        "campaign": {"name": "mine", "results_dir": str(tmp_path / "results")},
        "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[8, 8]]}}))
    proc = subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(tmp_path / "mine.yaml"), "run", "-n",
                           "--quiet", "rules"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bcast_point" in proc.stdout + proc.stderr
    assert not (tmp_path / "results" / "raw").exists()  # -n reached snakemake: nothing ran


@pytest.mark.parametrize(
    "args, expect",
    [
        (["--unlock"], "Unlocked working directory."),
        (["{results}/tables/bcast.csv", "-n"], "rule aggregate:"),  # a target name
        (["--list-rules"], "bcast_point"),
    ],
)
def test_the_wrapper_passes_more_snakemake_arguments_through(tmp_path, args, expect):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({
        "campaign": {"name": "mine", "results_dir": str(tmp_path / "results")},
        "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[8, 8]]}}))
    args = [a.format(results=tmp_path / "results") for a in args]
    proc = subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(tmp_path / "mine.yaml"), "run", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert expect in proc.stdout + proc.stderr
    assert not (tmp_path / "results" / "raw").exists()  # nothing ran


def test_a_reader_that_goes_away_gets_no_traceback():
    # `python -m movebench plan | head`: the pipe's reader is gone before the writer is done (argparse's --help
    # would not tell: it drops the error itself)
    read, write = os.pipe()
    os.close(read)
    try:
        # unbuffered, so that the first line written meets the closed pipe (buffered, it would at exit only)
        proc = subprocess.run([PYTHON, "-m", "movebench", "plan"], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=60, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        os.close(write)
    # stderr keeps what plan says there on purpose (under Slurm, the points it leaves out), and nothing else
    said = [line for line in proc.stderr.splitlines() if "left out under Slurm" not in line]
    assert proc.returncode == 1 and said == [], proc.stderr
