"""The fixed cost of one MPI point: the wall time outside its timed regions, step by step.

Run: .venv/bin/python bench/point_overhead.py [--rounds 5]

Each round runs every step below once, as its own process, in an order rotated every round; a
step's figure is the median of its rounds [min-max]. The difference between two steps is the cost
of what the second adds (e.g. `mpiexec + numpy` - `mpiexec + pass` = importing numpy in the ranks).

- python: `python -c pass`; launch imports: `python -c "import movebench.launch"`; family load:
  launch's `families.load("shuffle")` (imports the kernel module and numpy in the launch process).
- mpiexec + X: `mpiexec -n 2 python -c X` for X = pass, import numpy, from mpi4py import MPI
  (MPI_Init_thread and MPI_Finalize), the kernel's imports.
- kernel (no meta), kernel: `mpiexec -n 2 python -m movebench.shuffle` for one uni 1 KiB point with a
  fixed loop count (1 warm-up, 5 repetitions), without and with --meta; its timed seconds (the
  records' elapsed_s) are subtracted, so the figure is the fixed cost.
- launch: the same point through `python -m movebench.launch`, as a Snakemake job runs it.
- inside a rank (one `mpiexec -n 2` job that times its own steps, rank 0's clock): envinfo.capture
  (importlib.metadata for 10 packages, two git calls), mpi_meta, and shuffle's calibrate at the
  default campaign's repetition_time (0.25 s) for uni 4 KiB, window 64.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MPIEXEC = str(Path(PY).with_name("mpiexec"))
KERNEL_ARGS = ["--pattern", "uni", "--message-size", "1024", "--window", "64", "--iterations", "100"]
INSIDE = r"""
import json, time
t0 = time.perf_counter()
from mpi4py import MPI
from movebench import shuffle
from movebench.core import envinfo
from movebench.core.mpi import mpi_meta
import numpy as np
comm = MPI.COMM_WORLD
out = {}
t = time.perf_counter(); envinfo.package_versions(); out["package_versions"] = time.perf_counter() - t
t = time.perf_counter(); envinfo.git_commit(); out["git_commit"] = time.perf_counter() - t
t = time.perf_counter(); envinfo.capture(); out["envinfo.capture"] = time.perf_counter() - t
comm.Barrier()
t = time.perf_counter(); mpi_meta(comm); out["mpi_meta"] = time.perf_counter() - t
sbuf, rbuf = MPI.buffer(np.ones(4096, np.uint8)), MPI.buffer(np.ones(4096, np.uint8))
ack = MPI.buffer(np.zeros(4, np.uint8))
stream = lambda n: shuffle.stream_pairs(comm, 4096, 64, n, False, sbuf, rbuf, ack, shuffle.osu_skip(4096))
comm.Barrier()
t = time.perf_counter(); shuffle.calibrate(stream, 0.25); out["calibrate (auto, 0.25 s)"] = time.perf_counter() - t
if comm.rank == 0:
    print(json.dumps(out))
"""


def timed(cmd: list[str], cwd=None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {shlex.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, done


def kernel_step(tmp: Path, meta: bool) -> float:
    out = tmp / "k.jsonl"
    cmd = [MPIEXEC, "-n", "2", PY, "-m", "movebench.shuffle", *KERNEL_ARGS, "--repetitions", "5", "--warmups", "1",
           "--out", str(out)] + (["--meta", str(tmp / "k.meta.json")] if meta else [])
    wall, _ = timed(cmd)
    return wall - sum(json.loads(line)["elapsed_s"] for line in out.read_text().splitlines())


def launch_step(tmp: Path) -> float:
    out, meta = tmp / "l.jsonl", tmp / "l.meta.json"
    cmd = [PY, "-m", "movebench.launch", "--family", "shuffle", "--point",
           "pattern~uni/nodes~1/ranks~2/message_size~1024/window~64", "--ranks", "2", "--repetitions", "5",
           "--warmups", "1", "--kernel-args", shlex.join(KERNEL_ARGS), "--out", str(out), "--meta", str(meta),
           "--failed", str(tmp / "failed.json")]
    wall, _ = timed(cmd, cwd=tmp)
    return wall - sum(json.loads(line)["elapsed_s"] for line in out.read_text().splitlines())


def steps(tmp: Path) -> dict:
    mpi = [MPIEXEC, "-n", "2", PY, "-c"]
    return {
        "python -c pass": lambda: timed([PY, "-c", "pass"])[0],
        "python: import movebench.launch": lambda: timed([PY, "-c", "import movebench.launch"])[0],
        "python: launch + families.load(shuffle)": lambda: timed(
            [PY, "-c", "import movebench.launch; from movebench import family; family.load('shuffle')"])[0],
        "mpiexec -n 2 python -c pass": lambda: timed(mpi + ["pass"])[0],
        "mpiexec + import numpy": lambda: timed(mpi + ["import numpy"])[0],
        "mpiexec + MPI init/finalize": lambda: timed(mpi + ["from mpi4py import MPI"])[0],
        "mpiexec + kernel imports": lambda: timed(mpi + [
            "import numpy; from mpi4py import MPI; import movebench.shuffle, movebench.kernel"])[0],
        "kernel, no meta (wall - timed)": lambda: kernel_step(tmp, meta=False),
        "kernel with meta (wall - timed)": lambda: kernel_step(tmp, meta=True),
        "launch -> kernel (wall - timed)": lambda: launch_step(tmp),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="movebench-overhead-") as name:
        tmp = Path(name)
        named = steps(tmp)
        order = list(named)
        for rnd in range(args.rounds):
            for step in order[rnd % len(order):] + order[: rnd % len(order)]:
                rows.setdefault(step, []).append(named[step]())
            _, done = timed([MPIEXEC, "-n", "2", PY, "-c", INSIDE])
            for step, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
                rows.setdefault(f"inside: {step}", []).append(seconds)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"\nfixed cost of one MPI point, seconds: median of {args.rounds} rounds [min-max]")
    print("| step | seconds |")
    print("|---|---|")
    for step, values in rows.items():
        print(f"| {step} | {statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
