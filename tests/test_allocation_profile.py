"""`snakemake --profile allocation` inside one Slurm allocation on the live local cluster (nodes n1, n2).

What a user types on a login node, with salloc running snakemake (salloc runs its command where it was
typed, here the host, outside the nodes):

    salloc -N 2 python -m snakemake --profile allocation --directory <tmp> --configfile <tmp>/config.yaml

Every point is an `srun` step of that one allocation, one at a time. The batch way, scripts/sbatch-campaign.sh
(what `make sbatch` submits), runs snakemake on the allocation's first node: kv (Dragon) points run only there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, slurm_client_env
from movebench.core.records import read_jsonl
from test_slurm_campaign import TINY as SLURM_TINY
from test_slurm_campaign import metas, write_config

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux only")

# test_slurm_campaign's tiny campaign, one pattern and two repetitions: each run here is its own allocation
TINY = {"campaign": {**SLURM_TINY["campaign"], "name": "tiny-allocation", "repetitions": 2},
        "shuffle": {**SLURM_TINY["shuffle"], "patterns": ["uni"]}}


def snakemake_argv(workdir: Path, *args: str) -> list[str]:
    """`snakemake --profile allocation` from the repository root (its `allocation` link), as docs/slurm.md says."""
    return [PYTHON, "-m", "snakemake", "--profile", "allocation", "--directory", str(workdir),
            "--configfile", str(workdir / "config.yaml"), *args]  # fmt: skip


def salloc_argv(nodes: int, workdir: Path, *args: str) -> list[str]:
    return ["salloc", "-N", str(nodes), "-t", "10", *snakemake_argv(workdir, *args)]


def in_allocation(nodes: int, workdir: Path, env: dict, timeout: float = 300) -> tuple:
    """(the campaign in `workdir` run under `salloc -N nodes` as a user types it, its wall time)."""
    t0 = time.monotonic()
    proc = subprocess.run(salloc_argv(nodes, workdir), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - t0


def granted(text: str) -> str:
    m = re.search(r"Granted job allocation (\d+)", text)
    assert m, text[-3000:]
    return m.group(1)


@pytest.mark.slurm
def test_points_of_one_and_two_nodes_run_as_steps_of_one_allocation(slurm_cluster, tmp_path):
    write_config(tmp_path, TINY)
    proc, took = in_allocation(2, tmp_path, slurm_client_env(slurm_cluster))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    job = granted(proc.stderr)
    by_point = metas(tmp_path)
    assert len(by_point) == 2
    for point, meta in by_point.items():
        # one job id for both node counts: the allocation's, not one job per point
        assert meta["slurm_job_id"] == job, (point, meta["slurm_job_id"])
        assert meta["allocation"] == {"job_id": job, "nodes": 2, "nodelist": "n[1-2]"}, meta["allocation"]
        nodes = 2 if "/nodes~2/" in point else 1
        assert meta["command"].startswith(f"srun --mpi=pmi2 --exclusive -N {nodes} -n 2 "), meta["command"]
        # the step's ranks on the allocation's nodes, never on the host salloc ran snakemake on
        assert set(meta["hostnames"]) <= {"n1", "n2"} and len(set(meta["hostnames"])) == nodes, meta["hostnames"]
        if nodes == 2:
            assert meta["rank_nodes"] == ["n1", "n2"]
        recs = read_jsonl(tmp_path / "results" / "raw" / "shuffle" / f"{point}.jsonl")
        assert len(recs) == 3 and all(r["ok"] for r in recs)
    spans = sorted((m["launch_start"], m["launch_end"]) for m in by_point.values())
    assert spans[0][1] <= spans[1][0], spans  # one point at a time
    # The allocation was the campaign's only job.
    out = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%i|%T|%D").stdout.split()
    assert out == [f"{job}|COMPLETED|2"], out
    assert (tmp_path / "results" / "report.html").exists()
    print(f"\n2 points in one salloc -N 2 through --profile allocation: {took:.1f} s")


@pytest.mark.slurm
def test_a_point_bigger_than_the_allocation_is_refused_before_any_point_runs(slurm_cluster, tmp_path):
    config = json.loads(json.dumps(TINY))
    config["shuffle"].update(ranks=[4], nodes=[2, 3])  # 2 ranks on each of 2 nodes fit their 2 CPUs
    write_config(tmp_path, config)
    proc, took = in_allocation(2, tmp_path, slurm_client_env(slurm_cluster), timeout=120)
    assert proc.returncode != 0
    job = granted(proc.stderr)
    assert (f"movebench: refused before any job: 1 point or folder does not fit Slurm allocation {job} "
            "(2 nodes: n[1-2]):") in proc.stderr, proc.stderr[-3000:]
    assert ("shuffle pattern~uni/nodes~3/ranks~4/message_size~4096/window~4: 3 nodes, but the allocation has 2"
            in proc.stderr), proc.stderr[-3000:]
    assert "nodes~2/" not in proc.stderr.split("refused before any job")[1]  # the 2-node point fits
    assert not (tmp_path / "results" / "raw").exists() and not (tmp_path / "results" / "logs").exists()
    assert took < 60
    print(f"\nrefused in the allocation after {took:.1f} s")


def job_state(cluster, job: str) -> str:
    return cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T", check=False).stdout.strip()


@pytest.mark.slurm
def test_a_killed_batch_allocation_leaves_a_campaign_the_next_allocation_completes(slurm_cluster, tmp_path):
    # The batch way (scripts/sbatch-campaign.sh, what `make sbatch` submits) is cancelled mid-campaign; the
    # interactive way (salloc) finishes the campaign in a new allocation.
    config = json.loads(json.dumps(TINY))
    # 4 points long enough (3 repetitions of 3 s) to cancel the allocation while one runs, others still to come
    config["shuffle"].update(patterns=["uni", "alltoall"], iterations="auto", repetition_time=3)
    write_config(tmp_path, config)
    env = slurm_client_env(slurm_cluster) | {"MOVEBENCH_PYTHON": PYTHON}
    raw = tmp_path / "results" / "raw" / "shuffle"
    logs = tmp_path / "results" / "logs" / "shuffle"
    out = tmp_path / "batch.out"
    submitted = subprocess.run(["sbatch", "--parsable", "-N", "2", "-t", "10", "-o", str(out),
                                "scripts/sbatch-campaign.sh", "--directory", str(tmp_path),
                                "--configfile", str(tmp_path / "config.yaml")],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    job = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 120
        while True:  # a point done, the next one's kernel running
            done = list(raw.rglob("*.jsonl")) if raw.exists() else []
            started = [p for p in logs.rglob("*.log") if "movebench: srun" in p.read_text()] if logs.exists() else []
            if done and len(started) > len(done):
                break
            assert job_state(slurm_cluster, job) in ("PENDING", "RUNNING") and time.monotonic() < deadline, (
                out.read_text()[-3000:] if out.exists() else job_state(slurm_cluster, job))
            time.sleep(0.3)
        slurm_cluster.run("scancel", job)
        deadline = time.monotonic() + 60
        while "movebench: interrupted" not in out.read_text():  # Slurm's SIGTERM, taken as a Ctrl-C
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        slurm_cluster.run("scancel", job, check=False)
    text = out.read_text()
    assert f"movebench: allocation {job} on 2 nodes (n[1-2]), snakemake on n1" in text, text[:2000]
    kept = {str(p.relative_to(raw)).removesuffix(".jsonl"): p.stat().st_mtime for p in raw.rglob("*.jsonl")}
    assert 1 <= len(kept) < 4, kept
    # Snakemake unlocked on its way out: the next run needs no --unlock
    assert not list((tmp_path / ".snakemake" / "locks").glob("*")), text[-3000:]

    proc, took = in_allocation(2, tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    second = granted(proc.stderr)
    by_point = metas(tmp_path)
    assert len(by_point) == 4
    for point, meta in by_point.items():
        if point in kept:  # measured in the first allocation, not again
            assert meta["allocation"]["job_id"] == job
            assert (raw / f"{point}.jsonl").stat().st_mtime == kept[point]
        else:
            assert meta["allocation"]["job_id"] == second
    assert not list((tmp_path / "results" / "failed").rglob("*.json"))
    assert 'id="partial"' not in (tmp_path / "results" / "report.html").read_text()
    print(f"\n{4 - len(kept)} points left by scancel run in a new allocation: {took:.1f} s")


KV = {
    "campaign": {"name": "kv-allocation", "results_dir": "results",
                 "launches": 1, "repetitions": 2, "warmups": 1, "timeout": 120},
    "kv": {
        "operations": ["put"],
        "nodes": [1, 2],
        "clients_per_node": [1],
        "managers_per_node": [1],
        "streams_per_manager": 5,
        "value_sizes": ["4KiB"],
        "total_mem": "64MiB",
        "keys_per_client": 50,
        "iterations": 1,
    },
}


def sbatch_campaign(cluster, workdir: Path, env: dict, nodes: int = 2) -> tuple[str, Path]:
    """scripts/sbatch-campaign.sh on the campaign in `workdir`, as `make sbatch` submits it: (job id, its output)."""
    out = workdir / "batch.out"
    proc = subprocess.run(["sbatch", "--parsable", "-N", str(nodes), "-t", "10", "-o", str(out),
                           "scripts/sbatch-campaign.sh", "--directory", str(workdir),
                           "--configfile", str(workdir / "config.yaml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return proc.stdout.strip().split(";")[0], out


@pytest.mark.slurm
@pytest.mark.dragon
def test_kv_points_run_from_the_batch_script_and_are_refused_under_salloc(slurm_cluster, tmp_path):
    pytest.importorskip("dragon")
    write_config(tmp_path, KV)
    env = slurm_client_env(slurm_cluster) | {"MOVEBENCH_PYTHON": PYTHON}
    # salloc runs snakemake on this host, no node of the allocation: Dragon would run here, refused first
    proc, _ = in_allocation(2, tmp_path, env, timeout=120)
    assert proc.returncode != 0 and "refused before any job: 2 points or folders" in proc.stderr, proc.stderr[-3000:]
    assert "Dragon runs where snakemake runs, and that is no node of the allocation" in proc.stderr
    assert not (tmp_path / "results" / "raw").exists()

    t0 = time.monotonic()
    job, out = sbatch_campaign(slurm_cluster, tmp_path, env)
    deadline = time.monotonic() + 240
    while job_state(slurm_cluster, job) in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
        assert time.monotonic() < deadline, out.read_text()[-3000:] if out.exists() else job
        time.sleep(0.5)
    took = time.monotonic() - t0
    assert job_state(slurm_cluster, job) == "COMPLETED", out.read_text()[-4000:]
    raw = tmp_path / "results" / "raw" / "kv"
    by_nodes = {}
    for path in raw.rglob("*.meta.json"):
        meta = json.loads(path.read_text())
        by_nodes[meta["task"]["nodes"]] = meta
        assert meta["allocation"] == {"job_id": job, "nodes": 2, "nodelist": "n[1-2]"}
        assert meta["dragon_launch"]["returncode"] == 0 and meta["head_host"] in ("n1", "n2")
    assert sorted(by_nodes) == [1, 2]
    # the 2-node point's DDict managers on both nodes, nothing left on either after it
    assert sorted({s["hostname"] for s in by_nodes[2]["ddict_stats"]}) == ["n1", "n2"]
    swept = by_nodes[2]["dragon_launch"]["nodes_swept"]
    assert sorted(swept) == ["n1", "n2"] and not any(v["killed_pids"] for v in swept.values()), swept
    assert len(list(raw.rglob("*.jsonl"))) == 2
    print(f"\n2 kv points (1 and 2 nodes) in one batch allocation: {took:.1f} s")


def test_the_profile_outside_an_allocation_stops_at_once(tmp_path):
    write_config(tmp_path, TINY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(snakemake_argv(tmp_path), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no SLURM_JOB_ID" in proc.stderr and "run it inside salloc/sbatch" in proc.stderr, proc.stderr[-3000:]
    assert "or use --profile slurm" in proc.stderr
    assert not (tmp_path / "results" / "raw").exists()


def test_a_killed_runs_stale_lock_stops_the_next_run_with_the_way_out(tmp_path):
    # What a run killed outright (SIGKILL after the allocation's KillWait) leaves: Snakemake's lock on its outputs.
    write_config(tmp_path, TINY)
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/report.html\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(snakemake_argv(tmp_path), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--unlock" in proc.stderr, proc.stderr[-3000:]
    assert "run the same command once with --unlock, then again as it was" in proc.stderr
    # its end is written in its own --directory, not in the caller's results (it ran from ROOT)
    assert str(tmp_path) in json.loads((tmp_path / "results" / "campaign_run.json").read_text())["command"]
    callers = ROOT / "results" / "campaign_run.json"
    assert not callers.exists() or str(tmp_path) not in callers.read_text()
    # and so is its partial report (tests/conftest.py's guard fails the session if the caller's results/ changed)
    assert "tiny-allocation" in (tmp_path / "results" / "report.partial.html").read_text()
    unlocked = subprocess.run(snakemake_argv(tmp_path, "--unlock"), cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    assert unlocked.returncode == 0 and not list(locks.glob("*")), unlocked.stderr[-3000:]


def test_admission_reads_the_allocation_from_its_environment_or_scontrol():
    from movebench.engine import admission, cluster

    def scontrol(argv):
        if argv[:3] == ["scontrol", "show", "job"]:
            return subprocess.CompletedProcess(argv, 0, "JobId=7 NumNodes=4 NumCPUs=128 NodeList=c[1-4]\n", "")
        if argv[:3] == ["scontrol", "show", "node"]:
            return subprocess.CompletedProcess(argv, 0, "NodeName=c1 RealMemory=64000\nNodeName=c2 RealMemory=32000\n",
                                               "")
        return subprocess.CompletedProcess(argv, 1, "", "no")

    # salloc's environment
    cap = cluster.allocation_capacity({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NODELIST": "c[1-4]",
                                       "SLURM_JOB_CPUS_PER_NODE": "32(x4)", "SLURM_MEM_PER_NODE": "1000"}, scontrol)
    assert (cap.max_nodes, cap.cores, cap.memory_bytes, cap.memory_source) == (4, 32, 1000 * 2**20,
                                                                              "SLURM_MEM_PER_NODE")
    assert cap.allocation and not cap.local_storage and cap.where == "Slurm allocation 7 (4 nodes: c[1-4])"
    # only the job id (the older SLURM_NNODES, or nothing): scontrol says the rest
    cap = cluster.allocation_capacity({"SLURM_JOB_ID": "7"}, scontrol)
    assert (cap.max_nodes, cap.cores, cap.memory_bytes, cap.memory_source) == (4, 32, 32000 * 2**20, "RealMemory")
    assert cluster.allocation_info({"SLURM_JOB_ID": "7", "SLURM_NNODES": "2", "SLURM_NODELIST": "c[1-2]"},
                                   scontrol) == {"job_id": "7", "nodes": 2, "nodelist": "c[1-2]"}
    assert cluster.allocation_capacity({}, scontrol) is None
    from movebench import campaign
    from movebench.engine import plan as planning

    raw = json.loads(json.dumps(TINY))
    raw["shuffle"].update(ranks=[8], nodes=[4, 5])
    config = campaign.validate(raw, warn=lambda line: None)
    lines = admission.problems(config, planning.grid(config), cap)
    assert len(lines) == 1 and "nodes~5/" in lines[0], lines
    assert "5 nodes, but the allocation has 4" in lines[0] and "salloc -N 5" in lines[0]
    # an srun step does not put more tasks on a node than the allocation has CPUs there
    raw["shuffle"].update(ranks=[34, 64], nodes=[1, 2])
    config = campaign.validate(raw, warn=lambda line: None)
    lines = admission.problems(config, planning.grid(config), cap)
    assert [line.split(":")[0].split("/")[1:3] for line in lines] == [["nodes~1", "ranks~34"], ["nodes~1", "ranks~64"]]
    assert "34 ranks on one node, but the allocation's nodes have 32 CPUs" in lines[0] and "srun step" in lines[0]


def test_dragon_points_are_refused_where_snakemake_runs_on_no_node_of_the_allocation():
    from movebench import campaign

    todo = {"kv": [{"operation": "put", "nodes": 1}]}
    (line,) = campaign.off_allocation(todo, {"SLURM_JOB_ID": "7"})
    assert line.startswith("kv ") and "make sbatch" in line
    assert campaign.off_allocation(todo, {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1"}) == []
    assert campaign.off_allocation({"shuffle": [{"pattern": "uni"}]}, {"SLURM_JOB_ID": "7"}) == []


@pytest.mark.slurm
def test_a_sweep_extended_by_one_value_measures_only_its_points_in_the_next_allocation(slurm_cluster, tmp_path):
    # As tests/test_sweep_extension.py under the local profile: launch groups on, the old records byte for byte.
    config = json.loads(json.dumps(TINY))
    config["campaign"]["launches"] = 2
    config["shuffle"].update(nodes=[1], message_sizes=["4KiB"], launch_groups=True)
    write_config(tmp_path, config)
    env = slurm_client_env(slurm_cluster)
    proc, _ = in_allocation(1, tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    first_job = granted(proc.stderr)
    raw = tmp_path / "results" / "raw" / "shuffle"
    before = {p.relative_to(raw).as_posix(): p.read_bytes() for p in sorted(raw.rglob("*")) if p.is_file()}
    assert len([p for p in before if p.endswith(".jsonl")]) == 2  # 1 point x 2 launches

    config["shuffle"]["message_sizes"] = ["4KiB", "8KiB"]
    write_config(tmp_path, config)
    proc, _ = in_allocation(1, tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    second_job = granted(proc.stderr)
    after = {p.relative_to(raw).as_posix(): p.read_bytes() for p in sorted(raw.rglob("*")) if p.is_file()}
    assert {name: after.get(name) for name in before} == before  # every old file, byte for byte
    added = sorted(set(after) - set(before))
    point = "pattern~uni/nodes~1/ranks~2/message_size~8192/window~4"
    assert [name for name in added if name.endswith(".jsonl")] == [f"{point}.jsonl", f"{point}/launch~1.jsonl"], added
    jobs = {point: meta["slurm_job_id"] for point, meta in metas(tmp_path).items()}
    assert {job for point, job in jobs.items() if "message_size~8192" in point} == {second_job}, jobs
    assert {job for point, job in jobs.items() if "message_size~4096" in point} == {first_job}, jobs
