"""calibration: the figures a campaign's bandwidths are read against, measured in the same campaign.

Probes (one point = one probe at one size and process count):

- memcpy: each of `ranks` processes on one node copies a `size`-byte buffer into each row of a
  destination of `copies_per_call(size)` rows (enough rows for 256 KiB; one row from 256 KiB up)
  with one numpy.copyto (the source broadcast over the rows: one memmove of `size` bytes per row,
  in numpy's C loop), both allocated and touched before any timing, `iterations` such calls per
  repetition (auto: doubled until a repetition lasts about `repetition_time`, as shuffle's
  streams). Many copies per call because one call per copy measured Python's per-call cost at
  small sizes (4 KiB: below what a window of MPI messages delivered), and a bound must be one at
  every size (docs/notes/kernels.md, section 10). bytes = ranks x size x copies_per_call x iterations:
  a copied byte counts once, as a delivered
  message's byte counts once in shuffle (STREAM's Copy counts its read and its write, 2x);
  time = the slowest rank's, from a barrier. Between processes of one node, an MPI message is
  copied at least once by a CPU (twice through MPICH's shared-memory cells, once with CMA), so
  `ranks` processes deliver at most this many bytes per second: the intra-node bound.
- fio: fio's sequential write as the io family writes (bench/io.py compares the two): `ranks`
  jobs (sfsw: one job writing ranks x size_per_proc), ioengine=psync, pieces of
  min(16 MiB, size), end_fsync=1, fresh files (create_on_open, unlink), in `fio_path`; the
  warm-ups and repetitions are job groups run one after another (stonewall) by one fio
  process (an adaptive repetitions rule: the warm-ups and `min` in one, then one fio process
  per further repetition, its start outside fio's clock). bytes = the group's io_bytes; time =
  its longest job's `job_runtime` (fio's clock, whole milliseconds: the first I/O to the end of
  the fsync). Where fio is not installed, every
  repetition is recorded with `measured: false` and the reason, so the campaign's grid stays
  the config's and the report says why io's posix points have no bound.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time

import numpy as np

from movebench.core.timing import iterations_for_duration
from movebench.families.calibration import copies_per_call

MAX_PIECE = 16 * 2**20


def copy_buffers(size: int) -> tuple[np.ndarray, np.ndarray]:
    """The probe's source (`size` bytes) and destination (`copies_per_call(size)` rows of `size`), both touched:
    page faults stay out of the timed copies (np.zeros alone leaves large buffers untouched)."""
    src = np.ones(size, dtype=np.uint8)
    dst = np.full((copies_per_call(size), size), 2, dtype=np.uint8)
    return src, dst


def copy_loop(comm, src, dst, iterations: int) -> tuple[float, int, dict]:
    """`iterations` calls on every rank, each copying src into every row of dst; the slowest rank's time, the bytes
    of all ranks."""
    from mpi4py import MPI

    comm.Barrier()
    start = MPI.Wtime()
    for _ in range(iterations):
        # src broadcast over dst's rows: numpy cannot merge them into one larger copy (src's row stride is 0),
        # so each row is a copy of src.nbytes, the size the bound is for
        np.copyto(dst, src)
    elapsed = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
    return elapsed, comm.size * dst.nbytes * iterations, {"iterations": iterations, "copies_per_call": len(dst)}


def fio_argv(pattern: str, jobs: int, size_per_proc: int, folder: str, runs: int = 1) -> list[str]:
    """fio writing as io's posix backend does for `pattern` with `jobs` ranks (see the module docstring), `runs`
    times one after another (`stonewall`: one job group per run, each with fresh files) in one fio process."""
    if pattern == "sfsw":
        jobs, size = 1, size_per_proc * jobs
    else:
        size = size_per_proc
    argv = ["fio", f"--numjobs={jobs}", f"--size={size}", f"--bs={min(size, MAX_PIECE)}", "--rw=write",
            "--ioengine=psync", "--end_fsync=1", "--fallocate=none", "--create_on_open=1", "--unlink=1",
            "--output-format=json",
            # named, so that fio skips choosing one by testing the CPU's clock when it starts (0.08 s a process
            # here); the kernel's clock, at fio's millisecond runtimes
            "--clocksource=clock_gettime"]
    if pattern == "sfmw":
        argv += [f"--filename={folder}/fio-shared", f"--offset_increment={size}"]
    else:
        argv += [f"--directory={folder}"]
    for run in range(runs):
        argv += [f"--name={pattern}-{run}"] + (["--stonewall"] if run else [])
    return argv


def fio_runs(argv: list[str], timeout: float = 600) -> list[tuple[float, int, dict]]:
    """One fio process, one result per job group (run): (the longest job's runtime in s, the jobs' bytes, extras).

    fio takes most of a second to start and stop here, hence one process for all of a point's runs.
    """
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"movebench.calibration: fio failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    groups: dict[int, list[dict]] = {}
    for job in json.loads(done.stdout[done.stdout.index("{"):])["jobs"]:
        groups.setdefault(job["groupid"], []).append(job)
    results = []
    for _, jobs in sorted(groups.items()):
        runtime_ms = max(j["job_runtime"] for j in jobs)
        # 0 ms means under fio's 1 ms resolution: counted as 1 ms, the slowest it could have been.
        results.append((max(runtime_ms, 1) / 1000, sum(j["write"]["io_bytes"] for j in jobs),
                        {"measured": True, "fio_jobs": len(jobs), "runtime_resolution_s": 0.001}))
    return results


def fio_version() -> str | None:
    if shutil.which("fio") is None:
        return None
    return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip() or None


def measure_task(comm, task, group_meta=None):
    """One probe: its buffers or fio folder are its own, released or removed on return."""
    from movebench.core.runner import run_mpi

    point, settings = task.point, task.settings
    group_meta = group_meta or {}
    if point["probe"] == "memcpy":
        if comm.size != point["ranks"]:
            raise SystemExit(f"movebench.calibration: the point has {point['ranks']} ranks but {comm.size} started")
        src, dst = copy_buffers(point["size"])
        iterations = settings["iterations"]
        if iterations == "auto":
            iterations = iterations_for_duration(lambda i: copy_loop(comm, src, dst, i), settings["repetition_time"])

        def measure(rep, warmup):
            return copy_loop(comm, src, dst, iterations)

        run_mpi(comm, task, measure, {"buffers_reused": True, **group_meta})
        return
    version = fio_version()
    folder, started = None, None
    if version is None:
        why = "fio is not installed (not on PATH): no bound for io's posix points (Debian: apt-get install fio)"

        def measure(rep, warmup):
            return None, 0, {"measured": False, "skipped": why}
    else:
        folder = tempfile.mkdtemp(prefix="movebench-fio-", dir=_existing(settings["fio_path"]))

        def fio(count):
            return fio_runs(fio_argv(point["pattern"], point["ranks"], point["size_per_proc"], folder, count))

        started = time.time()
        runs = fio(task.warmups + task.policy.min)

        def measure(rep, warmup):
            return runs.pop(0) if runs else fio(1)[0]
    try:
        run_mpi(comm, task, measure, {"fio_version": version, "fio_path": settings["fio_path"], **group_meta},
                started=started)
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    from mpi4py import MPI

    from movebench.core.runner import each_task

    for task, group_meta in each_task(argv):
        measure_task(MPI.COMM_WORLD, task, group_meta)


def _existing(path: str) -> str:
    from pathlib import Path

    Path(path).expanduser().mkdir(parents=True, exist_ok=True)
    return str(Path(path).expanduser())


if __name__ == "__main__":
    main()
