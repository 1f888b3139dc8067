"""Communication stacks side by side: each stack's shuffle figure against mpich-ucx's, within one node and across
two namespace nodes, with the C reference (bench/osu_ref) built against the same stack beside it.

Run (as root: the 2-node part uses the running test cluster, or starts a 2-node one and stops it after):

    .venv/bin/python bench/stacks.py [--rounds 5] [--launches 1] [--stacks mpich-ucx,mpich-ofi,openmpi,impi]
        [--nodes 1,2]

What is compared. uni (osu_bw) and bidi (osu_bibw) at 4 KiB, 64 KiB, 1 MiB and 4 MiB, 2 ranks, window 16 and
OSU's loop counts (100 timed after 10 skipped up to 8 KiB, 20 after 2 above; OSU's window is 64: 16 keeps a
4 MiB repetition across the TCP link under a second, and both sides use it), thread level `multiple`, 4 KiB
pages. The Python side is the shuffle family's kernel started as a campaign's point is
(`movebench.launch.run_kernel`: the stack's Python, launcher, variables and transport probe), 1 warm-up and
`--repeats` counted repetitions; the C side is osu_ref built with the stack's own `mpicc` (Intel MPI's runtime
wheel has none: osu_ref is compiled against MPICH's mpi.h and linked to Intel MPI's libmpi.so.12, the MPICH ABI
both libraries keep), `--repeats` measurements, under the same launcher and environment. Within one node the
launcher is the stack's mpiexec; across two it is the slurm profile's `srun -N 2 -n 2` with the stack's PMI
plugin (`movebench.stacks.srun_for`).

One round: for each node count, every stack in an order that rotates from round to round, C and Python in an order
that alternates; with `--launches K`, each side K times, C and Python in turn, and the side's figure in the round
is the median of its K launches'. Printed, per node count: each stack's Python figure / mpich-ucx's Python figure
and the same for C (the median of per-round ratios, min-max), movebench / C for every stack (the target: within 10%
at 64 KiB and above), the medians in GB/s, and the transport both sides' output reported (core/transport.py) with
any fall-back from the stack's named one. This machine varies 20-50% from run to run: only ratios within a round
are taken.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families, launch, launchers, stacks  # noqa: E402
from movebench.core.sizes import expand_sizes, format_size  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.core.transport import TransportLog, check  # noqa: E402
from movebench.launchers import mpi  # noqa: E402

OSU_REF_C = ROOT / "bench" / "osu_ref" / "osu_ref.c"
BUILD = ROOT / "build" / "bench" / "stacks"
WINDOW = 16
REFERENCE = "mpich-ucx"
SRUN = "srun -N {nodes} -n {ranks}"  # profiles/slurm's launcher; srun_for adds the stack's --mpi=
C_TEST = {"uni": "bw", "bidi": "bibw"}


def osu_counts(size: int) -> tuple[int, int]:
    """(timed iterations, skipped iterations) of osu_bw and osu_bibw."""
    return (20, 2) if size > 8192 else (100, 10)


def build_c(stack: dict) -> Path:
    """osu_ref built against the stack's MPI library (once per wheel)."""
    folder = Path(stacks.python_of(stack)).parents[1]
    out = BUILD / folder.name / "osu_ref"
    if out.exists() and out.stat().st_mtime >= OSU_REF_C.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if stacks.library_of(stack) == "impi":
        header = Path(sys.prefix) / "include"  # the campaign's MPICH: the header of the ABI Intel MPI keeps
        cmd = ["cc", "-O2", "-Wall", f"-I{header}", "-o", str(out), str(OSU_REF_C), f"-L{folder / 'lib'}",
               f"-Wl,-rpath,{folder / 'lib'}", "-lmpi"]
    else:
        cmd = [str(folder / "bin" / "mpicc"), "-O2", "-Wall", "-o", str(out), str(OSU_REF_C)]
    subprocess.run(cmd, check=True)
    return out


def task_of(stack: dict, pattern: str, size: int, nodes: int, repeats: int):
    iterations, skip = osu_counts(size)
    point = {"pattern": pattern, "nodes": nodes, "ranks": 2, "message_size": size, "window": WINDOW,
             "mpi_thread_level": "multiple", "memory_mode": "4k"}
    task = families.load("shuffle").task(point, {"iterations": iterations, "skip": skip, "repetition_time": 0.25},
                                         repetitions=repeats, warmups=1)
    task.stack = stack
    return task


def run_python(stack, pattern, size, nodes, repeats, launcher, env, folder) -> tuple[float, dict]:
    """(median bandwidth B/s over the counted repetitions, the meta's transport and its check)."""
    task = task_of(stack, pattern, size, nodes, repeats)
    proc, recs, meta = launch.run_kernel(task, folder, launcher, timeout=300, env=env)
    if proc.returncode != 0 or not recs or not all(r["ok"] for r in recs):
        raise SystemExit(f"{stack['name']} {pattern} {size} B on {nodes} node(s) failed ({proc.returncode}):\n"
                         f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
    return statistics.median(r["bandwidth_Bps"] for r in counted(recs)), {
        "transport": meta["transport"], "fell_back": meta["transport_check"]["fell_back"],
        "library": meta.get("mpi_library_version") or meta.get("mpi", {}).get("library_version")}


def run_c(stack, pattern, sizes, nodes, repeats, launcher, env) -> tuple[dict[int, float], dict]:
    """(size -> median bandwidth B/s of osu_ref's `repeats` measurements, the transport its output reported)."""
    task = task_of(stack, pattern, sizes[0], nodes, repeats)
    runtime = launchers.runtime(task)
    argv = mpi.command(task, [stacks.python_of(stack)], launcher)[:-1]
    argv += [str(build_c(stack)), C_TEST[pattern], "-m", ",".join(map(str, sizes)), "-w", str(WINDOW),
             "-r", str(repeats), "-t", "multiple", "-p", "4k"]
    env = runtime.environment(task, env)
    if stacks.library_of(stack) == "impi":
        # what mpi4py does for the Python ranks when it loads Intel MPI (mpi4py/_mpiabi.py): the wheel's libfabric
        # and its providers lie beside its libmpi, which dlopens them; under srun no Hydra says where
        lib = str(Path(stacks.python_of(stack)).parents[1] / "lib")
        env.setdefault("FI_PROVIDER_PATH", lib)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [lib, env.get("LD_LIBRARY_PATH")]))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"C {stack['name']} {pattern} on {nodes} node(s) failed ({proc.returncode}): {argv}\n"
                         f"{proc.stderr[-2500:]}")
    figures: dict[int, list[float]] = {}
    log = TransportLog()
    for line in (proc.stdout + proc.stderr).splitlines():
        log.feed(line)
        parts = line.split()
        if parts and parts[0] == C_TEST[pattern]:
            figures.setdefault(int(parts[1]), []).append(float(parts[2]) * 1e6)
    summary = log.summary()
    return ({s: statistics.median(v) for s, v in figures.items()},
            {"transport": summary, "fell_back": check(stacks.named_env(stack, task.point), summary)["fell_back"]})


def transport_text(summary: dict) -> str:
    """What carried the ranks, in a few words: Open MPI's PML, MPICH's netmod with UCX's lanes or OFI's
    provider."""
    parts = []
    if summary.get("ompi_pml"):
        parts.append("pml " + ",".join(summary["ompi_pml"]))
    if summary.get("netmod"):
        parts.append(f"{summary['netmod']} netmod")
    for kind, found in (summary.get("ucx") or {}).items():
        parts.append(f"ucx {kind}: {','.join(found)}")
    ofi = summary.get("ofi") or {}
    if ofi.get("provider"):
        parts.append(f"ofi provider {ofi['provider']}")
    return "; ".join(parts) or "(not reported)"


def spread(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--repeats", type=int, default=3, help="measurements per side, point and launch")
    p.add_argument("--launches", type=int, default=1,
                   help="launches per side, point and round, alternating C and Python; a side's figure in a round "
                        "is the median of its launches' (a library whose launches are bimodal needs several)")
    p.add_argument("--stacks", default="mpich-ucx,mpich-ofi,openmpi,impi", help=f"the first is the reference "
                   f"(default {REFERENCE})")
    p.add_argument("--nodes", default="1,2", help="node counts: 1 runs on this host, 2 on the namespace cluster")
    p.add_argument("--patterns", default="uni,bidi")
    p.add_argument("--sizes", default="4KiB,64KiB,1MiB,4MiB")
    p.add_argument("--json", help="write every round's figures here")
    a = p.parse_args(argv)
    names = a.stacks.split(",")
    defined = stacks.definitions({})
    unknown = [n for n in names if n not in defined]
    if unknown:
        p.error(f"--stacks: unknown {', '.join(unknown)}; one of {', '.join(sorted(defined))}")
    chosen = {n: stacks.resolve(n, {}) for n in names}
    reference = names[0]
    node_counts = [int(n) for n in a.nodes.split(",")]
    patterns = a.patterns.split(",")
    bad = [x for x in patterns if x not in C_TEST]
    if bad:
        p.error(f"--patterns: {', '.join(bad)} has no C reference; one of {', '.join(C_TEST)}")
    sizes = expand_sizes(a.sizes.split(","))
    stacks.ensure_all(list(chosen.values()))
    for stack in chosen.values():
        build_c(stack)

    cluster = started = None
    if any(n > 1 for n in node_counts):
        from movebench_testcluster.slurm import LocalSlurmCluster, running_cluster
        cluster = running_cluster()
        if cluster is not None and len(cluster.nodes) < max(node_counts):
            raise SystemExit(f"the running test cluster has {len(cluster.nodes)} nodes: make slurm-down, or "
                             f"make slurm-up NODES={max(node_counts)}")
        if cluster is None:
            cluster = started = LocalSlurmCluster(Path(tempfile.mkdtemp(prefix="movebench-stacks-bench-")),
                                                  nodes=max(node_counts))
            cluster.start()
        cluster.set_link(None)
    got: dict[tuple, float] = {}  # (round, nodes, stack, side, pattern, size) -> B/s
    seen: dict[tuple, dict] = {}  # (nodes, stack, side) -> transports and fall-backs
    loads, t0 = [os.getloadavg()[0]], time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="movebench-stacks-", dir="/tmp") as folder:
            for rnd in range(a.rounds):
                for nodes in node_counts:
                    launcher = SRUN if nodes > 1 else "mpiexec"
                    # 4 KiB pages on both sides (numpy would advise huge pages for arrays of 4 MiB and more)
                    env = {**(cluster.client_env() if nodes > 1 else os.environ), "NUMPY_MADVISE_HUGEPAGE": "0"}
                    order = names[rnd % len(names):] + names[:rnd % len(names)]
                    for i, name in enumerate(order):
                        stack = chosen[name]
                        draws: dict[tuple, list[float]] = {}  # a side's figure in each of its launches
                        for k in range(a.launches):  # C Py C Py ...: a side's launches between the other's
                            for side in (("c", "py") if (rnd + i + k) % 2 == 0 else ("py", "c")):
                                for pattern in patterns:
                                    if side == "c":
                                        figures, info = run_c(stack, pattern, sizes, nodes, a.repeats, launcher,
                                                              env)
                                        for size in sizes:
                                            draws.setdefault(("c", pattern, size), []).append(figures[size])
                                        seen.setdefault((nodes, name, "c"), info)
                                        continue
                                    for size in sizes:
                                        value, info = run_python(stack, pattern, size, nodes, a.repeats, launcher,
                                                                 env, folder)
                                        draws.setdefault(("py", pattern, size), []).append(value)
                                        seen.setdefault((nodes, name, "py"), info)
                        for (side, pattern, size), values in draws.items():
                            got[(rnd, nodes, name, side, pattern, size)] = statistics.median(values)
                loads.append(os.getloadavg()[0])
                print(f"round {rnd + 1}/{a.rounds} done after {time.monotonic() - t0:.0f} s (load average "
                      f"{loads[-1]:.1f})", file=sys.stderr, flush=True)
    finally:
        if started is not None:
            started.stop()

    def ratios(nodes, num, num_side, den, den_side, pattern, size):
        return [got[(r, nodes, num, num_side, pattern, size)] / got[(r, nodes, den, den_side, pattern, size)]
                for r in range(a.rounds)]

    print(f"\nStacks side by side: shuffle uni/bidi, 2 ranks, window {WINDOW}, OSU's counts, {a.rounds} interleaved "
          f"rounds, {a.launches} launch(es) of {a.repeats} measurements per side and round; median of per-round "
          f"ratios [min-max]")
    head = "| nodes | stack | pattern | " + " | ".join(format_size(s) for s in sizes) + " |"
    rule = "|---|---|---|" + "---|" * len(sizes)
    for title, cell in (
            (f"Python: stack / {reference} (bandwidth ratio)",
             lambda n, s, pat, size: spread(ratios(n, s, "py", reference, "py", pat, size))),
            (f"C (osu_ref): stack / {reference}",
             lambda n, s, pat, size: spread(ratios(n, s, "c", reference, "c", pat, size))),
            ("movebench / C, same stack (target 0.90-1.10 at 64 KiB and above)",
             lambda n, s, pat, size: spread(ratios(n, s, "py", s, "c", pat, size))),
            ("GB/s, median over rounds: movebench / C",
             lambda n, s, pat, size: "{:.2f} / {:.2f}".format(*(statistics.median(
                 got[(r, n, s, side, pat, size)] for r in range(a.rounds)) / 1e9 for side in ("py", "c"))))):
        print(f"\n{title}\n{head}\n{rule}")
        for nodes in node_counts:
            for name in names:
                if "stack /" in title and name == reference:
                    continue
                for pattern in patterns:
                    cells = [cell(nodes, name, pattern, size) for size in sizes]
                    print(f"| {nodes} | {name} | {pattern} | " + " | ".join(cells) + " |")
    print("\nWhat ran (the transport the ranks reported; a fall-back from the stack's named transport is listed)")
    print("| nodes | stack | side | transport | fell back |\n|---|---|---|---|---|")
    for (nodes, name, side), info in sorted(seen.items()):
        print(f"| {nodes} | {name} | {'movebench' if side == 'py' else 'C'} | {transport_text(info['transport'])} | "
              f"{'; '.join(info['fell_back']) or 'no'} |")
    within = [r for nodes in node_counts for name in names for pattern in patterns for size in sizes if size >= 65536
              for r in [statistics.median(ratios(nodes, name, "py", name, "c", pattern, size))]]
    print(f"\nmovebench / C at 64 KiB and above: medians {min(within):.2f}-{max(within):.2f} over "
          f"{len(within)} cells; {sum(0.9 <= r <= 1.1 for r in within)} of them within 10%")
    print(f"{time.monotonic() - t0:.0f} s on {os.cpu_count()} CPUs; 1-minute load average at the start and after each "
          f"round: {min(loads):.1f}-{max(loads):.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps([{"|".join(map(str, k)): v for k, v in got.items()},
                                            {"|".join(map(str, k)): v for k, v in seen.items()}], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
