"""movebench's uni/bidi kernels beside mpi4py's own demo/osu_bw.py and demo/osu_bibw.py, and memcpy.

Run: .venv/bin/python bench/shuffle.py [--rounds 5]
Both programs run at 2 ranks with OSU's loop counts and window (64; 100 iterations up to 8 KiB,
20 above), interleaved A B A B ... in the same run; the ratio per size is the median of the
per-round ratios (design.md: single runs vary 20-50% on these machines). mpi4py's osu_bibw counts
one direction, so its figure is doubled. The demos come from mpi4py's source distribution on PyPI
(the installed version), fetched once into bench/.cache.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from movebench import families  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine.launch import run_kernel  # noqa: E402

HERE = Path(__file__).resolve().parent
MPIEXEC = str(Path(sys.executable).with_name("mpiexec"))
SIZES = [1 << k for k in range(12, 23)]  # 4 KiB .. 4 MiB


def demo_scripts() -> Path:
    version = metadata.version("mpi4py")
    cache = HERE / ".cache" / f"mpi4py-{version}"
    if not (cache / "demo" / "osu_bw.py").exists():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                            f"mpi4py=={version}", "-d", tmp], check=True)
            with tarfile.open(next(Path(tmp).glob("mpi4py-*.tar.gz"))) as tar:
                tar.extractall(HERE / ".cache", filter="data")
    return cache / "demo"


def run_demo(script: Path) -> dict[int, float]:
    """Bytes/s per size, as printed by the demo (MB/s, 1e6)."""
    out = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], capture_output=True, text=True,
                         check=True).stdout
    figures = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            figures[int(parts[0])] = float(parts[1]) * 1e6
    return figures


def run_movebench(pattern: str, size: int, tmp: Path) -> float:
    """Median bandwidth of movebench's kernel at OSU's loop count and window, 3 repetitions."""
    point = {"pattern": pattern, "nodes": 1, "ranks": 2, "message_size": size, "window": 64}
    settings = {"iterations": 100 if size <= 8192 else 20, "repetition_time": 0.5}
    proc, recs, _ = run_kernel(families.load("shuffle").task(point, settings, 3, 1), tmp / f"{pattern}-{size}", MPIEXEC)
    if proc.returncode != 0:
        raise SystemExit(f"shuffle {pattern} {size} failed:\n{proc.stderr[-2000:]}")
    return statistics.median(r["bandwidth_Bps"] for r in counted(recs))


def memcpy_bandwidth(size: int, seconds: float = 0.2) -> float:
    """numpy.copyto between two touched buffers: bytes copied per second."""
    src, dst = np.ones(size, np.uint8), np.zeros(size, np.uint8)
    np.copyto(dst, src)
    copies, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        np.copyto(dst, src)
        copies += 1
    return size * copies / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of each program")
    args = parser.parse_args()
    demos = demo_scripts()
    ratios = {(p, s): [] for p in ("uni", "bidi") for s in SIZES}
    figures = {(p, w, s): [] for p in ("uni", "bidi") for w in ("movebench", "mpi4py") for s in SIZES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for pattern, demo, factor in (("uni", "osu_bw.py", 1), ("bidi", "osu_bibw.py", 2)):
                theirs = run_demo(demos / demo)
                for size in SIZES:
                    ours = run_movebench(pattern, size, Path(tmp))
                    ref = theirs[size] * factor
                    figures[(pattern, "movebench", size)].append(ours)
                    figures[(pattern, "mpi4py", size)].append(ref)
                    ratios[(pattern, size)].append(ours / ref)
    print(f"movebench shuffle vs mpi4py demo/osu_bw.py, osu_bibw.py (x2): 2 ranks, window 64, {args.rounds} "
          "interleaved rounds; GB/s medians, ratio = median of per-round ratios")
    print(f"{'size':>9s} | {'uni':>8s} {'osu_bw':>8s} {'ratio':>6s} | {'bidi':>8s} {'osu_bibw':>8s} {'ratio':>6s}")
    low = []
    for size in SIZES:
        row = [f"{size:>9d} |"]
        for pattern in ("uni", "bidi"):
            ours = statistics.median(figures[(pattern, "movebench", size)]) / 1e9
            ref = statistics.median(figures[(pattern, "mpi4py", size)]) / 1e9
            ratio = statistics.median(ratios[(pattern, size)])
            row.append(f"{ours:8.2f} {ref:8.2f} {ratio:6.2f} |")
            if size >= 64 * 1024 and ratio < 0.95:
                low.append((pattern, size, ratio))
        print(" ".join(row).rstrip("|"))
    print("target: ratio >= 0.95 at >= 64 KiB:", "met" if not low else f"missed at {low}")
    print(f"\n{'size':>9s} {'memcpy GB/s':>12s}   (numpy.copyto, touched buffers)")
    copy = {}
    for size in SIZES:
        copy[size] = statistics.median(memcpy_bandwidth(size) for _ in range(3))
        print(f"{size:>9d} {copy[size] / 1e9:12.2f}")
    uni4 = statistics.median(figures[("uni", "movebench", SIZES[-1])])
    print(f"uni at 4 MiB / memcpy at 4 MiB = {uni4 / 1e9:.2f} / {copy[SIZES[-1]] / 1e9:.2f} = "
          f"{uni4 / copy[SIZES[-1]]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
