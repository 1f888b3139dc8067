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
    subprocess.run(command(work), cwd=work, capture_output=True, text=True, timeout=300, check=True)
    assert len(list((work / "results" / "raw").rglob("*.jsonl"))) == 1
