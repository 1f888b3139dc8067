"""Prototypes of shuffle's uni and bidi loops with the per-message Python work out of the timed loop.

Run: .venv/bin/python bench/stream_loops.py [--rounds 5] [--sizes 1024,4096,65536,1048576,4194304]

Variants (every one verifies its data: the receive buffer is zeroed before each repetition, untimed,
and must hold the peer's pattern after it):
- current: a copy of src/movebench/shuffle.py's stream_pairs (W Isend / Irecv built per iteration).
- hoisted: the same calls with the bound methods and exact-size buffer views made once per point.
- persistent: Send_init / Recv_init built once per point (outside every timed region), then per
  iteration one Prequest.Startall and one Request.Waitall (uni: the 4-byte ack by Recv / Send).
- persistent_ack: the same with the uni ack a persistent request too (Start, Wait).
- core_p2p: movebench.core.p2p.PairStream, the loop proposed for the kernel (persistent, on its own
  buffers of the same size and page mode).

- C: bench/osu_ref's osu_bw / osu_bibw loop (build/bench/libosu_ref.so, `make osu-ref`), called through
  ctypes on the same buffers, in the same process and MPI initialisation: the reference.

A round is one MPI job per pattern (uni, then bidi; swapped every round) in which the variants take
turns repetition by repetition, in an order rotated every repetition, so that C and Python are never
more than a few milliseconds apart. The ratio of a round is the median of a variant's repetitions over
the median of C's; the table gives the median over rounds and the min-max. `--worker` is the MPI
program itself (run under mpiexec by the driver).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("C", "current", "hoisted", "persistent")
LIBOSU_REF = ROOT / "build" / "bench" / "libosu_ref.so"
ACK_BYTES = 4
_TAG_DATA, _TAG_ACK = 100, 101


def pattern_of(rank: int, size: int) -> np.ndarray:
    """What rank `rank` sends: distinct per rank, so a receiver can tell its peer's bytes from anything else."""
    return ((np.arange(size, dtype=np.uint32) * 7 + 31 * rank + 1) % 251).astype(np.uint8)


def osu_skip(size: int) -> int:
    return 10 if size <= 8192 else 2


# --- the loops: every rank calls them; (elapsed_s of the slowest sender, bytes) ---


def loop_current(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    from mpi4py import MPI

    half = comm.size // 2
    first = comm.rank < half
    peer = comm.rank + half if first else comm.rank - half
    smsg, rmsg = [sbuf, size, MPI.BYTE], [rbuf, size, MPI.BYTE]
    comm.Barrier()
    start = MPI.Wtime()
    for i in range(skip + iterations):
        if i == skip:
            start = MPI.Wtime()
        if bidirectional:
            reqs = [comm.Irecv(rmsg, peer, _TAG_DATA) for _ in range(window)]
            reqs += [comm.Isend(smsg, peer, _TAG_DATA) for _ in range(window)]
            MPI.Request.Waitall(reqs)
        elif first:
            MPI.Request.Waitall([comm.Isend(smsg, peer, _TAG_DATA) for _ in range(window)])
            comm.Recv([ack, ACK_BYTES, MPI.BYTE], peer, _TAG_ACK)
        else:
            MPI.Request.Waitall([comm.Irecv(rmsg, peer, _TAG_DATA) for _ in range(window)])
            comm.Send([ack, ACK_BYTES, MPI.BYTE], peer, _TAG_ACK)
    return comm.allreduce(MPI.Wtime() - start if first else 0.0, op=MPI.MAX)


def loop_hoisted(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    from mpi4py import MPI

    half = comm.size // 2
    first = comm.rank < half
    peer = comm.rank + half if first else comm.rank - half
    smsg, rmsg, amsg = MPI.buffer(sbuf)[:size], MPI.buffer(rbuf)[:size], MPI.buffer(ack)[:ACK_BYTES]
    isend, irecv, waitall, wtime = comm.Isend, comm.Irecv, MPI.Request.Waitall, MPI.Wtime
    slots = range(window)
    comm.Barrier()
    start = wtime()
    for i in range(skip + iterations):
        if i == skip:
            start = wtime()
        if bidirectional:
            reqs = [irecv(rmsg, peer, _TAG_DATA) for _ in slots]
            reqs += [isend(smsg, peer, _TAG_DATA) for _ in slots]
            waitall(reqs)
        elif first:
            waitall([isend(smsg, peer, _TAG_DATA) for _ in slots])
            comm.Recv(amsg, peer, _TAG_ACK)
        else:
            waitall([irecv(rmsg, peer, _TAG_DATA) for _ in slots])
            comm.Send(amsg, peer, _TAG_ACK)
    return comm.allreduce(wtime() - start if first else 0.0, op=MPI.MAX)


def persistent_requests(comm, size, window, bidirectional, sbuf, rbuf):
    """The W requests of one iteration, built once per point: receives first, as OSU posts them."""
    half = comm.size // 2
    first = comm.rank < half
    peer = comm.rank + half if first else comm.rank - half
    smsg, rmsg = [sbuf, size, "B"], [rbuf, size, "B"]
    recvs = [comm.Recv_init(rmsg, peer, _TAG_DATA) for _ in range(window)] if bidirectional or not first else []
    sends = [comm.Send_init(smsg, peer, _TAG_DATA) for _ in range(window)] if bidirectional or first else []
    return recvs + sends


def loop_persistent(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    from mpi4py import MPI

    half = comm.size // 2
    first = comm.rank < half
    peer = comm.rank + half if first else comm.rank - half
    reqs = state["requests"]
    startall, waitall, wtime = MPI.Prequest.Startall, MPI.Request.Waitall, MPI.Wtime
    amsg = [ack, ACK_BYTES, MPI.BYTE]
    comm.Barrier()
    start = wtime()
    for i in range(skip + iterations):
        if i == skip:
            start = wtime()
        startall(reqs)
        waitall(reqs)
        if bidirectional:
            continue
        if first:
            comm.Recv(amsg, peer, _TAG_ACK)
        else:
            comm.Send(amsg, peer, _TAG_ACK)
    return comm.allreduce(wtime() - start if first else 0.0, op=MPI.MAX)


def load_osu_ref():
    import ctypes

    if not LIBOSU_REF.exists():
        subprocess.run(["make", "-C", str(ROOT), "osu-ref"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(LIBOSU_REF))
    for name in ("osu_ref_bw", "osu_ref_bibw"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_void_p]
    return lib


def loop_c(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    """The C loop on this process's buffers; its rank-0 MB/s turned back into rank 0's elapsed time."""
    if comm.size != 2:
        raise SystemExit("the C reference runs at 2 ranks")
    lib = state["lib"]
    # osu_bw's rank 0 receives only the 4-byte ack into its receive buffer
    into = rbuf if bidirectional or comm.rank == 1 else ack
    comm.Barrier()
    fn = lib.osu_ref_bibw if bidirectional else lib.osu_ref_bw
    mbs = fn(comm.rank, size, window, iterations, skip, sbuf.ctypes.data, into.ctypes.data)
    nbytes = size * window * iterations * (2 if bidirectional else 1)
    return comm.bcast(nbytes / (mbs * 1e6) if comm.rank == 0 else None, root=0)


def loop_persistent_ack(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    """persistent, and the uni ack a persistent request too (Start + Wait instead of Recv / Send)."""
    from mpi4py import MPI

    reqs, ackreq = state["requests"], state["ack_request"]
    startall, waitall, wtime = MPI.Prequest.Startall, MPI.Request.Waitall, MPI.Wtime
    first = comm.rank < comm.size // 2
    comm.Barrier()
    start = wtime()
    for i in range(skip + iterations):
        if i == skip:
            start = wtime()
        startall(reqs)
        waitall(reqs)
        if ackreq is not None:
            ackreq.Start()
            ackreq.Wait()
    return comm.allreduce(wtime() - start if first else 0.0, op=MPI.MAX)


def loop_core_p2p(comm, size, window, iterations, bidirectional, sbuf, rbuf, ack, skip, state):
    """movebench.core.p2p.PairStream: the loop proposed for the kernel (its own buffers, same size)."""
    return state["pair_stream"].run(iterations, skip)


def ack_request(comm, ack, bidirectional):
    if bidirectional:
        return None
    half = comm.size // 2
    first = comm.rank < half
    peer = comm.rank + half if first else comm.rank - half
    msg = [ack, ACK_BYTES, "B"]
    return comm.Recv_init(msg, peer, _TAG_ACK) if first else comm.Send_init(msg, peer, _TAG_ACK)


LOOPS = {"C": loop_c, "current": loop_current, "hoisted": loop_hoisted, "persistent": loop_persistent,
         "persistent_ack": loop_persistent_ack, "core_p2p": loop_core_p2p}


def worker(args) -> int:
    from mpi4py import MPI

    from movebench.core import memory
    from movebench.core.p2p import PairStream

    comm = MPI.COMM_WORLD
    bidirectional = args.pattern == "bidi"
    half = comm.size // 2
    peer = comm.rank + half if comm.rank < half else comm.rank - half
    receives = bidirectional or comm.rank >= half
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    iterations = {s: (100 if s <= 8192 else 20) if args.iterations == 0 else args.iterations for s in sizes}
    per_size = {}
    for size in sizes:
        sbuf = memory.allocate(size, "uint8", args.memory_mode)
        sbuf[:] = pattern_of(comm.rank, size)
        rbuf = memory.allocate(size, "uint8", args.memory_mode)
        ack = memory.allocate(ACK_BYTES, "uint8", args.memory_mode)
        state = {"requests": persistent_requests(comm, size, args.window, bidirectional, sbuf, rbuf),
                 "ack_request": ack_request(comm, ack, bidirectional),
                 "lib": load_osu_ref() if "C" in variants else None}
        if "core_p2p" in variants:
            state["pair_stream"] = PairStream(comm, memory.allocate(size, mode=args.memory_mode),
                                              memory.allocate(size, mode=args.memory_mode), size, args.window,
                                              bidirectional)
        per_size[size] = (sbuf, rbuf, ack, state, pattern_of(peer, size))
    results = {v: {s: [] for s in sizes} for v in variants}
    bad = []
    for rep in range(args.warmups + args.repetitions):
        for size in sizes:
            sbuf, rbuf, ack, state, expected = per_size[size]
            turn = rep % len(variants)
            for variant in variants[turn:] + variants[:turn]:
                rbuf.fill(0)
                elapsed = LOOPS[variant](comm, size, args.window, iterations[size], bidirectional, sbuf, rbuf, ack,
                                         osu_skip(size), state)
                if variant == "core_p2p":
                    ok = state["pair_stream"].verified()
                else:
                    ok = not receives or np.array_equal(rbuf, expected)
                if not comm.allreduce(ok, op=MPI.LAND):
                    bad.append((variant, size, rep))
                if rep >= args.warmups:
                    nbytes = size * args.window * iterations[size] * half * (2 if bidirectional else 1)
                    results[variant][size].append(nbytes / elapsed)
    for _, _, _, state, _ in per_size.values():
        for req in state["requests"] + ([state["ack_request"]] if state["ack_request"] else []):
            req.Free()
        if "pair_stream" in state:
            state["pair_stream"].free()
    if comm.rank == 0:
        facts = memory.memory_facts(args.memory_mode, {"send": per_size[sizes[-1]][0]})
        print(json.dumps({"pattern": args.pattern, "results": results, "unverified": bad,
                          "thread_level": MPI.Query_thread(), "memory": facts}))
    return 1 if bad else 0


def run_worker(pattern: str, sizes: list[int], variants: list[str], repetitions: int, warmups: int, env: dict,
               ranks: int = 2, memory_mode: str = "4k", window: int = 64) -> dict:
    from c_reference import MPIEXEC

    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, __file__, "--worker", "--pattern", pattern,
           "--sizes", ",".join(map(str, sizes)), "--variants", ",".join(variants), "--repetitions", str(repetitions),
           "--warmups", str(warmups), "--memory-mode", memory_mode, "--window", str(window)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["results"] = {v: {int(s): vals for s, vals in by.items()} for v, by in out["results"].items()}
    return out


def main(argv=None) -> int:
    from c_reference import kernel_env, spread

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--worker", action="store_true", help="be the MPI program (under mpiexec)")
    parser.add_argument("--pattern", choices=("uni", "bidi"), default="uni")
    parser.add_argument("--sizes", default="1024,4096,65536,1048576,4194304")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=0, help="0: OSU's (100 up to 8 KiB, 20 above)")
    parser.add_argument("--repetitions", type=int, default=7, help="per variant, size and round")
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--memory-mode", default="4k", help="page mode of the buffers (movebench.core.memory)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--thread-level", default="multiple", choices=("single", "multiple"))
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    env = kernel_env(args.thread_level)
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    if "C" not in variants:
        parser.error("--variants must include C, the reference of every ratio")
    rounds = []
    for rnd in range(args.rounds):
        row = {}
        for pattern in ("uni", "bidi") if rnd % 2 == 0 else ("bidi", "uni"):
            out = run_worker(pattern, sizes, variants, args.repetitions, args.warmups, env,
                             memory_mode=args.memory_mode, window=args.window)
            for variant in variants:
                for size in sizes:
                    row[(pattern, variant, size)] = statistics.median(out["results"][variant][size])
        rounds.append(row)
        print(f"round {rnd + 1}/{args.rounds}: " + " ".join(
            f"{p}/{v}@{s}={row[(p, v, s)] / row[(p, 'C', s)]:.2f}" for p in ("uni", "bidi") for v in variants
            if v != "C" for s in sizes), file=sys.stderr, flush=True)
    print(f"\nloop variants vs the C loop in the same job, 2 ranks, window {args.window}, thread level "
          f"{args.thread_level}, memory mode {args.memory_mode}, {args.rounds} rounds of {args.repetitions} "
          "interleaved repetitions: median of per-round ratios [min-max]")
    print("| pattern | ratio | " + " | ".join(str(s) for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for pattern in ("uni", "bidi"):
        for variant in variants:
            if variant == "C":
                continue
            cells = [spread([r[(pattern, variant, s)] / r[(pattern, "C", s)] for r in rounds]) for s in sizes]
            print(f"| {pattern} | {variant} / C | " + " | ".join(cells) + " |")
        for variant in variants:
            if variant not in ("C", "current") and "current" in variants:
                cells = [spread([r[(pattern, variant, s)] / r[(pattern, "current", s)] for r in rounds])
                         for s in sizes]
                print(f"| {pattern} | {variant} / current | " + " | ".join(cells) + " |")
    print("\nGB/s, medians over rounds:")
    for pattern in ("uni", "bidi"):
        for variant in variants:
            print(f"  {pattern:4s} {variant:10s} " + " ".join(
                f"{statistics.median(r[(pattern, variant, s)] for r in rounds) / 1e9:7.2f}" for s in sizes))
    if args.json:
        Path(args.json).write_text(json.dumps([{"|".join(map(str, k)): v for k, v in r.items()} for r in rounds]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
