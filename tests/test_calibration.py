"""The calibration probes run for real: memcpy under mpiexec, fio where it is installed and where it is not."""

import os
import shutil
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import PYTHON, make_task, run_kernel
from movebench.core.sizes import expand_sizes
from movebench.engine import config, plan
from movebench.families.calibration import kernel
from movebench.families.calibration import report as calibration_report

MiB = 2**20
DEFAULT_MEMCPY_SIZES = expand_sizes(config.validate({"campaign": {"name": "x"}, "calibration": {}})["calibration"]
                                    ["memcpy_sizes"])


def test_fio_writes_as_the_io_family_does():
    mfmw = kernel.fio_argv("mfmw", 2, 4 * MiB, "/scratch/x", runs=3)
    assert "--numjobs=2" in mfmw and f"--size={4 * MiB}" in mfmw and "--directory=/scratch/x" in mfmw
    assert {"--end_fsync=1", "--ioengine=psync", "--rw=write", "--unlink=1", "--create_on_open=1"} <= set(mfmw)
    assert [a for a in mfmw if a.startswith("--name=")] == ["--name=mfmw-0", "--name=mfmw-1", "--name=mfmw-2"]
    assert mfmw.count("--stonewall") == 2  # each run after the first waits for the one before
    sfmw = kernel.fio_argv("sfmw", 2, 4 * MiB, "/scratch/x")
    assert "--filename=/scratch/x/fio-shared" in sfmw and f"--offset_increment={4 * MiB}" in sfmw
    sfsw = kernel.fio_argv("sfsw", 2, 4 * MiB, "/scratch/x")
    assert "--numjobs=1" in sfsw and f"--size={8 * MiB}" in sfsw  # one writer, the whole output
    big = kernel.fio_argv("mfmw", 2, 64 * MiB, "/x")
    assert f"--bs={16 * MiB}" in big  # io's default posix.transfer_size


def test_the_grid_is_the_configs_with_or_without_fio(monkeypatch):
    section = {"calibration": {"probes": ["memcpy", "fio"], "memcpy_sizes": ["4KiB"], "fio_sizes": ["1MiB"],
                               "fio_patterns": ["sfmw"]}}
    with_fio = plan.grid(config.validate({"campaign": {"name": "x"}, **section}))
    monkeypatch.setenv("PATH", "/nonexistent")
    without = plan.grid(config.validate({"campaign": {"name": "x"}, **section}))
    assert with_fio == without and [p["probe"] for p in with_fio["calibration"]] == ["memcpy", "fio"]


@pytest.mark.mpi
def test_memcpy_counts_every_ranks_copies(tmp_path):
    point = {"probe": "memcpy", "ranks": 2, "size": 64 * 1024}
    task = make_task("calibration", point, {"iterations": 50, "repetition_time": 0.01}, repetitions=6, warmups=1)
    assert task.ranks == 2
    _, recs, meta = run_kernel(task, tmp_path)
    assert [r["warmup"] for r in recs] == [True] + [False] * 6
    for r in recs:
        # 64 KiB: 4 copies per call (256 KiB of rows)
        assert r["copies_per_call"] == 4 and r["iterations"] == 50
        assert r["bytes"] == 2 * 64 * 1024 * 4 * 50 and r["elapsed_s"] > 0
        assert r["bandwidth_Bps"] == pytest.approx(r["bytes"] / r["elapsed_s"])
        assert {k: r[k] for k in point} == point
    assert meta["ranks"] == 2 and meta["buffers_reused"] is True


@pytest.mark.mpi
def test_memcpy_chooses_its_iteration_count(tmp_path):
    task = make_task("calibration", {"probe": "memcpy", "ranks": 1, "size": 4096},
                     {"iterations": "auto", "repetition_time": 0.02}, repetitions=2, warmups=0)
    _, recs, _ = run_kernel(task, tmp_path)
    assert len({r["iterations"] for r in recs}) == 1 and recs[0]["iterations"] > 1


def test_memcpy_copies_each_row_at_the_points_size():
    src, dst = kernel.copy_buffers(4096)
    assert dst.shape == (64, 4096) and kernel.copies_per_call(32 * MiB) == 1
    src[:] = np.arange(4096) % 251  # every row must hold the source, not a piece of a larger copy
    _, nbytes, extras = kernel.copy_loop(_OneRank(), src, dst, 3)
    assert (dst == src).all() and nbytes == 64 * 4096 * 3 and extras["copies_per_call"] == 64


class _OneRank:
    size = 1

    def Barrier(self):
        pass

    def allreduce(self, value, op=None):
        return value


def _median_bandwidth(task, folder):
    _, recs, _ = run_kernel(task, folder)
    return statistics.median(r["bandwidth_Bps"] for r in recs if not r["warmup"])


@pytest.mark.mpi
@pytest.mark.parametrize("size", DEFAULT_MEMCPY_SIZES)
def test_memcpy_bounds_a_window_of_messages_at_every_probed_size(tmp_path, size):
    """The bound is one: two processes' copies reach at least what two ranks' uni and bidi streams (window 64, the
    default campaign's largest) deliver at the same size, both measured in this run: a property of a bound, so no
    margin."""
    settings = {"iterations": "auto", "repetition_time": 0.02}
    bound = _median_bandwidth(make_task("calibration", {"probe": "memcpy", "ranks": 2, "size": size}, settings),
                              tmp_path / "memcpy")
    for pattern in ("uni", "bidi"):
        point = {"pattern": pattern, "nodes": 1, "ranks": 2, "message_size": size, "window": 64}
        stream = _median_bandwidth(make_task("shuffle", point, settings), tmp_path / pattern)
        assert bound > stream, f"{pattern} at {size} B: {stream / 1e9:.2f} GB/s above the bound {bound / 1e9:.2f}"


@pytest.fixture
def fio():
    if shutil.which("fio") is None:
        pytest.fail("fio is not installed: `make test` installs Debian's fio (or: apt-get install fio)")


@pytest.mark.mpi
@pytest.mark.parametrize("pattern, jobs", [("mfmw", 2), ("sfmw", 2), ("sfsw", 1)])
def test_fio_records_each_run_and_leaves_nothing_behind(fio, tmp_path, pattern, jobs):
    target = tmp_path / "target"
    point = {"probe": "fio", "pattern": pattern, "ranks": 2, "size_per_proc": MiB}
    task = make_task("calibration", point, {"fio_path": str(target)}, repetitions=3, warmups=1)
    assert (task.ranks, task.nodes) == (1, 1)  # fio starts its own jobs
    _, recs, meta = run_kernel(task, tmp_path / "out")
    assert [r["warmup"] for r in recs] == [True, False, False, False]
    for r in recs:
        assert r["measured"] is True and r["ok"] is True and r["fio_jobs"] == jobs
        assert r["bytes"] == 2 * MiB and r["elapsed_s"] >= 0.001
        assert r["bandwidth_Bps"] == pytest.approx(r["bytes"] / r["elapsed_s"])
    assert meta["fio_version"].startswith("fio-") and meta["fio_path"] == str(target)
    assert list(target.iterdir()) == []  # fio's files unlinked, its folder removed


@pytest.mark.mpi
def test_without_fio_the_point_records_that_it_could_not_run(tmp_path):
    """PATH holds only this venv's bin (python, mpiexec): no fio. The point still succeeds, saying why it is empty."""
    bin_dir = Path(PYTHON).parent
    assert not (bin_dir / "fio").exists()
    env = dict(os.environ, PATH=str(bin_dir))
    point = {"probe": "fio", "pattern": "sfmw", "ranks": 2, "size_per_proc": MiB}
    task = make_task("calibration", point, {"fio_path": str(tmp_path / "target")}, repetitions=2, warmups=1)
    proc, recs, meta = run_kernel(task, tmp_path / "out", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(recs) == 3 and all(r["ok"] and r["measured"] is False for r in recs)
    assert all(r["bandwidth_Bps"] is None and "fio is not installed" in r["skipped"] for r in recs)
    assert meta["fio_version"] is None
    table = pd.DataFrame([{**r, "point": "probe~fio/pattern~sfmw/ranks~2/size_per_proc~1048576"} for r in recs])
    lines = calibration_report.REPORT.headlines(table, pd.DataFrame())
    assert lines == [("probe~fio/pattern~sfmw/ranks~2/size_per_proc~1048576 not measured: " + recs[0]["skipped"],
                      "warn")]
