"""Across the namespace cluster's nodes: the shuffle kernel against a link shaped to a known rate, and intra- vs
inter-node.

Run (as root; it uses the running test cluster, or starts a 2-node one and stops it after):

    .venv/bin/python bench/multinode.py [--rounds 5] [--rates 1gbit,2gbit] [--sizes 4KiB,64KiB,1MiB,4MiB]

Every figure is the shuffle family's kernel (`movebench.families.shuffle.kernel`, OSU's osu_bw / osu_bibw:
W Isend of `size` bytes, Waitall, a 4-byte ack for uni; bandwidth = size x W x iterations x directions / the
sender's time), started as a campaign's point is, through `movebench.engine.launch.run_kernel` with the slurm profile's
launcher `srun --mpi=pmi2 -N {nodes} -n {ranks}` (each run its own allocation; Snakemake's job layer adds
nothing to the figure and a minute to every point). Per run: window 8, iterations calibrated to ~0.2 s per
repetition (`iterations: auto`), 1 warm-up then 3 repetitions, their median taken.

1. The link: at 1 MiB and 4 MiB, uni and bidi between n1 and n2 on every shaped rate and unshaped; per round
   every shape in turn, the order rotating from round to round. Quoted per direction: the median over rounds of
   the run's median as a share of the rate, min-max over rounds, and whether any repetition went above the rate.
   TCP payload over 1500-byte frames tops out at 1448/1514 = 95.6% of what tbf counts.
2. Intra- vs inter-node, unshaped: per size and pattern, 2 ranks on one node (MPICH's shared memory) and on two
   (UCX's TCP over the bridge), interleaved A B A B ...; quoted: the median over rounds of the per-round ratio
   inter / intra, with min-max, and the medians of each.

The host's load is printed with the figures: on a shared machine they say how much the CPU, not the link, set
them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families  # noqa: E402
from movebench.core.sizes import expand_sizes, format_size  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.engine import launch  # noqa: E402
from movebench_testcluster import netns  # noqa: E402
from movebench_testcluster.slurm import LocalSlurmCluster, running_cluster  # noqa: E402

LAUNCHER = "srun --mpi=pmi2 -N {nodes} -n {ranks}"  # profiles/slurm's
WINDOW = 8
LINK_SIZES = (1 << 20, 4 << 20)




def measure(cluster, folder: Path, pattern: str, size: int, nodes: int) -> tuple[float, float, dict]:
    """(median bandwidth, max bandwidth, meta) of one run of the shuffle kernel on 2 ranks over `nodes` nodes."""
    point = {"pattern": pattern, "nodes": nodes, "ranks": 2, "message_size": size, "window": WINDOW}
    task = families.load("shuffle").task(point, {"iterations": "auto", "repetition_time": 0.2}, repetitions=3,
                            warmups=1)
    proc, recs, meta = launch.run_kernel(task, folder, LAUNCHER, timeout=300, env=cluster.client_env())
    if proc.returncode != 0 or not recs:
        raise SystemExit(f"{pattern} {size} B on {nodes} nodes failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    bws = [r["bandwidth_Bps"] for r in counted(recs)]
    return statistics.median(bws), max(bws), meta


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def spread(values) -> str:
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def link_rounds(cluster, folder: Path, rates: list[str], rounds: int, loads: list[float]) -> None:
    shapes = [*rates, "unshaped"]
    got: dict[tuple, list[float]] = {}
    above: dict[tuple, bool] = {}
    for rnd in range(rounds):
        for shape in shapes[rnd % len(shapes):] + shapes[:rnd % len(shapes)]:
            cluster.set_link(None if shape == "unshaped" else f"rate={shape}")
            for pattern in ("uni", "bidi"):
                for size in LINK_SIZES:
                    directions = 2 if pattern == "bidi" else 1
                    med, top, _ = measure(cluster, folder, pattern, size, nodes=2)
                    key = (shape, pattern, size)
                    got.setdefault(key, []).append(med / directions)
                    rate = None if shape == "unshaped" else netns.LinkShape.parse(f"rate={shape}").rate_Bps
                    above[key] = above.get(key, False) or bool(rate and top / directions > rate)
        loads.append(loadavg())
        print(f"link round {rnd + 1}/{rounds} done (load average {loads[-1]:.1f})", file=sys.stderr, flush=True)
    cluster.set_link(None)
    print(f"\n1. n1 <-> n2, shuffle kernel uni/bidi, window {WINDOW}, {rounds} rounds; per direction: MB/s and share "
          "of the rate, median over rounds (min-max); 'above' = any repetition above the rate")
    print(f"{'link':>10} {'pattern':>7} {'size':>6} {'MB/s':>22} {'share of rate':>24} above")
    for (shape, pattern, size), bws in got.items():
        mbs = [b / 1e6 for b in bws]
        line = f"{shape:>10} {pattern:>7} {format_size(size):>6} {spread(mbs):>22}"
        if shape != "unshaped":
            rate = netns.LinkShape.parse(f"rate={shape}").rate_Bps
            shares = [b / rate for b in bws]
            line += (f" {statistics.median(shares):>8.1%} ({min(shares):.1%}-{max(shares):.1%})"
                     f"  {'YES' if above[(shape, pattern, size)] else 'no'}")
        print(line)


def intra_inter_rounds(cluster, folder: Path, sizes: list[int], rounds: int, loads: list[float]) -> None:
    cluster.set_link(None)
    ratios: dict[tuple, list[float]] = {}
    figures: dict[tuple, list[float]] = {}
    transports = set()
    for rnd in range(rounds):
        for pattern in ("uni", "bidi"):
            for size in sizes:
                order = (1, 2) if rnd % 2 == 0 else (2, 1)  # A B, then B A: neither always runs first
                got = {}
                for nodes in order:
                    got[nodes], _, meta = measure(cluster, folder, pattern, size, nodes)
                    figures.setdefault((pattern, size, nodes), []).append(got[nodes])
                    if nodes == 2:
                        transports.update(meta["transport"]["ucx"].get("inter-node", []))
                ratios.setdefault((pattern, size), []).append(got[2] / got[1])
        loads.append(loadavg())
        print(f"intra/inter round {rnd + 1}/{rounds} done (load average {loads[-1]:.1f})", file=sys.stderr,
              flush=True)
    print(f"\n2. 2 ranks on one node vs on two (inter-node transport: {', '.join(sorted(transports))}), unshaped, "
          f"{rounds} rounds interleaved; MB/s median over rounds (min-max), ratio inter / intra per round")
    print(f"{'pattern':>7} {'size':>6} {'1 node MB/s':>22} {'2 nodes MB/s':>22} {'2 nodes / 1 node':>24}")
    for (pattern, size), r in ratios.items():
        one = [b / 1e6 for b in figures[(pattern, size, 1)]]
        two = [b / 1e6 for b in figures[(pattern, size, 2)]]
        print(f"{pattern:>7} {format_size(size):>6} {spread(one):>22} {spread(two):>22} {spread(r):>24}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rates", default="1gbit,2gbit", help="shaped rates to compare with the unshaped link")
    p.add_argument("--sizes", default="4KiB,64KiB,1MiB,4MiB", help="message sizes of the intra/inter comparison")
    p.add_argument("--skip-link", action="store_true")
    p.add_argument("--skip-intra-inter", action="store_true")
    a = p.parse_args()
    rates = [r for r in a.rates.split(",") if r]
    for r in rates:
        netns.LinkShape.parse(f"rate={r}")  # a bad rate stops here, before any job
    sizes = expand_sizes(a.sizes.split(","))
    existing = running_cluster()
    if existing is not None and len(existing.nodes) < 2:
        raise SystemExit("the running test cluster has fewer than 2 nodes: make slurm-down, or slurm-up NODES=2")
    cluster = existing or LocalSlurmCluster(Path(tempfile.mkdtemp(prefix="movebench-multinode-bench-")), nodes=2)
    if existing is None:
        cluster.start()
    before = cluster.link
    loads = [loadavg()]
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="movebench-multinode-", dir="/tmp") as folder:
            if not a.skip_link:
                link_rounds(cluster, Path(folder), rates, a.rounds, loads)
            if not a.skip_intra_inter:
                intra_inter_rounds(cluster, Path(folder), sizes, a.rounds, loads)
    finally:
        cluster.set_link(before)
        if existing is None:
            cluster.stop()
    print(f"\n{time.monotonic() - t0:.0f} s on {os.cpu_count()} CPUs; 1-minute load average at the start and after "
          f"each round: {min(loads):.1f}-{max(loads):.1f} (median {statistics.median(loads):.1f}; this benchmark "
          "itself keeps about 2 busy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
