"""A SIGKILLed snakemake leaves no point running: launch watches the snakemake that started it and stops its
kernel when that one is gone, with a failure record saying so; after `--unlock` the same command reruns it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import PYTHON, ROOT

pytestmark = [pytest.mark.pipeline, pytest.mark.mpi]


def command(work: Path, *args) -> list[str]:
    return [PYTHON, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(work),
            "--profile", str(ROOT / "profiles" / "local"), "--configfile", str(work / "config.yaml"), *args]


def processes_of(work: Path) -> list[str]:
    """Command lines of live processes working in the campaign's folder (snakemake's jobs: the shell, launch,
    mpiexec and the ranks all run there)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) != work:
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline and (proc / "stat").read_text().split()[2] != "Z":
            found.append(cmdline)
    return found


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_sigkilled_snakemake_leaves_no_point_running_and_the_rerun_completes(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    config = {"campaign": {"name": "orphans", "results_dir": "results", "launches": 1, "repetitions": 30,
                           "warmups": 0, "timeout": 120},
              "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "message_sizes": ["4KiB"],
                          "iterations": "auto", "repetition_time": 1.0}}
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    with open(tmp_path / "console.txt", "w") as console:
        proc = subprocess.Popen(command(work), cwd=work, stdout=console, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        # the kernel runs: its ranks name the task file in the results folder
        wait_for(lambda: any("movebench.families.shuffle.kernel" in c for c in processes_of(work)), 120,
                 "the point's kernel")
        proc.send_signal(signal.SIGKILL)  # snakemake alone, as the OOM killer or `kill -9 <pid>` would
        proc.wait(10)
        stopped = time.monotonic()
        wait_for(lambda: not processes_of(work), 30, "the point's processes to end")
        # the point alone runs 30 s: it was stopped (INT, then KILL after launch.GRACE_S), not left to finish
        assert time.monotonic() - stopped < 20
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    failed = list((work / "results" / "failed").rglob("*.json"))
    assert len(failed) == 1
    error = json.loads(failed[0].read_text())["error"]
    assert "the snakemake that started it" in error and "ended" in error
    assert not list((work / "results" / "raw").rglob("*.jsonl"))
    # Snakemake's lock stays after a SIGKILL: --unlock, then the same command measures the point
    again = subprocess.run(command(work), cwd=work, capture_output=True, text=True, timeout=300)
    assert again.returncode != 0 and "--unlock" in again.stdout + again.stderr
    subprocess.run(command(work, "--unlock"), cwd=work, capture_output=True, text=True, timeout=120, check=True)
    config["campaign"]["repetitions"] = 3  # the point has no records: the rerun measures it, and needs no 30 s
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(command(work), cwd=work, capture_output=True, text=True, timeout=300, check=True)
    assert len(list((work / "results" / "raw").rglob("*.jsonl"))) == 1


FAKE_SNAKEMAKE = """#!{python}
# Stands in for snakemake: runs launch and waits for it, until the launcher below kills it.
import os, subprocess, sys
os.environ["FAKE_SNAKEMAKE_PID"] = str(os.getpid())
subprocess.run(sys.argv[1:])
"""

# The MPI launcher: the point's kernel runs to its end, then the snakemake that started launch is killed before
# launch sees the kernel end and books the point (as a snakemake killed at that moment would be).
KILLING_LAUNCHER = """#!/bin/sh
{mpiexec} "$@"
rc=$?
kill -9 "$FAKE_SNAKEMAKE_PID"
sleep 0.3
exit $rc
"""


def test_a_point_that_finishes_after_its_snakemake_ended_is_kept_and_not_measured_again(tmp_path):
    from movebench.engine import config as campaign_config
    from movebench.engine import plan

    config = campaign_config.validate({
        "campaign": {"name": "kept", "results_dir": str(tmp_path / "results"), "launches": 1, "repetitions": 2,
                     "warmups": 0},
        "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "message_sizes": ["4KiB"],
                    "iterations": 20}})
    (where, task), = plan.tasks(config, plan.grid(config))["shuffle"].items()
    raw = tmp_path / "results" / "raw" / "shuffle"
    out, meta, kept = raw / f"{where}.jsonl", raw / f"{where}.meta.json", tmp_path / "results" / ".kept"
    out.parent.mkdir(parents=True)
    argv = [PYTHON, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()), "--out", str(out),
            "--meta", str(meta), "--failed", str(tmp_path / "failed.json"), "--kept", str(kept)]
    fake, launcher = tmp_path / "snakemake", tmp_path / "launcher.sh"
    fake.write_text(FAKE_SNAKEMAKE.format(python=PYTHON))
    launcher.write_text(KILLING_LAUNCHER.format(mpiexec=Path(PYTHON).with_name("mpiexec")))
    for script in (fake, launcher):
        script.chmod(0o755)
    subprocess.run([str(fake), *argv, "--launcher", str(launcher), "--log", str(tmp_path / "first.log")],
                   timeout=120)
    kept_task = kept / "shuffle" / f"{where}.task.json"
    wait_for(lambda: kept_task.exists() and out.exists(), 60, "the orphaned launch to keep its point")
    log = wait_for(lambda: "not measure it again" in (tmp_path / "first.log").read_text()
                   and (tmp_path / "first.log").read_text(), 30, "launch's line")
    assert "finished after the snakemake that started it ended" in log
    first = json.loads(meta.read_text())
    # the rerun, as Snakemake runs it: the job's outputs were marked incomplete, so it deletes them first
    out.unlink()
    meta.unlink()
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "not measured again" in again.stdout and "records in" not in again.stdout
    assert json.loads(meta.read_text())["launch_start"] == first["launch_start"]
    assert not list(kept.rglob("*.jsonl"))  # booked: nothing waits any more
