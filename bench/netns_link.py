"""The namespace test cluster against what is known in advance: a link shaped to a rate, start/stop, name lookups.

Run (as root; it starts the test cluster unless one is up, and stops what it started):

    .venv/bin/python bench/netns_link.py [--rounds 5] [--rates 1gbit,2gbit,5gbit] [--window 64]

Per round, every shape in turn (the rates and the unshaped link; the order rotates from round to round, A B C
.. then B C .. A, so that a slow spell of this shared machine does not fall on one shape), tests/mpi/link_bw.py
between n1 and n2 (`srun --mpi=pmi2 -N 2 -n 2`, OSU's osu_bw/osu_bibw: `window` Isend of `size` bytes then a
4-byte ack; bandwidth = size x window x iterations x directions / time, 3 repetitions after a warm-up, median
taken) at 1 MiB and 4 MiB, uni and bidi. Quoted per shape and size: the median over rounds of the per-round
figure as a share of the rate per direction, with the min-max over rounds. The ceiling for TCP payload
is 1448/1514 = 95.6% of a rate tbf counts on 1500-byte Ethernet frames.

Then the cluster itself: `stop()` and `start()` of a 2-node cluster, `rounds` times, and on every node the time
of `getaddrinfo` for every test host name (median and max over rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench_testcluster import netns  # noqa: E402
from movebench_testcluster.slurm import LocalSlurmCluster, running_cluster  # noqa: E402

LINK_BW = ROOT / "tests" / "mpi" / "link_bw.py"
SIZES = (1 << 20, 1 << 22)
LOOKUP = """
import json, socket, sys, time
out = {}
for name in sys.argv[1:]:
    t0 = time.perf_counter(); socket.getaddrinfo(name, None, socket.AF_INET); out[name] = time.perf_counter() - t0
print(json.dumps(out))
"""




def stream(cluster: LocalSlurmCluster, bidi: bool, window: int) -> dict[int, float]:
    """Median bandwidth (bytes/s, both directions together for bidi) per size."""
    argv = ["srun", "--mpi=pmi2", "-N", "2", "-n", "2", sys.executable, str(LINK_BW), "--window", str(window),
            "--sizes", ",".join(map(str, SIZES)), "--reps", "3", "--seconds", "0.3", *(["--bidi"] if bidi else [])]
    r = cluster.run(*argv, timeout=600, cwd=ROOT)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('{"size"')]
    return {s: statistics.median(x["bandwidth_Bps"] for x in lines if x["size"] == s) for s in SIZES}


def link_rounds(cluster: LocalSlurmCluster, rates: list[str], rounds: int, window: int) -> None:
    shapes = [*rates, "unshaped"]
    got: dict[tuple[str, str, int], list[float]] = {}
    for rnd in range(rounds):
        order = shapes[rnd % len(shapes):] + shapes[:rnd % len(shapes)]
        for shape in order:
            cluster.set_link(None if shape == "unshaped" else f"rate={shape}")
            for mode in ("uni", "bidi"):
                for size, bw in stream(cluster, mode == "bidi", window).items():
                    got.setdefault((shape, mode, size), []).append(bw / (2 if mode == "bidi" else 1))
        print(f"round {rnd + 1}/{rounds} done", file=sys.stderr, flush=True)
    cluster.set_link(None)
    print(f"\nlink n1 <-> n2, window {window}, {rounds} rounds; per direction; median of rounds (min-max)")
    print(f"{'link':>10} {'mode':>5} {'size':>8} {'MB/s':>20} {'share of rate':>22}")
    for (shape, mode, size), bws in got.items():
        med = statistics.median(bws)
        line = f"{shape:>10} {mode:>5} {size >> 20:>6}Mi {med / 1e6:8.1f} ({min(bws) / 1e6:.0f}-{max(bws) / 1e6:.0f})"
        if shape != "unshaped":
            rate = netns.LinkShape.parse(f"rate={shape}").rate_Bps
            line += f"   {med / rate:6.1%} ({min(bws) / rate:.1%}-{max(bws) / rate:.1%})"
        print(line)


def cluster_rounds(rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="movebench-netns-bench-"))
    cluster = LocalSlurmCluster(root, nodes=2)
    ups, downs, lookups = [], [], {}
    try:
        for _ in range(rounds):
            t0 = time.monotonic()
            cluster.start()
            ups.append(time.monotonic() - t0)
            for node in cluster.nodes:
                names = [*cluster.nodes, netns.HEAD_NAME]
                times = json.loads(cluster.on_node(node, sys.executable, "-c", LOOKUP, *names).stdout)
                for name, t in times.items():
                    lookups.setdefault((node, name), []).append(t)
            downs.append(cluster.stop())
    finally:
        cluster.stop(quiet=True)
    print(f"\n2-node cluster, {rounds} rounds: up {statistics.median(ups):.2f} s ({min(ups):.2f}-{max(ups):.2f}), "
          f"down {statistics.median(downs):.2f} s ({min(downs):.2f}-{max(downs):.2f})")
    every = [t for ts in lookups.values() for t in ts]
    print(f"getaddrinfo of {len({n for _, n in lookups})} test host names from every node: median "
          f"{statistics.median(every) * 1e3:.2f} ms, max {max(every) * 1e3:.2f} ms ({len(every)} lookups)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rates", default="1gbit,2gbit,5gbit")
    p.add_argument("--window", type=int, default=64, help="OSU's window (osu_bw's default: 64)")
    p.add_argument("--no-cluster-rounds", action="store_true", help="skip the start/stop and lookup rounds")
    a = p.parse_args()
    rates = [r for r in a.rates.split(",") if r]
    for r in rates:
        netns.LinkShape.parse(f"rate={r}")  # a bad rate stops here, before any job
    existing = running_cluster()
    cluster = existing or LocalSlurmCluster(Path(tempfile.mkdtemp(prefix="movebench-netns-bench-")), nodes=2)
    if existing is None:
        cluster.start()
    before = cluster.link
    try:
        link_rounds(cluster, rates, a.rounds, a.window)
    finally:
        cluster.set_link(before)
        if existing is None:
            cluster.stop()
    if not a.no_cluster_rounds:
        if existing is not None:
            print("\n(cluster start/stop rounds skipped: a cluster was already up; `make slurm-down` first)")
        else:
            cluster_rounds(a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
