"""Shared fixtures: the repository, the MPI launcher, running kernels and campaigns for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MPIEXEC = str(Path(PYTHON).with_name("mpiexec")) if Path(PYTHON).with_name("mpiexec").exists() else "mpiexec"


def make_task(family: str, point: dict, settings: dict, repetitions=3, warmups=1):
    """The family's task for a point given by hand (movebench.spec.Family.task), with the tests' default counts."""
    from movebench import families

    return families.load(family).task(point, settings, repetitions, warmups)


def run_kernel(task, folder: Path, timeout=120, check=True, env=None, launcher=None):
    """The task's kernel under the command movebench.engine.launch builds; returns (process, records, meta)."""
    from movebench.engine import launch

    proc, recs, meta = launch.run_kernel(task, folder, launcher or MPIEXEC, timeout, env or os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"{task.family} {task.point} failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return proc, recs, meta


def mpirun(ranks: int, *argv, timeout=120, check=True, env=None) -> subprocess.CompletedProcess:
    """`mpiexec -n ranks python argv...`, output captured."""
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), PYTHON, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy(), cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"mpiexec -n {ranks} {argv} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def snakemake(workdir: Path, *args, profile="local", timeout=600, check=True) -> subprocess.CompletedProcess:
    """The project's Snakefile run in `workdir` with a profile of the project's, as a user would."""
    cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--profile", str(ROOT / "profiles" / profile), "--configfile", str(workdir / "config.yaml"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def results_snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under `folder` by its relative path: (size, mtime in ns) of a file, () of a folder."""
    found = {}
    for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
        try:
            st = path.lstat()
        except FileNotFoundError:  # removed while we walked: it is not there
            continue
        found[path.relative_to(folder).as_posix()] = () if path.is_dir() and not path.is_symlink() else (
            st.st_size, st.st_mtime_ns)
    return found


def results_changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What differs between two results_snapshot()s, one line per entry: added, removed or changed."""
    lines = [f"added {name}" for name in sorted(after.keys() - before.keys())]
    lines += [f"removed {name}" for name in sorted(before.keys() - after.keys())]
    lines += [f"changed {name} (size, mtime {before[name]} -> {after[name]})"
              for name in sorted(before.keys() & after.keys()) if before[name] != after[name]]
    return lines


CHECKOUT_RESULTS = ROOT / "results"


def pytest_sessionstart(session):
    # The checkout's results/ is the user's own campaign (`make run`): tests write in their temporary folders only.
    session.config.stash[_RESULTS_BEFORE] = results_snapshot(CHECKOUT_RESULTS)


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_RESULTS_BEFORE, None)
    if before is None:
        return
    changes = results_changes(before, results_snapshot(CHECKOUT_RESULTS))
    if changes:
        shown = "\n  ".join(changes[:20]) + (f"\n  ... and {len(changes) - 20} more" if len(changes) > 20 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"the tests changed the checkout's {CHECKOUT_RESULTS} (a test wrote outside its temporary "
                   f"folders, or a campaign ran there meanwhile):\n  {shown}")
        if reporter is not None:
            reporter.write_line("")
            reporter.section("checkout's results/ changed", sep="=", red=True, bold=True)
            reporter.write_line(message)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_RESULTS_BEFORE = pytest.StashKey[dict]()


def copied_workflow(dest: Path, work: Path):
    """A copy of the workflow and the package in `dest` (its files are the test's to edit, its jobs import it)
    and run(*args): snakemake on `work`'s config.yaml from that copy; asserts it succeeded, returns the process."""
    dest.mkdir()
    for name in ("Snakefile", "workflow", "report", "scripts", "src", "profiles", "config"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, dest / name)
    env = dict(os.environ, PYTHONPATH=str(dest / "src"))

    def run(*args):
        cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(dest / "Snakefile"), "--directory", str(work),
               "--profile", str(dest / "profiles" / "local"), "--configfile", str(work / "config.yaml"), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc

    return run


@pytest.fixture(autouse=True, scope="session")
def _own_machine_lock(tmp_path_factory):
    """The suite's campaigns take their own benchmark lock and registry, not the machine's.

    Their launches are never judged disturbed (campaign.DISTURBED_OVERRIDE_ENV, launch.DISTURBED_ENV).
    Campaigns of this session still run one at a time (tests/test_hardening.py tests the lock
    itself); another engineer's suite or benchmark on the machine neither waits for them nor is
    flagged by them.
    """
    from movebench import campaign
    from movebench.engine import machine

    folder = tmp_path_factory.mktemp("machine")
    from movebench.engine import launch

    names = (machine.LOCK_FILE_ENV, machine.POINTS_DIR_ENV, campaign.DISTURBED_OVERRIDE_ENV, launch.DISTURBED_ENV)
    saved = {name: os.environ.get(name) for name in names}
    os.environ[machine.LOCK_FILE_ENV] = str(folder / "benchmark.lock")
    os.environ[machine.POINTS_DIR_ENV] = str(folder / "points")
    # The suite's tiny campaigns share the host with the suite itself (and a developer's other work): their
    # launches would be disturbed, retried and left out at random. tests/test_disturbed.py turns it back on.
    os.environ[campaign.DISTURBED_OVERRIDE_ENV] = "1000"
    os.environ[launch.DISTURBED_ENV] = json.dumps({"other_cpus": 1000})  # launches the tests start themselves
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def campaign(tmp_path):
    """Write a config into a fresh folder; returns (folder, write(config))."""

    def write(config: dict) -> Path:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return tmp_path

    return write


def _running_slurm_cluster():
    """A test cluster started earlier (e.g. `make slurm-up`) that owns /etc/slurm/slurm.conf."""
    from movebench_testcluster.slurm import MARKER, SYSTEM_CONF, LocalSlurmCluster

    try:
        first = SYSTEM_CONF.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith(MARKER):
        return None
    cluster = LocalSlurmCluster(first[len(MARKER) :].strip(), install=False)
    return cluster if cluster.is_running() else None


@pytest.fixture(scope="session")
def slurm_cluster():
    """The local Slurm test cluster for the whole session: reused when already up, else started here with 2 nodes.

    Its nodes n1, n2 are hosts of their own (network namespaces on 198.18.0.0/24, see docs/notes/slurm-test-cluster.md).
    Tests that need more: `with slurm_cluster.resized(4):`, shaped links: `with slurm_cluster.shaped("rate=1gbit"):`.
    """
    from movebench_testcluster.slurm import LocalSlurmCluster, missing_binaries

    if os.geteuid() != 0 and missing_binaries():
        pytest.skip("Slurm is not installed and installing it (apt-get) needs root")
    existing = _running_slurm_cluster()
    if existing is not None:
        # the tests are written for 2 nodes and unshaped links: a `make slurm-up NODES=4 LINK=...` cluster is
        # made so for the session and put back as it was after
        if len(existing.nodes) == 2:
            with existing.shaped(None):
                yield existing
        else:
            with existing.resized(2), existing.shaped(None):
                yield existing
        return
    root = Path(tempfile.mkdtemp(prefix="movebench-slurm-test-"))
    cluster = LocalSlurmCluster(root)
    cluster.start()
    print(f"\nslurm cluster started in {cluster.startup_seconds:.2f}s")
    try:
        yield cluster
    finally:
        print(f"\nslurm cluster stopped in {cluster.stop():.2f}s")
        shutil.rmtree(root, ignore_errors=True)


def slurm_client_env(cluster) -> dict:
    """Environment for Slurm clients: this venv's python/mpiexec/snakemake first on PATH, no inherited SLURM_*."""
    return cluster.client_env(PYTHON)


@pytest.fixture
def job_env(slurm_cluster):
    return slurm_client_env(slurm_cluster)
