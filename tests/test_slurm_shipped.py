"""The shipped campaign through `snakemake --profile slurm` on the live test cluster, and a sweep extended there.

The campaign is config/config.yaml at small sizes: every family, every io backend (blob on Azurite too), launch
groups as shipped. Under Slurm the blob points are left out with one line (Azurite would listen on the submit
host's 127.0.0.1); everything else runs, each launch group one Slurm job whose time limit follows its members.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from conftest import ROOT, slurm_client_env
from movebench import campaign
from movebench.engine import plan
from movebench.families.io import AZURITE_ENV
from test_slurm_campaign import jobs_of, run_id, run_snakemake, write_config
from test_sweep_extension import new_outputs, raw_files, scheduled

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]


def shipped_small() -> dict:
    """config/config.yaml with its families, axes and backends, at sizes that run in minutes on the test cluster."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["campaign"].update(name="shipped-slurm", launches=1, repetitions=1, warmups=0, timeout=120,
                              disturbed={"other_cpus": 0.1, "retries": 0, "retry_budget_s": 0})
    config["calibration"].update(memcpy_sizes=["4KiB"], fio_patterns=["sfsw"], fio_sizes=["1MiB"], repetitions=1)
    config["shuffle"].update(patterns=["uni", "shuffle"], message_sizes=["4KiB"], windows=[1], iterations=5,
                             tuples_per_rank=2000, skew=[0])
    config["bcast"].update(methods=["pickle", "buffer"], shapes=[[100, 100]], densities=[0.008])
    config["io"].update(patterns=["sfsw", "mfmw"], size_per_proc=["1MiB"], repetitions=1, block_size="1MiB",
                        range_size="1MiB")
    config["kv"].update(operations=["put", "get"], value_sizes=["4KiB"], total_mem="32MiB", keys_per_client=20,
                        iterations=1)
    assert config["io"]["backends"] == ["posix", "mpiio", "blob"] and config["io"]["blob"]["emulator"] == "azurite"
    return config


@pytest.mark.dragon
def test_the_shipped_campaign_runs_on_slurm_less_its_blob_points_said_in_one_line(slurm_cluster, tmp_path):
    pytest.importorskip("dragon")
    config = shipped_small()
    write_config(tmp_path, config)
    env = slurm_client_env(slurm_cluster)
    env.pop(AZURITE_ENV, None)
    proc, took = run_snakemake(tmp_path, env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    validated = campaign.validate(json.loads(json.dumps(config)))
    grid = plan.grid(validated)
    blob = [p for p in grid["io"] if p["backend"] == "blob"]
    left = [line for line in proc.stderr.splitlines() if "left out under Slurm" in line]
    assert len(left) == 1 and f"io: {len(blob)} points left out" in left[0] and "--profile local" in left[0], left
    assert "Azurite up" not in proc.stderr

    # every other point of every family has its records, measured in a Slurm job; no blob point has any
    raw = tmp_path / "results" / "raw"
    kept, _ = campaign.leave_out_unreachable(validated, grid, "slurm")
    tasks = plan.tasks(validated, kept)
    assert set(tasks) == {"calibration", "shuffle", "bcast", "io", "kv"}
    for family, by_path in tasks.items():
        for path in by_path:
            assert (raw / family / f"{path}.jsonl").exists(), (family, path)
    assert not list((raw / "io").rglob("backend~blob/**/*.jsonl"))
    assert (tmp_path / "results" / "report.html").exists()

    # one Slurm job per launch group, each COMPLETED, its time limit from its members' planned seconds
    jobs = {j["id"]: j for j in jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout))}
    groups = plan.launch_groups(validated, tasks)
    assert len(jobs) == sum(len(g) for g in groups.values()), jobs
    assert {j["state"] for j in jobs.values()} == {"COMPLETED"}
    for family, family_groups in groups.items():
        for group in family_groups:
            job_ids = {json.loads((raw / family / f"{p}.meta.json").read_text())["slurm_job_id"]
                       for p in group.members}
            (job_id,) = job_ids
            limit = campaign.group_time_limit_minutes(validated["campaign"],
                                                   [tasks[family][p] for p in group.members])
            assert jobs[job_id]["time_limit"] == f"{limit}:00", (family, group.name, jobs[job_id])
    print(f"\nthe shipped campaign, small, through --profile slurm: {took:.1f} s, {len(jobs)} jobs")


SWEEP = {
    "campaign": {"name": "sweep-slurm", "results_dir": "results", "launches": 1, "repetitions": 2, "warmups": 1,
                 "timeout": 60, "launch_order_seed": 5},
    "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "iterations": 20,
                "message_sizes": ["1KiB", "4KiB"], "launch_groups": True},
}


def test_a_new_sweep_value_measures_only_its_points_on_slurm(slurm_cluster, tmp_path):
    env = slurm_client_env(slurm_cluster)
    write_config(tmp_path, SWEEP)
    proc, _ = run_snakemake(tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    before = raw_files(tmp_path)
    assert len([p for p in before if p.endswith(".jsonl")]) == 2

    extended = json.loads(json.dumps(SWEEP))
    extended["shuffle"]["message_sizes"] = ["1KiB", "2KiB", "4KiB"]
    write_config(tmp_path, extended)
    dry, _ = run_snakemake(tmp_path, env, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-6000:]
    assert {rule: n for rule, n in scheduled(dry.stdout).items() if rule.startswith("shuffle_")} == {
        "shuffle_group_nodes1_ranks2_launch0": 1}, dry.stdout[-3000:]
    new = {"pattern~uni/nodes~1/ranks~2/message_size~2048/window~1"}
    assert new_outputs(dry.stdout) == new

    proc, _ = run_snakemake(tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    jobs = jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout))
    assert len(jobs) == 1 and {j["state"] for j in jobs} == {"COMPLETED"}, jobs
    after = raw_files(tmp_path)
    assert {path: after[path] for path in before} == before
    assert {p.removeprefix("shuffle/").removesuffix(".jsonl") for p in set(after) - set(before)
            if p.endswith(".jsonl")} == new

    write_config(tmp_path, SWEEP)  # the value removed again: nothing to measure
    dry, _ = run_snakemake(tmp_path, env, "--dry-run")
    assert dry.returncode == 0 and not [r for r in scheduled(dry.stdout) if r.startswith("shuffle_")], dry.stdout
