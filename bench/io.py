"""movebench's POSIX output kernel beside fio, writing the same bytes, interleaved in one run.

    python bench/io.py [--sizes 1MiB 2MiB ... 256MiB] [--rounds 5] [--reps 3] [--path DIR] [--blob]

For each pattern (mfmw: a file per rank; sfmw: one file, each rank at its own
offset) and size per process, `rounds` rounds alternate the two programs
(ABBA: movebench first in even rounds, fio first in odd ones). In a round,
movebench runs once under `mpiexec -n 2` with one warm-up and `reps` measured
repetitions, and fio runs `reps` times; each program's median bandwidth of the
round gives one ratio movebench / fio. The table shows the median over rounds
of each bandwidth and of the ratios (the design's rule: interleave, then take
the median of pairwise ratios).

Both write fresh files with pwrite in pieces of min(16 MiB, size) and fsync
before the time stops:
- movebench: the io kernel, backend posix (IOR's definition:
  bytes / (latest end - earliest start), open, pwrite, fsync and close inside);
  verification is off here (it is untimed either way, and was tested apart).
- fio: numjobs=2 processes, ioengine=psync, rw=write, end_fsync=1,
  fallocate=none, create_on_open=1, unlink=1; sfmw adds filename= and
  offset_increment=size. Its time is the longest job's `job_runtime` (fio's
  own clock, from the job's first I/O to the end of end_fsync, in whole
  milliseconds, truncated): below ~10 ms per point the ms resolution and the
  truncation flatter fio, so the ratio there is a lower bound.

`--blob` adds movebench's blob backend on Azurite (started and stopped here)
at a few sizes: an emulator's figures measure this machine's Node.js process,
not Azure Blob Storage.

fio comes from Debian (`apt-get install -y fio`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from movebench import families  # noqa: E402
from movebench.core.sizes import format_size, parse_size  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine.launch import run_kernel  # noqa: E402

MPIEXEC = str(Path(sys.executable).with_name("mpiexec"))
RANKS = 2
MAX_PIECE = 16 * 2**20


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT / "src"), e.get("PYTHONPATH")) if x)
    return e


def movebench(pattern: str, size: int, reps: int, path: Path, backend="posix", extra=None) -> list[float]:
    """Bandwidths (B/s) of the measured repetitions of one kernel run (verification off, fsync on, as fio)."""
    point = {"pattern": pattern, "backend": backend, "nodes": 1, "ranks": RANKS, "size_per_proc": size}
    settings = {"fsync": True, "verify": False, "cleanup": True, "name_prefix": f"mbbench-{pattern}-{backend}",
                **(extra or {})}
    if backend == "posix":
        settings.update(path=str(path), transfer_size=min(size, MAX_PIECE))
    with tempfile.TemporaryDirectory() as tmp:
        done, recs, _ = run_kernel(families.load("io").task(point, settings, reps, 1), tmp, MPIEXEC, 900, env())
    if done.returncode != 0:
        sys.exit(f"movebench failed:\n{done.stderr[-3000:]}")
    return [r["bandwidth_Bps"] for r in counted(recs)]


def fio(pattern: str, size: int, path: Path) -> float:
    """Bandwidth (B/s) of one fio run: all jobs' bytes / the longest job's runtime."""
    piece = min(size, MAX_PIECE)
    argv = [
        "fio",
        f"--name={pattern}",
        f"--numjobs={RANKS}",
        f"--size={size}",
        f"--bs={piece}",
        "--rw=write",
        "--ioengine=psync",
        "--end_fsync=1",
        "--fallocate=none",
        "--create_on_open=1",
        "--unlink=1",
        "--output-format=json",
    ]
    if pattern == "sfmw":
        argv += [f"--filename={path / 'fio-shared'}", f"--offset_increment={size}"]
    else:
        argv += [f"--directory={path}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"fio failed:\n{done.stderr[-3000:]}")
    jobs = json.loads(done.stdout[done.stdout.index("{") :])["jobs"]
    runtime_s = max(j["job_runtime"] for j in jobs) / 1000
    return sum(j["write"]["io_bytes"] for j in jobs) / max(runtime_s, 1e-3)


def compare(sizes, rounds, reps, path) -> list[dict]:
    rows = []
    for pattern in ("mfmw", "sfmw"):
        for size in sizes:
            ours, theirs, ratios = [], [], []
            for r in range(rounds):
                order = ("mb", "fio") if r % 2 == 0 else ("fio", "mb")
                got = {}
                for who in order:
                    if who == "mb":
                        got["mb"] = statistics.median(movebench(pattern, size, reps, path))
                    else:
                        got["fio"] = statistics.median(fio(pattern, size, path) for _ in range(reps))
                ours.append(got["mb"])
                theirs.append(got["fio"])
                ratios.append(got["mb"] / got["fio"])
            rows.append(
                {
                    "pattern": pattern,
                    "size_per_proc": size,
                    "movebench_MiBps": statistics.median(ours) / 2**20,
                    "fio_MiBps": statistics.median(theirs) / 2**20,
                    "ratio": statistics.median(ratios),
                    "ratio_min": min(ratios),
                    "ratio_max": max(ratios),
                    "rounds": rounds,
                }
            )
            row = rows[-1]
            print(
                f"{pattern}  {format_size(size):>7s}  movebench {row['movebench_MiBps']:8.1f} MiB/s  "
                f"fio {row['fio_MiBps']:8.1f} MiB/s  ratio {row['ratio']:.2f} "
                f"[{row['ratio_min']:.2f}, {row['ratio_max']:.2f}]",
                flush=True,
            )
    return rows


def blob(sizes, reps) -> list[dict]:
    from movebench.services import azurite

    rows = []
    with azurite.Azurite() as service:
        extra = {"connection_string_env": azurite.ENV_VAR, "block_size": 4 * 2**20, "max_concurrency": 1,
                 "retry": {"total": 3, "initial_backoff_s": 1, "increment_base_s": 2, "jitter_s": 0.5},
                 "request_timeout_s": 60}
        os.environ[azurite.ENV_VAR] = service.connection_string
        try:
            for pattern in ("sfsw", "sfmw", "mfmw"):
                for size in sizes:
                    bws = movebench(pattern, size, reps, Path("."), backend="blob", extra=extra)
                    rows.append(
                        {"pattern": pattern, "size_per_proc": size, "azurite_MiBps": statistics.median(bws) / 2**20}
                    )
                    print(
                        f"blob on Azurite  {pattern}  {format_size(size):>7s}  "
                        f"{rows[-1]['azurite_MiBps']:8.1f} MiB/s (median of {len(bws)})",
                        flush=True,
                    )
        finally:
            os.environ.pop(azurite.ENV_VAR, None)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=[f"{2**i}MiB" for i in range(9)], help="sizes per process")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per point")
    parser.add_argument("--reps", type=int, default=3, help="measurements per program per round")
    parser.add_argument("--path", default=None, help="target folder (default: a new folder in the system temp)")
    parser.add_argument("--blob", action="store_true", help="also movebench's blob backend on Azurite")
    parser.add_argument("--blob-sizes", nargs="+", default=["1MiB", "16MiB", "64MiB"])
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "io.json"), help="the table as JSON")
    args = parser.parse_args(argv)
    if shutil.which("fio") is None:
        sys.exit("fio is not installed: apt-get install -y fio")
    path = Path(args.path or tempfile.mkdtemp(prefix="movebench-bench-io-"))
    path.mkdir(parents=True, exist_ok=True)
    print(f"target {path} ({RANKS} ranks / fio jobs, fsync before the time stops)", flush=True)
    result = {
        "rows": compare([parse_size(s) for s in args.sizes], args.rounds, args.reps, path),
        "fio_version": subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
    }
    if args.blob:
        result["blob_on_azurite"] = blob([parse_size(s) for s in args.blob_sizes], args.reps)
    if not args.path:
        shutil.rmtree(path, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
