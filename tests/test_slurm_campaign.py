"""The campaign through `snakemake --profile slurm` on the live local Slurm cluster (nodes n1, n2).

Every run here is what a user types at the repository root, plus the test cluster's overlay:

    snakemake --profile slurm --workflow-profile profiles/slurm-testcluster --directory <tmp> --configfile ...

The overlay only says how to poll this cluster (squeue, every 2 s); everything else (the MPI launcher,
--exclusive, runtime, memory, the preflight check) comes from profiles/slurm and the workflow.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import PYTHON, ROOT, slurm_client_env
from movebench.core.records import read_jsonl

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]

TINY = {
    "campaign": {"name": "tiny-slurm", "results_dir": "results",
                 "launches": 1, "repetitions": 3, "warmups": 1, "timeout": 60},
    "shuffle": {
        "patterns": ["uni", "alltoall"],
        "ranks": [2],
        "nodes": [1, 2],
        "message_sizes": ["4KiB"],
        "windows": [4],
        "iterations": 5,
        "tuples_per_rank": 2000,
        "tuple_size": 32,
        "skew": [0],
    },
}
OVERLAY = ["--workflow-profile", "profiles/slurm-testcluster"]


def write_config(workdir: Path, config: dict) -> None:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def snakemake_cmd(workdir: Path, *args: str, overlay: bool = True) -> list[str]:
    """`snakemake --profile slurm` from the repository root, as the README says, on a campaign in `workdir`."""
    return [PYTHON, "-m", "snakemake", "--profile", "slurm", *(OVERLAY if overlay else []),
            "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"), *args]  # fmt: skip


def run_snakemake(workdir: Path, env: dict, *args: str, overlay: bool = True, timeout: float = 300):
    t0 = time.monotonic()
    proc = subprocess.run(snakemake_cmd(workdir, *args, overlay=overlay), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    return proc, time.monotonic() - t0


def run_id(text: str) -> str:
    """The executor names every job of a run after the run's id."""
    m = re.search(r"SLURM run ID: (\S+)", text)
    assert m, text[-3000:]
    return m.group(1)


def jobs_of(cluster, name: str) -> list[dict]:
    """The run's Slurm jobs as squeue shows them (MinJobAge keeps finished ones for an hour)."""
    out = cluster.run("squeue", "-h", "-t", "all", "-n", name, "-o", "%i|%T|%D|%l|%N").stdout
    keys = ("id", "state", "nodes", "time_limit", "nodelist")
    return [dict(zip(keys, line.split("|"), strict=True)) for line in out.split()]


def metas(workdir: Path) -> dict[str, dict]:
    raw = workdir / "results" / "raw" / "shuffle"
    return {
        str(p.relative_to(raw)).removesuffix(".meta.json"): json.loads(p.read_text()) for p in raw.rglob("*.meta.json")
    }


def plan_totals(workdir: Path, *args: str) -> dict:
    """The total line of `python -m movebench plan`: jobs, largest job's nodes, node-hours."""
    proc = subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(workdir / "config.yaml"), "plan", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    total = next(line.split() for line in proc.stdout.splitlines() if line.startswith("total"))
    return {"points": int(total[1]), "jobs": int(total[2]), "nodes": int(total[3]), "node_hours": float(total[5])}


@pytest.fixture(scope="module")
def campaign(slurm_cluster, tmp_path_factory):
    """The tiny campaign (uni and alltoall, on 1 and 2 nodes) run once on the cluster, one job per point."""
    workdir = tmp_path_factory.mktemp("slurm-campaign")
    write_config(workdir, TINY)
    proc, took = run_snakemake(workdir, slurm_client_env(slurm_cluster))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    print(f"\ntiny campaign (4 points) through --profile slurm: {took:.1f} s")
    return {"dir": workdir, "jobs": jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout)), "took": took}


def test_every_point_is_one_slurm_job_that_completed(campaign):
    jobs = campaign["jobs"]
    assert len(jobs) == 4 and {j["state"] for j in jobs} == {"COMPLETED"}, jobs
    job_of_point = {point: meta["slurm_job_id"] for point, meta in metas(campaign["dir"]).items()}
    assert len(job_of_point) == 4
    assert sorted(job_of_point.values()) == sorted(j["id"] for j in jobs)
    for point, job_id in job_of_point.items():
        job = next(j for j in jobs if j["id"] == job_id)
        assert job["nodes"] == point.split("nodes~")[1][0], (point, job)
        assert job["time_limit"] == "2:00"  # campaign.timeout 60 s -> 1 min + 1
    # one job at a time (the overlay's jobs: 1): the cluster's nodes share this host's cores, so two 1-node
    # points on n1 and n2 at once would measure each other
    launched = list(metas(campaign["dir"]).values())
    spans = sorted((m["launch_start"], m["launch_end"]) for m in launched)
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans)), spans
    assert all(not m["overlapped_with"] for m in launched)


def test_a_two_node_point_has_its_ranks_on_n1_and_n2(campaign, slurm_cluster):
    for point, meta in metas(campaign["dir"]).items():
        assert meta["ranks"] == 2 and len(meta["rank_nodes"]) == 2
        transport = meta["transport"]
        if "/nodes~2/" in point:
            assert meta["rank_nodes"] == meta["hostnames"] == ["n1", "n2"], (point, meta["rank_nodes"])
            assert meta["rank_addrs"] == [slurm_cluster.node_addr("n1"), slurm_cluster.node_addr("n2")]
            assert meta["command"].startswith("srun --mpi=pmi2 -N 2 -n 2 ")
            # UCX's own report of the lanes it chose: TCP on eth0 between the hosts
            assert transport["netmod"] == "ucx" and transport["ucx"]["inter-node"] == ["tcp/eth0"], transport
            assert sorted(transport["ucx_by_host"]) == ["n1", "n2"]
        else:
            assert len(set(meta["rank_nodes"])) == 1 and meta["rank_nodes"][0] in ("n1", "n2"), point
            assert "inter-node" not in transport["ucx"], transport  # one host: no peer on another


def test_records_tables_and_report_come_back(campaign):
    results = campaign["dir"] / "results"
    records = sorted((results / "raw" / "shuffle").rglob("*.jsonl"))
    assert len(records) == 4
    for path in records:
        recs = read_jsonl(path)
        assert len(recs) == 4 and sum(r["warmup"] for r in recs) == 1 and all(r["ok"] for r in recs)
        assert all(r["bandwidth_Bps"] > 0 for r in recs)
    summary = pd.read_csv(results / "tables" / "shuffle_summary.csv")
    assert sorted(summary["nodes"].unique()) == [1, 2] and set(summary["pattern"]) == {"uni", "alltoall"}
    html = (results / "report.html").read_text()
    assert 'id="partial"' not in html and "alltoall" in html
    # the same pattern and ranks on 1 and 2 nodes, side by side, with the ratio
    assert "Intra- vs inter-node" in html and "2 nodes / 1 node" in html
    assert not (results / "failed").exists()


def test_the_plan_matches_what_slurm_was_asked(campaign):
    jobs = campaign["jobs"]
    planned = plan_totals(campaign["dir"])
    assert planned["jobs"] == len(jobs) == 4
    assert planned["nodes"] == max(int(j["nodes"]) for j in jobs) == 2
    asked = sum(int(j["nodes"]) * int(j["time_limit"].split(":")[0]) for j in jobs) / 60
    assert planned["node_hours"] == pytest.approx(asked, abs=0.01)


def test_the_site_profile_alone_stops_before_submitting_on_a_cluster_without_sacct(slurm_cluster, tmp_path):
    # profiles/slurm leaves the status command to the executor: sacct, which fails here (no slurmdbd).
    # Without the preflight check Snakemake would submit and then poll for ever.
    write_config(tmp_path, TINY)
    proc, took = run_snakemake(tmp_path, slurm_client_env(slurm_cluster), overlay=False, timeout=120)
    assert proc.returncode != 0
    assert "nothing was submitted" in proc.stderr and "sacct" in proc.stderr, proc.stderr[-3000:]
    assert "--slurm-status-command squeue" in proc.stderr and "MinJobAge is 3600 s" in proc.stderr
    assert jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout)) == []
    assert took < 60
    print(f"\nstopped by the preflight check after {took:.1f} s")


def test_a_point_bigger_than_the_partition_stops_the_run_before_submitting(slurm_cluster, tmp_path):
    config = json.loads(json.dumps(TINY))
    config["shuffle"].update(patterns=["uni"], ranks=[4], nodes=[1, 3])
    write_config(tmp_path, config)
    proc, took = run_snakemake(tmp_path, slurm_client_env(slurm_cluster), timeout=120)
    assert proc.returncode != 0
    assert "shuffle.nodes = 3: partition debug gives a job at most 2 nodes" in proc.stderr, proc.stderr[-3000:]
    assert jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout)) == []  # not even the 1-node point
    assert took < 60


def test_a_cancelled_job_is_a_failed_point_and_a_rerun_completes_it(slurm_cluster, tmp_path):
    config = json.loads(json.dumps(TINY))
    config["shuffle"].update(patterns=["uni"], nodes=[2], iterations="auto", repetition_time=60)
    write_config(tmp_path, config)
    env = slurm_client_env(slurm_cluster)
    point = "pattern~uni/nodes~2/ranks~2/message_size~4096/window~4"
    log = tmp_path / "results" / "logs" / "shuffle" / f"{point}.log"
    out = tmp_path / "snakemake.out"
    with out.open("w") as sink:
        smk = subprocess.Popen(snakemake_cmd(tmp_path), cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while not (log.exists() and "movebench: srun" in log.read_text()):  # the kernel is running
                assert smk.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
                time.sleep(0.5)
            jobs = jobs_of(slurm_cluster, run_id(out.read_text()))
            assert [j["state"] for j in jobs] == ["RUNNING"], jobs
            slurm_cluster.run("scancel", jobs[0]["id"])
            t_cancel = time.monotonic()
            smk.wait(timeout=240)
            took = time.monotonic() - t_cancel
        finally:
            if smk.poll() is None:
                smk.kill()
                smk.wait()
    text = out.read_text()
    assert smk.returncode != 0
    # (Snakemake prints the executor's "SLURM status is: 'CANCELLED'" for single jobs, not for group jobs,
    # and a point rule's jobs are group jobs: ask Slurm.)
    assert "Error in group shuffle" in text, text[-3000:]
    assert [j["state"] for j in jobs_of(slurm_cluster, run_id(text))] == ["CANCELLED"]
    failure = json.loads((tmp_path / "results" / "failed" / "shuffle" / f"{point}.json").read_text())
    assert failure["nodes"] == 2 and "SIGTERM" in failure["error"]
    assert not (tmp_path / "results" / "raw" / "shuffle" / f"{point}.jsonl").exists()
    html = (tmp_path / "results" / "report.partial.html").read_text()
    assert 'id="partial"' in html and "SIGTERM" in html
    print(f"\nsnakemake exited {took:.1f} s after scancel")

    # The same point, quick this time: the rerun redoes it and the report is whole again.
    config["shuffle"].update(iterations=5, repetition_time=0.2)
    write_config(tmp_path, config)
    proc, took = run_snakemake(tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(read_jsonl(tmp_path / "results" / "raw" / "shuffle" / f"{point}.jsonl")) == 4
    assert not list((tmp_path / "results" / "failed").rglob("*.json"))
    assert 'id="partial"' not in (tmp_path / "results" / "report.html").read_text()
    assert not (tmp_path / "results" / "report.partial.html").exists()
    print(f"rerun of the cancelled point: {took:.1f} s")


def test_grouped_points_share_one_allocation_one_after_another(slurm_cluster, tmp_path):
    write_config(tmp_path, TINY)
    proc, took = run_snakemake(tmp_path, slurm_client_env(slurm_cluster), "--group-components", "shuffle=4")
    assert proc.returncode == 0, proc.stderr[-6000:]
    jobs = jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout))
    # One allocation as large as the largest point, for the sum of the four points' time limits.
    assert [(j["state"], j["nodes"], j["time_limit"]) for j in jobs] == [("COMPLETED", "2", "8:00")], jobs
    by_point = metas(tmp_path)
    assert len(by_point) == 4 and {m["slurm_job_id"] for m in by_point.values()} == {jobs[0]["id"]}
    for point, meta in by_point.items():
        expected = 2 if "/nodes~2/" in point else 1  # srun -N keeps a 1-node point on one node of the two
        assert len(set(meta["rank_nodes"])) == expected, (point, meta["rank_nodes"])
    spans = sorted((m["launch_start"], m["launch_end"]) for m in by_point.values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False)), spans
    planned = plan_totals(tmp_path, "--group-components", "shuffle=4")
    assert (planned["jobs"], planned["nodes"]) == (1, 2)
    assert planned["node_hours"] == pytest.approx(2 * 8 / 60, abs=0.01)
    print(f"\n4 points in one allocation: {took:.1f} s")


KV_ONE_NODE = {
    "campaign": {"name": "kv-slurm", "results_dir": "results",
                 "launches": 1, "repetitions": 2, "warmups": 1, "timeout": 120},
    "kv": {
        "operations": ["put"],
        "nodes": [1],
        "clients_per_node": [1],
        "managers_per_node": [1],
        "streams_per_manager": 5,
        "value_sizes": ["4KiB"],
        "total_mem": "64MiB",
        "keys_per_client": 50,
        "iterations": 1,
    },
}


@pytest.mark.dragon
def test_a_one_node_dragon_point_runs_in_its_allocation_without_an_srun_around_it(slurm_cluster, tmp_path):
    # One node through the profile; Dragon across two nodes: tests/test_netns_cluster.py.
    pytest.importorskip("dragon")
    write_config(tmp_path, KV_ONE_NODE)
    proc, took = run_snakemake(tmp_path, slurm_client_env(slurm_cluster))
    assert proc.returncode == 0, proc.stderr[-6000:]
    jobs = jobs_of(slurm_cluster, run_id(proc.stderr + proc.stdout))
    # One client per node is one task, but the executor refuses an `mpi` job with one task: 2.
    assert [(j["state"], j["nodes"]) for j in jobs] == [("COMPLETED", "1")], jobs
    assert slurm_cluster.run("scontrol", "show", "job", jobs[0]["id"]).stdout.count("NumTasks=2") == 1
    raw = tmp_path / "results" / "raw" / "kv"
    (meta_path,) = raw.rglob("*.meta.json")
    meta = json.loads(meta_path.read_text())
    env = meta["environment"]
    assert meta["slurm_job_id"] == jobs[0]["id"] and meta["dragon_launch"]["returncode"] == 0
    # Run by the batch script itself: no job step around Dragon (an srun would have set SLURM_STEP_ID) ...
    assert "SLURM_STEP_ID" not in env
    # ... and with the allocation's node count and list back, which Dragon's Slurm launcher reads.
    assert (env["SLURM_JOB_NUM_NODES"], env["SLURM_JOB_NODELIST"]) == ("1", jobs[0]["nodelist"])
    (records,) = raw.rglob("*.jsonl")
    recs = read_jsonl(records)
    assert len(recs) == 3 and all(r["ok"] for r in recs)
    print(f"\none kv point (Dragon, 1 node) through --profile slurm: {took:.1f} s")
