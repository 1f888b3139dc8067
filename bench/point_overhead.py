"""The fixed cost of one MPI point: the wall time outside its timed regions, step by step.

Run: .venv/bin/python bench/point_overhead.py [--rounds 5] [--against OTHER_CHECKOUT]

Each round runs every step below once, as its own process, in an order rotated every round; a
step's figure is the median of its rounds [min-max]. The difference between two steps is the cost
of what the second adds (e.g. `mpiexec + numpy` - `mpiexec + pass` = importing numpy in the ranks).

- python: `python -c pass`; launch: `import movebench.engine.launch` and the shuffle spec (what a point's
  launch process loads; the spec imports no numpy).
- mpiexec + X: `mpiexec -n 2 python -c X` for X = pass, import numpy, from mpi4py import MPI
  (MPI_Init_thread and MPI_Finalize; again with UCX_MEM_EVENTS=yes, the hooks a one-node point
  goes without), the kernel's imports. Every mpiexec step runs with the environment launch gives a
  one-node point (UCX_MEM_EVENTS=no unless set).
- kernel: `mpiexec -n 2 python -m movebench.families.shuffle.kernel task.json` for one uni 1 KiB
  point with a fixed loop count (1 warm-up, 5 repetitions); its timed seconds (the records'
  elapsed_s) are subtracted, so the figure is the fixed cost.
- launch: the same point through `python -m movebench.engine.launch --task`, as a Snakemake job runs it, with
  the variables a campaign hands its jobs (the commit and package versions, looked up once per campaign):
  the fixed cost of a point as a campaign pays it (Snakemake's own scheduling excluded).
- inside a rank (one `mpiexec -n 2` job that times its own steps, rank 0's clock): envinfo.capture,
  mpi_meta, and the loop count for repetition_time 0.25 s (core.timing.iterations_for_duration) for uni
  4 KiB, window 64.

With `--against DIR` (another checkout with its own .venv, e.g. main before a change), the launch
step also runs with that checkout's Python, interleaved (A B, then B A), and the table adds the
per-round ratio this / other.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench.core import envinfo  # noqa: E402

PY = sys.executable
MPIEXEC = str(Path(PY).with_name("mpiexec"))
# what a campaign's jobs inherit (movebench.campaign.job_environment): the commit and package versions, looked up
# once per campaign
CAMPAIGN_ENV = {**os.environ, "MOVEBENCH_GIT_COMMIT": envinfo.git_commit() or "",
                "MOVEBENCH_PACKAGES": json.dumps(envinfo.package_versions())}
# what the mpi runtime adds for a one-node point (movebench.engine.launchers.mpi): UCX_MEM_EVENTS=no unless set
POINT_ENV = {**CAMPAIGN_ENV, "UCX_MEM_EVENTS": os.environ.get("UCX_MEM_EVENTS", "no")}
HOOKS_ENV = {**CAMPAIGN_ENV, "UCX_MEM_EVENTS": "yes"}
POINT = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 1024, "window": 64}
SETTINGS = {"iterations": 100, "repetition_time": 0.25}
INSIDE = r"""
import json, time
from mpi4py import MPI
from movebench.core import envinfo, memory
from movebench.core.mpi import mpi_meta
from movebench.core.p2p import PairStream
from movebench.core.timing import iterations_for_duration
from movebench.families.shuffle import kernel
comm = MPI.COMM_WORLD
out = {}
t = time.perf_counter(); envinfo.capture(); out["envinfo.capture"] = time.perf_counter() - t
comm.Barrier()
t = time.perf_counter(); mpi_meta(comm); out["mpi_meta"] = time.perf_counter() - t
pairs = PairStream(comm, memory.allocate_bytes(4096), memory.allocate_bytes(4096), 4096, 64, False)
comm.Barrier()
t = time.perf_counter()
iterations_for_duration(lambda n: (pairs.run(n, kernel.osu_skip(4096)),), 0.25)
out["iterations_for_duration (auto, 0.25 s)"] = time.perf_counter() - t
pairs.free()
if comm.rank == 0:
    print(json.dumps(out))
"""


def timed(cmd: list[str], cwd=None, env=None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {shlex.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, done


def task(tmp: Path) -> Path:
    from movebench import families

    path = tmp / "task.json"
    path.write_text(json.dumps({**families.load("shuffle").task(POINT, SETTINGS, repetitions=5, warmups=1).to_dict(),
                                "out": str(tmp / "k.jsonl"), "meta": str(tmp / "k.meta.json")}))
    return path


def timed_seconds(records: Path) -> float:
    return sum(json.loads(line)["elapsed_s"] for line in records.read_text().splitlines())


def kernel_step(tmp: Path) -> float:
    wall, _ = timed([MPIEXEC, "-n", "2", PY, "-m", "movebench.families.shuffle.kernel", str(task(tmp))], env=POINT_ENV)
    return wall - timed_seconds(tmp / "k.jsonl")


def launch_step(tmp: Path, python: str = PY) -> float:
    from movebench import families

    out = tmp / "l.jsonl"
    out.unlink(missing_ok=True)
    task = families.load("shuffle").task(POINT, SETTINGS, 5, 1)
    cmd = [python, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()), "--out", str(out), "--meta",
           str(tmp / "l.meta.json"), "--failed", str(tmp / "failed.json")]
    wall, _ = timed(cmd, cwd=tmp, env=CAMPAIGN_ENV)
    return wall - timed_seconds(out)


def steps(tmp: Path, against: Path | None) -> dict:
    mpi = [MPIEXEC, "-n", "2", PY, "-c"]
    named = {
        "python -c pass": lambda: timed([PY, "-c", "pass"])[0],
        "python: launch + the shuffle spec": lambda: timed(
            [PY, "-c", "import movebench.engine.launch; from movebench import families; families.load('shuffle')"])[0],
        "mpiexec -n 2 python -c pass": lambda: timed(mpi + ["pass"], env=POINT_ENV)[0],
        "mpiexec + import numpy": lambda: timed(mpi + ["import numpy"], env=POINT_ENV)[0],
        "mpiexec + MPI init/finalize": lambda: timed(mpi + ["from mpi4py import MPI"], env=POINT_ENV)[0],
        "mpiexec + MPI init/finalize, UCX's memory hooks on": lambda: timed(
            mpi + ["from mpi4py import MPI"], env=HOOKS_ENV)[0],
        "mpiexec + kernel imports": lambda: timed(mpi + [
            "from mpi4py import MPI; import movebench.families.shuffle.kernel, movebench.core.runner"],
            env=POINT_ENV)[0],
        "kernel (wall - timed)": lambda: kernel_step(tmp),
        "launch -> kernel (wall - timed)": lambda: launch_step(tmp),
    }
    if against is not None:
        named[f"launch -> kernel, {against} (wall - timed)"] = lambda: launch_step(
            tmp, str(against / ".venv" / "bin" / "python"))
    return named


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout (with .venv) whose launch step alternates")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="movebench-overhead-") as name:
        tmp = Path(name)
        named = steps(tmp, args.against)
        order = list(named)
        for rnd in range(args.rounds):
            for step in order[rnd % len(order):] + order[: rnd % len(order)]:
                rows.setdefault(step, []).append(named[step]())
            _, done = timed([MPIEXEC, "-n", "2", PY, "-c", INSIDE], env=POINT_ENV)
            for step, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
                rows.setdefault(f"inside a rank: {step}", []).append(seconds)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"\nfixed cost of one MPI point, seconds: median of {args.rounds} rounds [min-max]")
    print("| step | seconds |")
    print("|---|---|")
    for step, values in rows.items():
        print(f"| {step} | {statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] |")
    if args.against is not None:
        ours = rows["launch -> kernel (wall - timed)"]
        theirs = rows[f"launch -> kernel, {args.against} (wall - timed)"]
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        print(f"\nlaunch -> kernel, this checkout / {args.against}: median of per-round ratios "
              f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
