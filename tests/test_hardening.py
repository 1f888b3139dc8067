"""Faults and interrupts leave a campaign that simply reruns; no secret reaches any output (issue 11).

Everything here runs for real: snakemake with the local profile, Ctrl-C as SIGINT to a whole
process group, ranks killed with SIGKILL, a full disk on a tmpfs mounted here, two campaigns at once.
"""

import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import MPIEXEC, PYTHON, ROOT
from movebench import families
from movebench.engine import launch, machine
from movebench.engine.launchers import mpi as mpi_launcher
from movebench.engine.launchers import process
from movebench.services import azurite as azurite_service

pytestmark = pytest.mark.pipeline

TINY = {"campaign": {"name": "tiny", "results_dir": "results",
                     "launches": 1, "repetitions": 2, "warmups": 0, "timeout": 60},
        "shuffle": {"patterns": ["uni"], "ranks": [2], "message_sizes": ["1KiB", "2KiB", "4KiB"], "windows": [2],
                    "iterations": 3}}
# Points of about two seconds each: long enough to be interrupted inside, short enough for a test.
SLOW = {"campaign": {"name": "slow", "results_dir": "results",
                     "launches": 1, "repetitions": 3, "warmups": 1, "timeout": 60},
        "shuffle": {"patterns": ["uni"], "ranks": [2], "message_sizes": ["1KiB", "2KiB", "4KiB", "8KiB"],
                    "windows": [4], "iterations": "auto", "repetition_time": 0.4}}


def snakemake_cmd(workdir: Path, *args, snakefile=ROOT / "Snakefile", profile=ROOT / "profiles" / "local"):
    return [PYTHON, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir),
            "--profile", str(profile), "--configfile", str(workdir / "config.yaml"), *args]


def run(workdir: Path, *args, env=None, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_cmd(workdir, *args, **kw), capture_output=True, text=True, timeout=timeout,
                          cwd=workdir, env=env)


def start(cmd, workdir: Path, env=None, cwd=None) -> subprocess.Popen:
    """A command in a process group of its own, as a terminal starts it; output to workdir/console.txt."""
    out = open(workdir / "console.txt", "w")  # noqa: SIM115 - closed by finish()
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            cwd=cwd or workdir, env=env)


def finish(proc: subprocess.Popen, workdir: Path, timeout=300) -> str:
    proc.wait(timeout)
    proc.stdout and proc.stdout.close()
    return (workdir / "console.txt").read_text()


def records(workdir: Path, results="results") -> dict[str, Path]:
    return {str(p.relative_to(workdir / results / "raw")): p for p in (workdir / results / "raw").rglob("*.jsonl")}


def wait_for(predicate, timeout=300, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    raise AssertionError("timed out waiting")


def planned_points(workdir: Path, **kw) -> int:
    proc = run(workdir, "--dry-run", **kw)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = re.search(r"^shuffle_point\s+(\d+)$", proc.stdout + proc.stderr, re.M)
    return int(m.group(1)) if m else 0


def write(workdir: Path, config: dict) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(json.dumps(config))
    return workdir


def launcher(workdir: Path, body: str) -> str:
    """An MPI launcher for --set-resources: `body` runs with $task (the kernel's task file) set."""
    path = workdir / "launcher.sh"
    path.write_text(f"#!/bin/sh\nfor task; do :; done  # the last argument: the kernel's task file\n{body}\n")
    path.chmod(0o755)
    return f"shuffle_point:mpi='{path}'"


def no_locks(workdir: Path) -> bool:
    return not list((workdir / ".snakemake" / "locks").glob("*"))


# --- paths ---


def test_a_results_dir_with_a_space_runs_every_point_and_leaves_no_stray_file(tmp_path):
    work = write(tmp_path / "work dir", {**TINY, "campaign": {**TINY["campaign"], "results_dir": "my results/run 1"}})
    before = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                            text=True).stdout
    proc = run(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(records(work, "my results/run 1")) == 3
    assert (work / "my results" / "run 1" / "report.html").exists()
    assert sorted(p.name for p in work.iterdir()) == [".snakemake", "config.yaml", "my results"]
    assert sorted(p.name for p in (work / "my results").iterdir()) == ["run 1"]
    after = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                           text=True).stdout
    assert after == before  # nothing written into the checkout


# --- Ctrl-C ---


def interrupt_after_first_point(cmd, work: Path, results: Path, env=None, cwd=None) -> str:
    proc = start(cmd, work, env=env, cwd=cwd)
    wait_for(lambda: list((results / "raw").rglob("*.jsonl")))
    time.sleep(1.0)  # inside the next point
    os.killpg(proc.pid, signal.SIGINT)
    console = finish(proc, work)
    assert proc.returncode != 0
    return console


def assert_clean_interrupt(console: str):
    ours = [line for line in console.splitlines() if line.startswith("movebench: interrupted")]
    assert len(ours) == 1, console[-4000:]
    assert re.match(r"movebench: interrupted: \d of 4 points have records and are kept; the same command runs the "
                    r"\d left; partial report at .*report\.partial\.html$", ours[0]), ours[0]
    assert "Traceback" not in console and "KeyboardInterrupt" not in console, console[-4000:]
    assert "BAD TERMINATION" not in console  # the kernel's dying words stay out of the log


def test_ctrl_c_stops_snakemake_cleanly_and_the_same_command_resumes(tmp_path):
    work = write(tmp_path / "work", SLOW)
    console = interrupt_after_first_point(snakemake_cmd(work), work, work / "results")
    assert_clean_interrupt(console)
    assert no_locks(work)  # no "Directory cannot be locked" next time
    done = records(work)
    assert 1 <= len(done) < 4
    failed = list((work / "results" / "failed").rglob("*.json"))
    assert all("interrupted (SIGINT)" in json.loads(p.read_text())["error"] for p in failed)
    assert (work / "results" / "report.partial.html").exists()
    stamps = {name: path.stat().st_mtime_ns for name, path in done.items()}
    assert planned_points(work) == 4 - len(done)
    proc = run(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(records(work)) == 4
    assert all(records(work)[name].stat().st_mtime_ns == stamp for name, stamp in stamps.items())


def test_ctrl_c_of_make_run_releases_the_lock_and_make_run_resumes(tmp_path):
    work = tmp_path / "work"
    results = tmp_path / "results"
    write(work, {**SLOW, "campaign": {**SLOW["campaign"], "results_dir": str(results)}})
    installed = f"{Path(PYTHON).parents[1]}/.installed"
    make = ["make", "-s", "-o", installed, "run", f"VENV={Path(PYTHON).parents[1]}", f"CONFIG={work / 'config.yaml'}"]
    console = interrupt_after_first_point(make, work, results, cwd=ROOT)
    assert_clean_interrupt(console)
    assert no_locks(ROOT)  # the wrapper waited for snakemake instead of killing it
    done = len(list((results / "raw").rglob("*.jsonl")))
    proc = subprocess.run(make, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).count("localrule shuffle_point:") == 4 - done
    assert len(list((results / "raw").rglob("*.jsonl"))) == 4


def test_a_point_that_finished_as_the_interrupt_came_is_not_rerun(tmp_path):
    """The interrupt lands after the 2 KiB point's kernel succeeded, before Snakemake books its end."""
    work = write(tmp_path / "work", TINY)
    race = launcher(work, f"""{MPIEXEC} "$@"; rc=$?
if [ "$rc" = 0 ] && grep -q '"message_size": 2048' "$task"; then
  kill -INT -"$(awk '{{print $5}}' /proc/$PPID/stat)"  # snakemake's whole process group, as a terminal does
fi
exit $rc""")
    proc = start(snakemake_cmd(work, "--set-resources", race), work)
    console = finish(proc, work)
    assert proc.returncode != 0 and "movebench: interrupted" in console, console[-3000:]
    point = "shuffle/pattern~uni/nodes~1/ranks~2/message_size~2048/window~2.jsonl"
    assert point in records(work)
    dry = run(work, "--dry-run")
    assert "point=pattern~uni/nodes~1/ranks~2/message_size~2048/window~2" not in dry.stdout, dry.stdout[-3000:]
    assert planned_points(work) == 3 - len(records(work))


def blob_campaign(work: Path) -> Path:
    # 40 repetitions: points of seconds, so that the interrupt half a second into one lands inside it (at 3 a point
    # could end first, and the interrupt fell between two points)
    return write(work, {"campaign": {**SLOW["campaign"], "name": "blob"},
                        "io": {"patterns": ["sfmw", "mfmw"], "backends": ["blob"], "size_per_proc": ["4MiB", "8MiB"],
                               "block_size": "1MiB", "repetitions": 40, "blob": {"emulator": "azurite"}}})


def interrupt_inside_a_point(cmd, work: Path, env=None) -> tuple[str, int]:
    """Ctrl-C once a point's kernel runs (its log has the command launch started): not in the middle of snakemake's
    start-up, where a loaded machine put it after a fixed sleep. Returns the console and Azurite's port."""
    proc = start(cmd, work, env=env)
    wait_for(lambda: "Azurite up" in (work / "console.txt").read_text(), timeout=300)
    logs = work / "results" / "logs" / "io"
    wait_for(lambda: any("movebench: " in log.read_text() for log in logs.rglob("*.log")) if logs.exists() else False,
             timeout=300, every=0.1)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    console = finish(proc, work)
    assert proc.returncode != 0
    return console, int(re.search(r"Azurite up on 127\.0\.0\.1:(\d+)", console).group(1))


@pytest.mark.azurite
def test_ctrl_c_stops_the_azurite_the_workflow_started(tmp_path, monkeypatch):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    from movebench.families import io as io_family

    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    work = blob_campaign(tmp_path / "work")
    console, port = interrupt_inside_a_point(snakemake_cmd(work), work)
    assert not azurite_service.answers(port)
    assert no_locks(work) and "Traceback" not in console, console[-4000:]
    assert len([line for line in console.splitlines() if line.startswith("movebench: interrupted")]) == 1


@pytest.mark.azurite
def test_ctrl_c_of_the_azurite_wrapper_is_one_line_and_stops_the_workflow_and_azurite(tmp_path, monkeypatch):
    """`python -m movebench.services.azurite run -- snakemake ...`: the terminal's SIGINT reaches snakemake and the
    wrapper alike; the wrapper waits for snakemake instead of sending it a second one."""
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    from movebench.families import io as io_family

    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    work = blob_campaign(tmp_path / "work")
    wrapper = [PYTHON, "-m", "movebench.services.azurite", "run", "--", *snakemake_cmd(work)]
    console, port = interrupt_inside_a_point(wrapper, work)
    assert "Traceback" not in console and "KeyboardInterrupt" not in console, console[-4000:]
    assert len([line for line in console.splitlines() if line.startswith("movebench: interrupted")]) == 1, console
    assert "movebench: Azurite stopped" in console and not azurite_service.answers(port)
    assert no_locks(work)
    failed = list((work / "results" / "failed").rglob("*.json"))
    assert failed and all("interrupted (SIGINT)" in json.loads(p.read_text())["error"] for p in failed)


def test_ctrl_c_at_any_instant_of_a_launchs_first_second_is_the_failure_record_not_a_traceback(tmp_path):
    """Started as the point rules start it (launchers.process.blocked_start), without bytecode so that runpy compiles
    launch.py each time: a SIGINT while Python starts, imports or compiles waits for launch's handlers, and every
    launch ends as an interrupted point: one line, status 1, the failure record."""
    if not process.blocked_start():
        pytest.skip("this env has no --block-signal (GNU coreutils before 8.31): launch starts unprotected here")
    sleeper = tmp_path / "sleeper.sh"
    sleeper.write_text("#!/bin/sh\nexec sleep 30\n")
    sleeper.chmod(0o755)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    instants = random.Random(41).sample(range(1000), 20)  # ms after the start: deterministic, 20 distinct
    for ms in instants:
        folder = tmp_path / f"after-{ms}ms"
        folder.mkdir()
        proc = launch_point(folder, str(sleeper), env=env, start=process.blocked_start(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(ms / 1000)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, (ms, stderr)
        assert proc.returncode == 1, (ms, proc.returncode, stderr)
        assert stderr.strip().splitlines() == [
            "movebench: shuffle pattern~uni/nodes~1/ranks~2/message_size~1024/window~2 FAILED: interrupted (SIGINT)"
        ], (ms, stderr)
        assert json.loads((folder / "failed.json").read_text())["error"] == "interrupted (SIGINT)"


def test_the_point_rules_start_launch_with_its_signals_blocked(tmp_path):
    (tmp_path / "config.yaml").write_text(json.dumps(TINY))
    proc = run(tmp_path, "-n", "--printshellcmds", "--cores", "1", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    start = " ".join([*process.blocked_start(), "python -m movebench.engine.launch --task"])
    commands = [line.split("Shell command: ")[-1].strip() for line in proc.stdout.splitlines()
                if "python -m movebench.engine.launch" in line]
    assert len(commands) == 3 and all(c.startswith(start) for c in commands), commands


# --- MPICH's shared memory after a killed rank or a timeout ---


def mpich_segments() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("mpich_*")}


@pytest.fixture
def decoy():
    """Another job's leaked segment (a name of MPICH's form): launch must never touch it."""
    path = Path("/dev/shm") / f"mpich_shm_{secrets.token_hex(4)}_0"
    path.write_bytes(b"\0" * 4096)
    yield path
    path.unlink(missing_ok=True)


def launch_point(tmp_path, launcher_cmd, timeout=60, iterations=200000, env=None, start=(), **output):
    task = families.load("shuffle").task({"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 1024, "window": 2},
                                         {"iterations": iterations, "repetition_time": 0.5}, repetitions=1, warmups=0)
    out = tmp_path / "raw" / "p.jsonl"
    argv = [PYTHON, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()), "--launcher", launcher_cmd,
            "--timeout", str(timeout), "--out", str(out), "--meta", str(tmp_path / "raw" / "p.meta.json"), "--failed",
            str(tmp_path / "failed.json")]
    output = output or {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    return subprocess.Popen([*start, *argv], text=True, env=env, **output)


@pytest.mark.mpi
def test_a_killed_rank_leaves_no_segment_of_its_job_and_other_segments_stay(tmp_path, decoy):
    proc = launch_point(tmp_path, MPIEXEC)
    ranks = []

    def mapped():
        ranks[:] = [pid for pid in process.descendants(proc.pid) if mpi_launcher.mapped_segments(pid)]
        return len(ranks) == 2

    wait_for(mapped, timeout=120, every=0.05)
    theirs = set().union(*(mpi_launcher.mapped_segments(pid) for pid in ranks))
    assert theirs and all((Path("/dev/shm") / name).exists() for name in theirs)
    time.sleep(0.5)  # mid-point: launch looks every 0.1 s until it has seen the segment (docs/notes/hardening.md)
    os.kill(ranks[-1], signal.SIGKILL)
    log = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1
    failure = json.loads((tmp_path / "failed.json").read_text())
    assert "kernel exited with status" in failure["error"]
    assert set(failure["shm_segments_removed"]) == theirs, log
    assert not theirs & mpich_segments() and decoy.exists()


@pytest.mark.mpi
def test_a_timed_out_point_leaves_no_segment(tmp_path, decoy):
    hang = tmp_path / "hang.sh"
    # Deaf to SIGINT, as a rank stuck in a C call is: launch's SIGKILL ends it before MPI_Finalize unlinks.
    hang.write_text(f"#!/bin/sh\nexec {MPIEXEC} -n 2 {PYTHON} -c 'import signal, time; from mpi4py import MPI; "
                    "signal.signal(signal.SIGINT, signal.SIG_IGN); MPI.COMM_WORLD.Barrier(); time.sleep(600)'\n")
    hang.chmod(0o755)
    proc = launch_point(tmp_path, str(hang), timeout=15)
    log = proc.communicate(timeout=120)[0]
    failure = json.loads((tmp_path / "failed.json").read_text())
    assert failure["error"] == "timed out after 15 s (campaign.timeout)", log
    assert failure["shm_segments_removed"] and not set(failure["shm_segments_removed"]) & mpich_segments()
    assert decoy.exists()


# --- a full disk ---


@pytest.fixture
def small_fs(tmp_path):
    """A 24 MiB tmpfs of our own (root only), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_when(match: str, disk: Path) -> str:
    """Launcher body: fill `disk` when the point's task matches, then launch as usual."""
    return (f"if grep -q '{match}' \"$task\"; then dd if=/dev/zero of={disk}/ballast bs=64k 2>/dev/null; fi\n"
            f"exec {MPIEXEC} \"$@\"")


def assert_whole(results: Path):
    """Nothing half-written: no temporary file, every record and meta parses."""
    assert not [p for p in results.rglob(".*") if p.is_file()], list(results.rglob(".*"))
    for path in results.rglob("*.jsonl"):
        assert [json.loads(line) for line in path.read_text().splitlines()]
    for path in results.rglob("*.json"):
        json.loads(path.read_text())


def test_a_full_results_disk_is_one_line_and_a_rerun_after_freeing_it_completes(tmp_path, small_fs):
    work = write(tmp_path / "work", {**TINY, "campaign": {**TINY["campaign"], "results_dir": str(small_fs / "r")}})
    proc = run(work, "--set-resources", launcher(work, fill_when('"message_size": 2048', small_fs)))
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in console, console[-4000:]
    full = [line for line in console.splitlines() if line.startswith("movebench: the filesystem of")]
    assert len(full) == 1 and f"{small_fs / 'r'} is full (0 KiB free)" in full[0], console[-3000:]
    counts = re.search(r"(\d) of 3 points have records and are kept; free space there and run the same command "
                       r"again to run the (\d) left", full[0])
    assert counts, full[0]
    assert "FAILED: no space left for" in console and "its filesystem has 0 bytes free" in console
    assert_whole(small_fs / "r")
    assert len(list((small_fs / "r" / "raw").rglob("*.jsonl"))) == int(counts.group(1))
    (small_fs / "ballast").unlink()
    proc = run(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).count("localrule shuffle_point:") == int(counts.group(2))
    assert (small_fs / "r" / "report.html").exists() and len(list((small_fs / "r" / "raw").rglob("*.jsonl"))) == 3
    assert_whole(small_fs / "r")


@pytest.mark.parametrize("backend, pattern", [("posix", "mfmw"), ("mpiio", "sfmw"), ("mpiio", "mfmw")])
def test_a_full_posix_target_names_the_folder_and_a_rerun_completes(tmp_path, small_fs, backend, pattern):
    """MPI-IO too: ROMIO reports the full disk as a bare "Other I/O error", every rank at once."""
    target = small_fs / "target"
    work = write(tmp_path / "work", {"campaign": TINY["campaign"], "io": {
        "patterns": [pattern], "backends": [backend], "size_per_proc": ["1MiB", "2MiB"], "ranks": [2],
        "posix": {"path": str(target)}}})
    setting = launcher(work, fill_when('"size_per_proc": 2097152', small_fs)).replace("shuffle_point", "io_point")
    proc = run(work, "--set-resources", setting)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in console, console[-4000:]
    failures = [json.loads(p.read_text()) for p in (work / "results" / "failed").rglob("*.json")]
    assert failures and all("no space left on a device: " in f["error"] and f"{target} has 0 bytes free" in f["error"]
                            for f in failures), failures
    for log in (work / "results" / "logs" / "io").rglob("size_per_proc~2097152.log"):
        said = [line for line in log.read_text().splitlines() if "movebench.io:" in line]
        # each rank's line whole, on a line of its own
        assert said and all(line.startswith("movebench.io: rank ") and line.count("movebench.io:") == 1
                            for line in said), said
    assert_whole(work / "results")
    (small_fs / "ballast").unlink()
    proc = run(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).count("localrule io_point:") == len(failures)


def fill_after_first_point(results: Path, disk: Path) -> str:
    """Launcher body: launch as usual; once launch has renamed a point's records into place, fill `disk` to its
    last page, in the background: the jobs after it start on a full disk."""
    fill = (f"(until find {results}/raw -name '*.jsonl' ! -name '.*' | grep -q .; do sleep 0.02; done; "
            f"dd if=/dev/zero of={disk}/ballast bs=64k; dd if=/dev/zero of={disk}/crumbs bs=4k) >/dev/null 2>&1 &")
    return f"{MPIEXEC} \"$@\"; rc=$?\n[ -e {disk}/filling ] || {{ touch {disk}/filling; {fill} }}\nexit $rc"


def test_a_results_disk_full_before_a_point_still_tells_the_point_on_the_console(tmp_path, small_fs):
    """The points after the first start on a full disk: each one's log is an empty file, so the one line a failed
    point leaves must reach the console by itself."""
    results = small_fs / "r"
    work = write(tmp_path / "work", {**TINY, "campaign": {**TINY["campaign"], "results_dir": str(results)}})
    proc = run(work, "--set-resources", launcher(work, fill_after_first_point(results, small_fs)))
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in console, console[-4000:]
    failed = [line for line in console.splitlines() if " FAILED: " in line]
    assert len(failed) == 2, console[-4000:]
    empty = {log for log in (results / "logs" / "shuffle").rglob("*.log") if log.stat().st_size == 0}
    assert len(empty) == 2, console[-4000:]
    for line in failed:
        assert re.match(r"movebench: shuffle pattern~uni/\S+ FAILED: no space left for .* \(No space left on device; "
                        r"its filesystem has 0 bytes free\): free space there and run the same command again; its "
                        r"log: \S+\.log$", line), line
        assert Path(line.split("its log: ")[1]) in empty
    assert len(records(work, str(results))) == 1
    assert_whole(results)


def test_aggregation_on_a_full_disk_ends_in_one_line_naming_the_tables_folder(tmp_path, small_fs):
    """The point finishes; the disk fills before its tables are written."""
    results = small_fs / "r"
    work = write(tmp_path / "work", {**TINY, "campaign": {**TINY["campaign"], "results_dir": str(results)},
                                     "shuffle": {**TINY["shuffle"], "message_sizes": ["1KiB"]}})
    proc = run(work, "--set-resources", launcher(work, fill_after_first_point(results, small_fs)))
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in console and "Errno 28" not in console, console[-4000:]
    ours = [line for line in console.splitlines() if line.startswith("movebench: no space left in")]
    assert ours == [f"movebench: no space left in {results / 'tables'} (No space left on device; its filesystem has "
                    "0 bytes free): free space there and run the same command again"], console[-4000:]
    assert len(records(work, str(results))) == 1
    assert_whole(results)
    for name in ("ballast", "crumbs"):
        (small_fs / name).unlink()
    proc = run(work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (results / "report.html").exists()


def test_a_failed_point_is_one_line_on_the_console_and_its_traceback_stays_in_its_log(tmp_path):
    work = write(tmp_path / "work", {**TINY, "shuffle": {**TINY["shuffle"], "message_sizes": ["1KiB", "2KiB"]}})
    boom = launcher(work, f"""if grep -q '"message_size": 2048' "$task"; then
  exec {PYTHON} -c 'raise RuntimeError("the kernel broke")'
fi
exec {MPIEXEC} "$@" """)
    proc = run(work, "--set-resources", boom)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in console and "the kernel broke" not in console, console[-4000:]
    log = work / "results" / "logs" / "shuffle" / "pattern~uni" / "nodes~1" / "ranks~2" / "message_size~2048" / \
        "window~2.log"
    failed = [line for line in console.splitlines() if " FAILED: " in line]
    assert failed == ["movebench: shuffle pattern~uni/nodes~1/ranks~2/message_size~2048/window~2 FAILED: kernel "
                      f"exited with status 1; its log: {log.relative_to(work)}"], console[-4000:]
    text = log.read_text()
    assert "Traceback" in text and "RuntimeError: the kernel broke" in text and failed[0] in text
    assert len(records(work)) == 1


# --- two campaigns on one machine ---


def intervals(work: Path) -> list[tuple[float, float]]:
    return [(m["launch_start"], m["launch_end"]) for m in
            (json.loads(p.read_text()) for p in (work / "results" / "raw").rglob("*.meta.json"))]


def overlapping(a, b) -> bool:
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b)


def two_campaigns(tmp_path, name, mode):
    """b starts while a runs its points (a's four points of 3-4 s each outlast b's start-up)."""
    longer = {**SLOW, "shuffle": {**SLOW["shuffle"], "repetition_time": 0.6}}
    shorter = {**SLOW, "shuffle": {**SLOW["shuffle"], "message_sizes": ["1KiB", "2KiB"]}}
    first = write(tmp_path / f"{name}-a", {**longer, "campaign": {**longer["campaign"], "name": f"{name}-a"}})
    second = write(tmp_path / f"{name}-b", {**shorter, "campaign": {**shorter["campaign"], "name": f"{name}-b"}})
    env = {**os.environ, machine.LOCK_ENV: mode}
    proc_a = start(snakemake_cmd(first), first, env=env)
    wait_for(lambda: list((first / "results" / "logs").rglob("*.log")))  # a runs: it holds the lock
    proc_b = start(snakemake_cmd(second), second, env=env)
    return first, second, finish(proc_a, first), finish(proc_b, second), proc_a, proc_b


def test_a_second_campaign_waits_for_the_first_and_their_points_never_overlap(tmp_path):
    first, second, _, console_b, proc_a, proc_b = two_campaigns(tmp_path, "wait", "wait")
    assert proc_a.returncode == 0 and proc_b.returncode == 0, console_b[-3000:]
    waiting = [line for line in console_b.splitlines() if line.startswith("movebench: waiting for")]
    assert len(waiting) == 1 and "campaign 'wait-a'" in waiting[0], console_b[-3000:]
    assert not overlapping(intervals(first), intervals(second))


def test_no_wait_refuses_while_another_campaign_runs(tmp_path):
    _, second, _, console_b, proc_a, proc_b = two_campaigns(tmp_path, "nowait", "no-wait")
    assert proc_a.returncode == 0 and proc_b.returncode != 0
    assert "movebench: campaign 'nowait-a'" in console_b and "(MOVEBENCH_LOCK=no-wait: not waiting)" in console_b
    assert "Traceback" not in console_b and not (second / "results" / "raw").exists()


def test_points_that_overlapped_are_flagged_in_meta_and_report(tmp_path):
    first, second, _, _, proc_a, proc_b = two_campaigns(tmp_path, "off", "off")
    assert proc_a.returncode == 0 and proc_b.returncode == 0
    assert overlapping(intervals(first), intervals(second))  # the lock was off: they did overlap
    for work, other in ((first, "off-b"), (second, "off-a")):
        metas = [json.loads(p.read_text()) for p in (work / "results" / "raw").rglob("*.meta.json")]
        flagged = [m for m in metas if m["overlapped_with"]]
        assert flagged and all(o["campaign"] == other and o["running"].startswith("pattern~")
                               for m in flagged for o in m["overlapped_with"])
        html = (work / "results" / "report.html").read_text()
        assert 'id="overlapped"' in html and "overlapped-points" in html


# --- a failure outside launch still ends in the partial report ---


def missing_in_report(html: str) -> list[str]:
    block = html.split("Points without a result", 1)[1].split("</ul>", 1)[0]
    return re.findall(r"<li>([^<]+)</li>", block)


def test_a_killed_launch_ends_in_a_partial_report_listing_the_point(tmp_path):
    work = write(tmp_path / "work", TINY)
    kill = launcher(work, f"""if grep -q '"message_size": 2048' "$task"; then kill -9 $PPID; exit 1; fi
exec {MPIEXEC} "$@\"""")
    proc = run(work, "--set-resources", kill)
    assert proc.returncode != 0
    html = (work / "results" / "report.partial.html").read_text()
    assert missing_in_report(html) == ["pattern~uni/nodes~1/ranks~2/message_size~2048/window~2"]
    assert not list((work / "results" / "failed").rglob("*.json"))  # launch died before writing one


def test_a_params_function_that_raises_ends_in_a_partial_report_listing_every_point(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Snakefile", "workflow", "report", "scripts", "src", "profiles", "config"):
        source = ROOT / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, repo / name, **({"ignore": shutil.ignore_patterns("__pycache__", "*.egg-info")}
                                     if source.is_dir() else {}))
    common = repo / "workflow" / "rules" / "common.smk"
    text = common.read_text()
    broken = """"task": lambda w: json.dumps(
            campaign.task_of(TASKS, family, w.point_path).to_dict()
        ),"""
    assert broken in text
    common.write_text(text.replace(broken, broken[:-1] + " if '2048' not in w.point_path else 1 / 0,"))
    work = write(tmp_path / "work", TINY)
    proc = run(work, snakefile=repo / "Snakefile", profile=repo / "profiles" / "local",
               env={**os.environ, "PYTHONPATH": str(repo / "src")})
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "ZeroDivisionError" in console
    assert "movebench: Snakemake stopped outside the points' jobs" in console
    html = (work / "results" / "report.partial.html").read_text()
    assert len(missing_in_report(html)) == 3


# --- secrets ---


def test_no_secret_reaches_results_snakemake_state_or_the_console(tmp_path):
    canary = f"CANARY{secrets.token_hex(6)}"
    env = {**os.environ,
           "MY_PERSONAL_ACCESS_TOKEN": f"ghp_{canary}1",  # a token in a variable nobody expected
           "HTTPS_PROXY": f"http://me:{canary}2@proxy.example:3128",
           "GIT_URL": f"https://user:{canary}3@git.example/repo.git",
           "AZURE_STORAGE_CONNECTION_STRING": f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={canary}4;",
           "MPICH_CANARY_URL": f"https://u:{canary}5@host.example/x",  # allowlisted names: values scrubbed
           "FI_CANARY_CONN": f"AccountKey={canary}6;SharedAccessSignature=sv=1&sig={canary}7",
           "OMP_TOKEN": f"{canary}8",
           "OMP_NUM_THREADS": "1"}
    work = write(tmp_path / "work", {**TINY, "shuffle": {**TINY["shuffle"], "message_sizes": ["1KiB", "2KiB"]}})
    # The kernel's output quotes a SAS URL and a password (as an SDK's error might): the log keeps neither.
    noisy = launcher(work, f"""echo "GET https://acct.blob.example/c?sv=2020&sig={canary}9 failed"
echo "retry with https://user:{canary}10@host.example/"
exec {MPIEXEC} "$@\"""")
    proc = run(work, "--set-resources", noisy, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hits = [str(p) for folder in (work / "results", work / ".snakemake") for p in folder.rglob("*")
            if p.is_file() and canary.encode() in p.read_bytes()]
    assert hits == []
    assert canary not in proc.stdout + proc.stderr
    meta = json.loads(next((work / "results" / "raw").rglob("*.meta.json")).read_text())
    assert meta["environment"]["OMP_NUM_THREADS"] == "1" and meta["environment"]["OMP_TOKEN"] == "***"
    assert meta["environment"]["MPICH_CANARY_URL"] == "https://***@host.example/x"
    assert "MY_PERSONAL_ACCESS_TOKEN" not in meta["environment"] and "HTTPS_PROXY" not in meta["environment"]
    log = next((work / "results" / "logs" / "shuffle").rglob("*.log")).read_text()
    assert "sig=***" in log and "https://***@host.example/" in log


def test_launch_knows_when_the_kernel_ended(tmp_path):
    """launch waits on the kernel through a pidfd (woken at its exit) or Popen.wait: running, then ended, with its
    status; the output was copied."""

    gate = tmp_path / "go"
    run = launch._Run([sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(gate)!r}): "
                       "time.sleep(0.01)\nprint('done'); raise SystemExit(3)"], dict(os.environ))
    assert run.ended_within(0.05) is False and run.proc.returncode is None
    gate.touch()
    assert run.ended_within(30) is True and run.proc.returncode == 3
    run.reader.join(timeout=5)
    assert list(run.tail) == ["done"]


def test_a_kernel_that_fails_just_before_launch_is_signalled_was_interrupted():
    """scancel signals the job's steps and its batch script with no order between them: the kernel may fail first.
    A signal to launch within SIGNAL_GRACE_S of that failure names the interrupt as the point's reason; a failure
    with no signal after it stays the kernel's."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signals = launch._Signals()
        run = launch._Run([sys.executable, "-c", "raise SystemExit(1)"], dict(os.environ))
        threading.Timer(0.3, signals._note, (signal.SIGTERM, None)).start()
        assert launch._wait(run, 30, signals, before_stop=lambda: None) == (1, "interrupted (SIGTERM)")
        quiet = launch._Signals()
        run = launch._Run([sys.executable, "-c", "raise SystemExit(1)"], dict(os.environ))
        assert launch._wait(run, 30, quiet, before_stop=lambda: None) == (1, None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
