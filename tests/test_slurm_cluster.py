"""The local two-node Slurm cluster (movebench_testcluster), with real daemons.

The session fixture `slurm_cluster` (tests/conftest.py) starts munged, slurmctld and two slurmd (nodes n1
and n2, each in its own network namespace on 198.18.0.0/24) in a fresh state directory, or reuses one
already started with `python -m movebench_testcluster up` (and then leaves it running).  It
installs Debian's slurm-wlm and munge with apt-get when they are missing,
which needs root.

What these tests pin down for the project's slurm profile:
- MPI (the mpich wheel) across nodes inside an allocation: `srun --mpi=pmi2`,
  or Hydra's `mpiexec -launcher slurm` while the job's SLURM_* variables are set.
- Through Snakemake's slurm executor (campaigns: tests/test_slurm_campaign.py and
  tests/test_multinode.py, a cancelled job included): the job step strips SLURM_*
  variables, so the rule must say how many tasks, and job status comes from squeue
  (no slurmdbd, so no sacct).
- A job that can never run is rejected at submission, so Snakemake fails fast.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from movebench_testcluster.slurm import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]

PYTHON = sys.executable
VENV_BIN = str(Path(PYTHON).parent)

HELLO = """\
import json, os, socket
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1, op=MPI.SUM)
print(json.dumps({"rank": comm.rank, "size": comm.size, "node": os.environ.get("SLURMD_NODENAME"),
                  "host": socket.gethostname(), "sum": total}), flush=True)
"""

# The settings the project's slurm profile needs on this cluster (see the module's docstring).
PROFILE = {
    "executor": "slurm",
    "jobs": 2,
    "latency-wait": 5,
    "default-resources": {"slurm_partition": "debug", "runtime": 10, "mem_mb": 500},
    "slurm-status-command": "squeue",
    "slurm-init-seconds-before-status-checks": 2,
    "seconds-between-status-checks": 2,
}


def sbatch_wait(cluster: LocalSlurmCluster, tmp_path: Path, env: dict, *args: str, timeout: float = 120):
    """Submit with sbatch and poll squeue every 0.1 s (`sbatch --wait` polls only every few seconds).

    Returns the job's output and its turnaround (submission to a final state) in seconds.
    """
    out = tmp_path / "job.out"
    t0 = time.monotonic()
    sub = subprocess.run(
        ["sbatch", "--parsable", "-o", str(out), "-D", str(tmp_path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert sub.returncode == 0, f"sbatch {args} failed:\n{sub.stdout}\n{sub.stderr}"
    jobid = sub.stdout.strip().split(";")[0]
    state = ""
    while time.monotonic() - t0 < timeout:
        state = cluster.run("squeue", "-h", "-j", jobid, "-t", "all", "-o", "%T", check=False).stdout.strip()
        if state in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}:
            break
        time.sleep(0.1)
    took = time.monotonic() - t0
    text = out.read_text() if out.exists() else ""
    assert state == "COMPLETED", f"job {jobid} ({args}) ended {state!r}:\n{text}"
    return text, took


def ranks(text: str) -> list[dict]:
    """The JSON lines of HELLO.  Hydra may glue two ranks' lines together, so match objects, not lines."""
    return sorted((json.loads(m) for m in re.findall(r"\{[^{}]*\}", text)), key=lambda r: r["rank"])


def test_both_nodes_are_idle(slurm_cluster):
    assert slurm_cluster.node_states() == {"n1": "idle", "n2": "idle"}


def test_job_ids_do_not_start_at_1_again(slurm_cluster):
    # MPICH names its /dev/shm segment after "<job>.<step>": a segment left by a killed job of an
    # earlier cluster broke the next cluster's job of the same id.
    config = slurm_cluster.run("scontrol", "show", "config").stdout
    assert int(re.search(r"^FirstJobId\s*=\s*(\d+)", config, re.MULTILINE).group(1)) > 1000


def test_two_node_batch_job_runs_on_n1_and_n2(slurm_cluster, job_env, tmp_path):
    text, took = sbatch_wait(
        slurm_cluster, tmp_path, job_env, "-N", "2", "--ntasks-per-node=1", "--wrap", "srun printenv SLURMD_NODENAME"
    )
    assert sorted(text.split()) == ["n1", "n2"]
    assert took < 30
    print(f"2-node sbatch job: {took:.2f}s from submission to COMPLETED")


def test_mpi_allreduce_across_both_nodes_with_srun_pmi2(slurm_cluster, job_env, tmp_path):
    (tmp_path / "hello.py").write_text(HELLO)
    text, _ = sbatch_wait(
        slurm_cluster,
        tmp_path,
        job_env,
        "-N",
        "2",
        "--ntasks-per-node=2",
        "--wrap",
        f"srun --mpi=pmi2 {PYTHON} hello.py",
    )
    rs = ranks(text)
    assert [r["rank"] for r in rs] == [0, 1, 2, 3], text
    assert {r["size"] for r in rs} == {4}
    assert {r["sum"] for r in rs} == {1 + 2 + 3 + 4}
    assert [r["node"] for r in rs] == ["n1", "n1", "n2", "n2"]


def test_mpi_with_hydra_slurm_launcher_in_allocation(slurm_cluster, job_env, tmp_path):
    (tmp_path / "hello.py").write_text(HELLO)
    mpiexec = Path(VENV_BIN) / "mpiexec"
    if not mpiexec.exists():
        pytest.skip("no mpiexec next to this python (mpich wheel not installed)")
    text, _ = sbatch_wait(
        slurm_cluster,
        tmp_path,
        job_env,
        "-N",
        "2",
        "-n",
        "2",
        "--wrap",
        f"{mpiexec} -launcher slurm -n 2 {PYTHON} hello.py",
    )
    rs = ranks(text)
    assert [(r["rank"], r["node"], r["sum"]) for r in rs] == [(0, "n1", 3), (1, "n2", 3)], text


def _snakemake(workdir: Path, env: dict, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    (workdir / "profile").mkdir(exist_ok=True)
    (workdir / "profile" / "config.yaml").write_text(yaml.safe_dump(PROFILE, sort_keys=False))
    t0 = time.monotonic()
    proc = subprocess.run(
        [PYTHON, "-m", "snakemake", "--profile", "profile", "--directory", str(workdir)],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    return proc, time.monotonic() - t0


def test_snakemake_fails_fast_when_a_job_can_never_run(slurm_cluster, job_env, tmp_path):
    # EnforcePartLimits=ALL: sbatch rejects 3 nodes at once instead of leaving the job PENDING forever.
    (tmp_path / "Snakefile").write_text(
        """
rule too_big:
    output: "never.txt"
    resources: nodes=3, tasks=3, mpi="srun --mpi=pmi2"
    shell: "{resources.mpi} -n {resources.tasks} hostname > {output}"
"""
    )
    proc, took = _snakemake(tmp_path, job_env, timeout=120)
    assert proc.returncode != 0
    assert "Node count specification invalid" in proc.stderr, proc.stderr[-4000:]
    assert took < 60
