"""Communication stacks side by side: each stack's shuffle figure against mpich-ucx's, within one node and across
two namespace nodes, with the C reference (bench/osu_ref) built against the same stack beside it.

Run (as root: the 2-node part uses the running test cluster, or starts a 2-node one and stops it after):

    .venv/bin/python bench/stacks.py [--rounds 5] [--launches 1] [--stacks mpich-ucx,mpich-ofi,openmpi,impi]
        [--nodes 1,2] [--comparisons launches,loops]

What is compared. uni (osu_bw) and bidi (osu_bibw) at 4 KiB, 64 KiB, 1 MiB and 4 MiB, 2 ranks, window 16 and
OSU's loop counts (100 timed after 10 skipped up to 8 KiB, 20 after 2 above; OSU's window is 64: 16 keeps a
4 MiB repetition across the TCP link under a second, and both sides use it), thread level `multiple`, 4 KiB
pages. The Python side is the shuffle family's kernel started as a campaign's point is
(`movebench.engine.launch.run_kernel`: the stack's Python, launcher, variables and transport probe), 1 warm-up and
`--repeats` counted repetitions; the C side is osu_ref built with the stack's own `mpicc` (Intel MPI's runtime
wheel has none: osu_ref is compiled against MPICH's mpi.h and linked to Intel MPI's libmpi.so.12, the MPICH ABI
both libraries keep), 1 uncounted (`-u 1`) and `--repeats` counted measurements, one size a launch as the point,
under the same launcher and environment. Within one node the launcher is the stack's mpiexec; across two it is
the slurm profile's `srun -N 2 -n 2` with the stack's PMI plugin (`movebench.engine.stacks.srun_for`).

Two comparisons of movebench with C. `launches` (the whole path): the C program and the movebench point in
launches of their own. `loops` (the timed region): one launch of the stack, under the same launcher and
environment, runs the shuffle kernel's own timed loop (movebench.core.p2p.PairStream, on buffers of the kernel's
page mode) and osu_ref's loop (the library build of osu_ref.c, compiled against the stack as above, called through
ctypes on the same buffers) in turn, repetition by repetition, after one uncounted repetition of each; as many pairs
as fill `--pair-seconds` per side and size (at least 5, at most 101), and the launch's ratio is the median of
movebench's repetitions over the median of C's. Across the namespace link a launch's figure at 64 KiB can sit
anywhere between ~2 and ~8 GB/s, on either side (docs/stacks.md, "Launch against launch, loop against loop"):
`launches` then compares two draws from that spread, `loops` takes it out of the ratio.

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
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from movebench import families  # noqa: E402
from movebench.core.sizes import expand_sizes, format_size  # noqa: E402
from movebench.core.tables import counted  # noqa: E402
from movebench.core.transport import TransportLog, check  # noqa: E402
from movebench.engine import launch, launchers, stacks  # noqa: E402
from movebench.engine.launchers import mpi  # noqa: E402

OSU_REF_C = ROOT / "bench" / "osu_ref" / "osu_ref.c"
BUILD = ROOT / "build" / "bench" / "stacks"
WINDOW = 16
REFERENCE = "mpich-ucx"
SRUN = "srun -N {nodes} -n {ranks}"  # profiles/slurm's launcher; srun_for adds the stack's --mpi=
C_TEST = {"uni": "bw", "bidi": "bibw"}


def osu_counts(size: int) -> tuple[int, int]:
    """(timed iterations, skipped iterations) of osu_bw and osu_bibw."""
    return (20, 2) if size > 8192 else (100, 10)


def build_c(stack: dict, shared: bool = False) -> Path:
    """osu_ref built against the stack's MPI library (once per wheel): the program, or with `shared` the library
    of its loops (-DOSU_REF_LIBRARY, no main) that `loops` calls through ctypes."""
    folder = Path(stacks.python_of(stack)).parents[1]
    out = BUILD / folder.name / ("libosu_ref.so" if shared else "osu_ref")
    if out.exists() and out.stat().st_mtime >= OSU_REF_C.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = ["-O2", "-Wall", *(["-fPIC", "-shared", "-DOSU_REF_LIBRARY"] if shared else []), "-o", str(out),
             str(OSU_REF_C)]
    if stacks.library_of(stack) == "impi":
        header = Path(sys.prefix) / "include"  # the campaign's MPICH: the header of the ABI Intel MPI keeps
        cmd = ["cc", f"-I{header}", *flags, f"-L{folder / 'lib'}", f"-Wl,-rpath,{folder / 'lib'}", "-lmpi"]
    else:
        cmd = [str(folder / "bin" / "mpicc"), *flags]
    subprocess.run(cmd, check=True)
    return out


def loops_worker(library: str, pattern: str, sizes: list[int], pair_seconds: float) -> None:
    """The MPI program of `loops`: per size, osu_ref's loop and the shuffle kernel's in turn on the same buffers.
    Rank 0 prints one line, "LOOPS <json>": size -> [C's figures, movebench's figures] in B/s."""
    from mpi4py import MPI

    c_loop = getattr(ctypes.CDLL(library), f"osu_ref_{C_TEST[pattern]}")
    c_loop.restype = ctypes.c_double
    c_loop.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_void_p]
    out = {size: loops_of_size(MPI.COMM_WORLD, c_loop, pattern, size, pair_seconds) for size in sizes}
    if MPI.COMM_WORLD.rank == 0:
        print("LOOPS " + json.dumps(out), flush=True)


def loops_of_size(comm, c_loop, pattern: str, size: int, pair_seconds: float) -> list[list[float]]:
    """[C's figures, movebench's figures] (B/s) of one size, after one uncounted repetition of each."""
    from movebench.core import memory
    from movebench.core.p2p import PairStream
    from movebench.families.shuffle.kernel import stream_bytes

    iterations, skip = osu_counts(size)
    # the kernel's buffers (4 KiB pages); osu_ref's bw receives its 4-byte ack into the receive buffer
    sbuf, rbuf = memory.allocate_bytes(size, "4k"), memory.allocate_bytes(max(size, 4), "4k")
    sp, rp = (ctypes.addressof(ctypes.c_char.from_buffer(b)) for b in (sbuf, rbuf))
    stream = PairStream(comm, sbuf, rbuf, size, WINDOW, pattern == "bidi")
    nbytes = stream_bytes(pattern, size, WINDOW, iterations, comm.size)

    def c_side():
        comm.Barrier()
        return comm.bcast(c_loop(comm.rank, size, WINDOW, iterations, skip, sp, rp) * 1e6, root=0)

    def py_side():
        return nbytes / stream.run(iterations, skip)

    warm = [c_side(), py_side()]  # the first repetitions of a size; their time sets the number of pairs
    pairs = comm.bcast(max(5, min(101, math.ceil(pair_seconds * max(warm) / nbytes))), root=0)
    figures = {"c": [], "py": []}
    for k in range(pairs):
        for side in (("c", "py") if k % 2 == 0 else ("py", "c")):
            figures[side].append(c_side() if side == "c" else py_side())
    if not stream.verified():
        raise SystemExit(f"loops: a receive buffer does not hold its peer's bytes ({pattern}, {size} B)")
    stream.free()
    return [figures["c"], figures["py"]]


def run_loops(stack, pattern, sizes, nodes, launcher, env, pair_seconds) -> tuple[dict[int, float], dict[int, int]]:
    """(size -> movebench's median / C's median in one launch, size -> pairs): loops_worker under the stack's
    launcher and environment, as a point of the stack runs."""
    task = task_of(stack, pattern, sizes[0], nodes, 1)
    python = stacks.python_of(stack)
    argv = mpi.command(task, [python], launcher)[:-1]
    argv += [python, str(Path(__file__).resolve()), "--loops-worker", str(build_c(stack, shared=True)), pattern,
             ",".join(map(str, sizes)), str(pair_seconds)]
    env = launchers.runtime(task).environment(task, env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("LOOPS ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"loops {stack['name']} {pattern} on {nodes} node(s) failed ({proc.returncode}): {argv}\n"
                         f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
    found = {int(size): sides for size, sides in json.loads(lines[-1][len("LOOPS "):]).items()}
    return ({size: statistics.median(py) / statistics.median(c) for size, (c, py) in found.items()},
            {size: len(c) for size, (c, py) in found.items()})


def task_of(stack: dict, pattern: str, size: int, nodes: int, repeats: int, scale: int = 1):
    iterations, skip = osu_counts(size)
    iterations *= scale
    point = {"pattern": pattern, "nodes": nodes, "ranks": 2, "message_size": size, "window": WINDOW,
             "mpi_thread_level": "multiple", "memory_mode": "4k"}
    task = families.load("shuffle").task(point, {"iterations": iterations, "skip": skip, "repetition_time": 0.25},
                                         repetitions=repeats, warmups=1)
    task.stack = stack
    return task


def run_python(stack, pattern, size, nodes, repeats, launcher, env, folder, scale=1) -> tuple[float, dict]:
    """(median bandwidth B/s over the counted repetitions, the meta's transport and its check)."""
    task = task_of(stack, pattern, size, nodes, repeats, scale)
    proc, recs, meta = launch.run_kernel(task, folder, launcher, timeout=300, env=env)
    if proc.returncode != 0 or not recs or not all(r["ok"] for r in recs):
        raise SystemExit(f"{stack['name']} {pattern} {size} B on {nodes} node(s) failed ({proc.returncode}):\n"
                         f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
    return statistics.median(r["bandwidth_Bps"] for r in counted(recs)), {
        "transport": meta["transport"], "fell_back": meta["transport_check"]["fell_back"],
        "library": meta.get("mpi_library_version") or meta.get("mpi", {}).get("library_version")}


def run_c(stack, pattern, size, nodes, repeats, launcher, env, scale=1) -> tuple[float, dict]:
    """(median bandwidth B/s of osu_ref's `repeats` measurements, the transport its output reported). One size a
    launch, as a point: across the link a size measured after another in the same launch can run at twice the
    speed of a fresh launch (docs/stacks.md, "Launch against launch, loop against loop")."""
    task = task_of(stack, pattern, size, nodes, repeats, scale)
    runtime = launchers.runtime(task)
    argv = mpi.command(task, [stacks.python_of(stack)], launcher)[:-1]
    argv += [str(build_c(stack)), C_TEST[pattern], "-m", str(size), "-w", str(WINDOW),
             "-i", str(task.settings["iterations"]), "-r", str(repeats), "-u", "1", "-t", "multiple", "-p", "4k"]
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
    figures = []
    log = TransportLog()
    for line in (proc.stdout + proc.stderr).splitlines():
        log.feed(line)
        parts = line.split()
        if parts and parts[0] == C_TEST[pattern]:
            figures.append(float(parts[2]) * 1e6)
    summary = log.summary()
    return (statistics.median(figures),
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
    p.add_argument("--comparisons", default="launches,loops",
                   help="launches: the C program and the movebench point in launches of their own; loops: their "
                        "timed loops in turn in one launch")
    p.add_argument("--pair-seconds", type=float, default=0.5,
                   help="loops: a side's measured seconds per size and launch that set the number of pairs (5-101)")
    p.add_argument("--iteration-scale", type=int, default=1,
                   help="launches: both sides time this many times OSU's iterations per repetition")
    p.add_argument("--json", help="write every round's figures here")
    p.add_argument("--loops-worker", nargs=4, metavar=("LIBRARY", "PATTERN", "SIZES", "PAIR_SECONDS"),
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.loops_worker:
        library, pattern, sizes, pair_seconds = a.loops_worker
        loops_worker(library, pattern, [int(x) for x in sizes.split(",")], float(pair_seconds))
        return 0
    comparisons = a.comparisons.split(",")
    if not comparisons or set(comparisons) - {"launches", "loops"}:
        p.error(f"--comparisons: {a.comparisons!r}; a comma-separated list of launches, loops")
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
        if "loops" in comparisons:
            build_c(stack, shared=True)

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
    in_launch: dict[tuple, float] = {}  # (round, nodes, stack, pattern, size) -> movebench / C in one launch
    pair_counts: dict[tuple, list[int]] = {}  # (nodes, pattern, size) -> pairs of each loops launch
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
                        if "loops" in comparisons:
                            for pattern in patterns:
                                ratio_of, pairs = run_loops(stack, pattern, sizes, nodes, launcher, env,
                                                            a.pair_seconds)
                                for size in sizes:
                                    in_launch[(rnd, nodes, name, pattern, size)] = ratio_of[size]
                                    pair_counts.setdefault((nodes, pattern, size), []).append(pairs[size])
                        if "launches" not in comparisons:
                            continue
                        draws: dict[tuple, list[float]] = {}  # a side's figure in each of its launches
                        for k in range(a.launches):  # C Py C Py ...: a side's launches between the other's
                            for side in (("c", "py") if (rnd + i + k) % 2 == 0 else ("py", "c")):
                                for pattern in patterns:
                                    for size in sizes:
                                        if side == "c":
                                            value, info = run_c(stack, pattern, size, nodes, a.repeats, launcher,
                                                                env, a.iteration_scale)
                                        else:
                                            value, info = run_python(stack, pattern, size, nodes, a.repeats,
                                                                     launcher, env, folder, a.iteration_scale)
                                        draws.setdefault((side, pattern, size), []).append(value)
                                        seen.setdefault((nodes, name, side), info)
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

    def in_launch_ratios(nodes, name, pattern, size):
        return [in_launch[(r, nodes, name, pattern, size)] for r in range(a.rounds)]

    head = "| nodes | stack | pattern | " + " | ".join(format_size(s) for s in sizes) + " |"
    rule = "|---|---|---|" + "---|" * len(sizes)

    def table(title, cell, skip_reference=False):
        print(f"\n{title}\n{head}\n{rule}")
        for nodes in node_counts:
            for name in names:
                if skip_reference and name == reference:
                    continue
                for pattern in patterns:
                    print(f"| {nodes} | {name} | {pattern} | "
                          + " | ".join(cell(nodes, name, pattern, size) for size in sizes) + " |")

    def within_target(ratio_of):
        found = [statistics.median(ratio_of(nodes, name, pattern, size)) for nodes in node_counts for name in names
                 for pattern in patterns for size in sizes if size >= 65536]
        return (f"medians {min(found):.2f}-{max(found):.2f} over {len(found)} cells; "
                f"{sum(0.9 <= r <= 1.1 for r in found)} of them within 10%")

    print(f"\nStacks side by side: shuffle uni/bidi, 2 ranks, window {WINDOW}, OSU's counts, {a.rounds} interleaved "
          f"rounds; median of per-round ratios [min-max]")
    if "launches" in comparisons:
        print(f"launches: {a.launches} launch(es) of {a.repeats} measurements per side and round")
        table(f"Python: stack / {reference} (bandwidth ratio)",
              lambda n, s, pat, size: spread(ratios(n, s, "py", reference, "py", pat, size)), skip_reference=True)
        table(f"C (osu_ref): stack / {reference}",
              lambda n, s, pat, size: spread(ratios(n, s, "c", reference, "c", pat, size)), skip_reference=True)
        table("launches: movebench / C, same stack, launches of their own (target 0.90-1.10 at 64 KiB and above)",
              lambda n, s, pat, size: spread(ratios(n, s, "py", s, "c", pat, size)))
        table("launches: GB/s, median over rounds: movebench / C",
              lambda n, s, pat, size: "{:.2f} / {:.2f}".format(*(statistics.median(
                  got[(r, n, s, side, pat, size)] for r in range(a.rounds)) / 1e9 for side in ("py", "c"))))
        print("\nWhat ran (the transport the ranks reported; a fall-back from the stack's named transport is listed)")
        print("| nodes | stack | side | transport | fell back |\n|---|---|---|---|---|")
        for (nodes, name, side), info in sorted(seen.items()):
            print(f"| {nodes} | {name} | {'movebench' if side == 'py' else 'C'} | {transport_text(info['transport'])} "
                  f"| {'; '.join(info['fell_back']) or 'no'} |")
    if "loops" in comparisons:
        table("loops: movebench's loop / C's loop, same stack, in turn in one launch (target 0.90-1.10 at 64 KiB "
              "and above)", lambda n, s, pat, size: spread(in_launch_ratios(n, s, pat, size)))
        print("pairs per launch (min-max): " + "; ".join(
            f"{nodes} node(s) {pattern} {format_size(size)} {min(c)}-{max(c)}"
            for (nodes, pattern, size), c in sorted(pair_counts.items())))
    if "launches" in comparisons:
        print("\nlaunches, movebench / C at 64 KiB and above: "
              + within_target(lambda n, s, pat, size: ratios(n, s, "py", s, "c", pat, size)))
    if "loops" in comparisons:
        print("loops, movebench / C at 64 KiB and above: " + within_target(in_launch_ratios))
    print(f"{time.monotonic() - t0:.0f} s on {os.cpu_count()} CPUs; 1-minute load average at the start and after each "
          f"round: {min(loads):.1f}-{max(loads):.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps([{"|".join(map(str, k)): v for k, v in got.items()},
                                            {"|".join(map(str, k)): v for k, v in seen.items()},
                                            {"|".join(map(str, k)): v for k, v in in_launch.items()}], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
