"""shuffle: network streaming between MPI ranks.

Patterns (one point = one pattern at one message size, window and rank count):

- uni: osu_bw. Rank i < n/2 sends to i + n/2 (osu_mbw_mr's pairing). Per iteration
  the sender posts W Isend of `size` bytes, Waitall, then waits for a 4-byte ack
  (OSU's ack; the 1-byte ack of the design changes nothing measurable).
  bytes = size x W x iterations x pairs; time = as OSU, the sending side's: the slowest
  of ranks 0 .. n/2 - 1 (rank 0 alone at 2 ranks, as osu_bw). As in OSU, each
  repetition first runs `skip` untimed iterations (10, or 2 above 8 KiB) so that the
  timer starts in the steady state, not on a cold pipeline after the barrier.
- bidi: osu_bibw. Both sides post W Irecv and W Isend, Waitall; timed on ranks
  0 .. n/2 - 1 like uni.
  bytes = 2 x size x W x iterations x pairs (both directions counted; mpi4py's
  demo/osu_bibw.py counts one, so double it before comparing).
- alltoall: every rank posts W Irecv from and W Isend to every other rank at once,
  Waitall. bytes = n x (n-1) x W x size x iterations, received by all ranks;
  time = the slowest rank's.
- shuffle: the data-dependent operator. Each rank draws (key, payload) tuples
  (keys uniform, or Zipf with exponent `skew`), partitions them by hash(key) mod n,
  exchanges counts with Alltoall, then the tuples by a windowed pairwise exchange:
  each destination's part is cut into `size`-byte messages with at most W sends in
  flight. Chosen over Alltoallv so that message size and window tune the shuffle
  exactly as they tune the streaming patterns, which is what the efficiency column
  compares. bytes = tuple bytes received from other ranks (the local part moves
  no data); time = the slowest rank's exchange (counts + tuples); partition time is
  kept apart. Every received tuple is checked to belong to its rank, and the
  global tuple count and a permutation-invariant checksum are compared.

Bandwidth is bytes / time. The buffers the kernel times are allocated and touched once per
point by movebench.core.memory in the point's memory_mode (4 KiB base pages, or transparent huge
pages), the same way on every pattern, and sent with the buffer (uppercase) calls: nothing is
pickled while timed. uni and bidi build their W sends and receives once per point as persistent
requests (movebench.core.p2p; `request_mode: persistent` in meta): per iteration Python makes two
calls whatever the window, so small messages measure MPI rather than the loop (docs/notes/kernels.md).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from movebench.core.timing import iterations_for_duration

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the data-dependent shuffle's functions only: uni, bidi and alltoall ranks move
# bytes (core.memory.allocate_bytes) and never load it: its import is a large share of a point's fixed cost
# (docs/notes/kernels.md, section 8).

PAIRED = ("uni", "bidi")
_TAG_DATA = 100


# --- kernels: every rank calls them; each returns (elapsed_s, bytes, extras), equal on all ranks ---


def stream_bytes(pattern: str, size: int, window: int, iterations: int, ranks: int) -> int:
    """Payload bytes of one repetition of a streaming pattern (see the module's definitions)."""
    if pattern in PAIRED:
        return size * window * iterations * (ranks // 2) * (2 if pattern == "bidi" else 1)
    if pattern == "alltoall":
        return ranks * (ranks - 1) * window * size * iterations
    raise ValueError(f"{pattern} is not a streaming pattern")


def _slowest(comm, seconds):
    from mpi4py import MPI

    return comm.allreduce(seconds, op=MPI.MAX)


def osu_skip(size: int) -> int:
    """Untimed iterations before the timer starts, as OSU's osu_bw: 10, or 2 above 8 KiB."""
    return 10 if size <= 8192 else 2


def stream_alltoall(comm, size, window, iterations, sbuf, rbufs, skip=0):
    """Every rank streams W messages to every other rank at once, per iteration."""
    from mpi4py import MPI

    n, rank = comm.size, comm.rank
    peers = [(rank + k) % n for k in range(1, n)]
    smsg = [sbuf, size, MPI.BYTE]
    comm.Barrier()
    start = MPI.Wtime()
    for i in range(skip + iterations):
        if i == skip:
            start = MPI.Wtime()
        reqs = [comm.Irecv([rbufs[i], size, MPI.BYTE], src, _TAG_DATA)
                for i, src in enumerate(reversed(peers)) for _ in range(window)]
        reqs += [comm.Isend(smsg, dst, _TAG_DATA) for dst in peers for _ in range(window)]
        MPI.Request.Waitall(reqs)
    elapsed = _slowest(comm, MPI.Wtime() - start)
    nbytes = stream_bytes("alltoall", size, window, iterations, n)
    return elapsed, nbytes, {"messages": nbytes // size}


# --- the data-dependent shuffle ---

_GOLDEN = 0x9E3779B97F4A7C15


def key_hash(keys: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads consecutive (and Zipf-hot) keys over all ranks."""
    import numpy as np

    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def destination(keys: np.ndarray, ranks: int) -> np.ndarray:
    import numpy as np

    return (key_hash(keys) % np.uint64(ranks)).astype(np.int64)


@functools.lru_cache(maxsize=4)
def zipf_cdf(skew: float) -> np.ndarray:
    """Zipf over a finite domain, so any exponent > 0 works (numpy's zipf needs > 1); kept for the launch's
    later points of the same skew."""
    import numpy as np

    cdf = np.cumsum(np.arange(1, 1 << 20, dtype=np.float64) ** -skew)
    cdf.flags.writeable = False
    return cdf


def make_tuples(count: int, tuple_size: int, skew: float, seed: int, rank: int) -> np.ndarray:
    """`count` rows of `tuple_size // 8` uint64 words: the key, then payload words."""
    import numpy as np

    rng = np.random.default_rng([seed, rank])
    words = tuple_size // 8
    tuples = np.empty((count, words), dtype=np.uint64)
    if skew > 0:
        cdf = zipf_cdf(skew)
        tuples[:, 0] = np.searchsorted(cdf, rng.random(count) * cdf[-1]).astype(np.uint64)
    else:
        tuples[:, 0] = rng.integers(0, 2**63, size=count, dtype=np.uint64)
    tuples[:, 1:] = rng.integers(0, 2**63, size=(count, words - 1), dtype=np.uint64)
    return tuples


@functools.lru_cache(maxsize=2)
def shuffle_input(count: int, tuple_size: int, skew: float, seed: int, rank: int) -> tuple[np.ndarray, int]:
    """A point's tuples (read-only: partition copies them) and their checksum, kept for the launch's later points
    of the same data: a launch group's shuffle points differ in message size and window, and draw the same
    tuples for the same skew (the default campaign: 12 points, 2 skews)."""
    tuples = make_tuples(count, tuple_size, skew, seed, rank)
    tuples.flags.writeable = False
    return tuples, checksum(tuples)


CHECKSUM_ROWS = 8192


def checksum(tuples: np.ndarray) -> int:
    """Sum over rows of a row hash: equal for any order of the same rows, changed by any flipped bit."""
    import numpy as np

    if tuples.size == 0:
        return 0
    weights = key_hash(np.arange(1, tuples.shape[1] + 1, dtype=np.uint64)) | np.uint64(1)
    total = np.uint64(0)
    with np.errstate(over="ignore"):
        # in blocks of rows that stay in cache: half the time of one pass over the whole array
        for lo in range(0, tuples.shape[0], CHECKSUM_ROWS):
            rows = key_hash((tuples[lo : lo + CHECKSUM_ROWS] * weights).sum(axis=1, dtype=np.uint64))
            total += rows.sum(dtype=np.uint64)
    return int(total)


def partition(tuples: np.ndarray, ranks: int, dest_of=destination):
    """Rows grouped by destination rank, and how many go to each."""
    import numpy as np

    dest = dest_of(tuples[:, 0], ranks)
    order = np.argsort(dest, kind="stable")
    return tuples[order], np.bincount(dest, minlength=ranks).astype(np.int64)


def exchange(comm, outgoing: np.ndarray, counts: np.ndarray, message_size: int, window: int):
    """Counts by Alltoall, then tuples in `message_size` pieces, at most `window` sends in flight."""
    import numpy as np
    from mpi4py import MPI

    n, rank, row_bytes = comm.size, comm.rank, outgoing.shape[1] * 8
    incoming_counts = np.empty(n, dtype=np.int64)
    comm.Alltoall(counts, incoming_counts)
    send_offsets = np.concatenate([[0], np.cumsum(counts)]) * row_bytes
    recv_offsets = np.concatenate([[0], np.cumsum(incoming_counts)]) * row_bytes
    incoming = np.empty((int(incoming_counts.sum()), outgoing.shape[1]), dtype=np.uint64)
    sbytes, rbytes = outgoing.reshape(-1).view(np.uint8), incoming.reshape(-1).view(np.uint8)
    rbytes[recv_offsets[rank]:recv_offsets[rank + 1]] = sbytes[send_offsets[rank]:send_offsets[rank + 1]]

    def pieces(offsets, peer):
        return [(lo, min(lo + message_size, offsets[peer + 1])) for lo in range(offsets[peer], offsets[peer + 1],
                                                                                message_size)]

    peers = [(rank + k) % n for k in range(1, n)]
    recvs = [comm.Irecv(rbytes[lo:hi], (rank - k) % n, _TAG_DATA)
             for k in range(1, n) for lo, hi in pieces(recv_offsets, (rank - k) % n)]
    sends = [(dst, lo, hi) for dst in peers for lo, hi in pieces(send_offsets, dst)]
    in_flight = []
    for dst, lo, hi in sends:
        if len(in_flight) == window:
            done = set(MPI.Request.Waitsome(in_flight))
            in_flight = [r for i, r in enumerate(in_flight) if i not in done]
        in_flight.append(comm.Isend(sbytes[lo:hi], dst, _TAG_DATA))
    MPI.Request.Waitall(in_flight + recvs)
    received = int(rbytes.size - (recv_offsets[rank + 1] - recv_offsets[rank]))
    return incoming, received, len(sends)


def verify(comm, incoming: np.ndarray, sent_total: int, sent_checksum: int, dest_of=destination) -> str | None:
    """None when the shuffle kept every tuple and each landed on its owner, else why not."""
    import numpy as np
    from mpi4py import MPI

    misrouted = int(np.count_nonzero(dest_of(incoming[:, 0], comm.size) != comm.rank))
    total_misrouted = comm.allreduce(misrouted)
    total = comm.allreduce(incoming.shape[0])
    mask = (1 << 64) - 1
    received_sum = comm.allreduce(checksum(incoming), op=MPI.SUM) & mask
    expected_sum = comm.allreduce(sent_checksum, op=MPI.SUM) & mask
    problems = []
    if total_misrouted:
        problems.append(f"{total_misrouted} tuples landed on a rank that does not own their key")
    if total != sent_total:
        problems.append(f"{total} tuples received, {sent_total} sent")
    if received_sum != expected_sum:
        problems.append("checksum of received tuples differs from the sent ones")
    return "; ".join(problems) or None


def run_shuffle(comm, tuples, message_size, window, sent_checksum, dest_of=destination, route=None):
    """One timed shuffle. `route` picks destinations (defaults to `dest_of`; tests pass a wrong one)."""
    from mpi4py import MPI

    comm.Barrier()
    start = MPI.Wtime()
    outgoing, counts = partition(tuples, comm.size, route or dest_of)
    parted = MPI.Wtime()
    incoming, received, messages = exchange(comm, outgoing, counts, message_size, window)
    end = MPI.Wtime()
    partition_s = _slowest(comm, parted - start)
    exchange_s = _slowest(comm, end - parted)
    per_rank = comm.allgather(incoming.nbytes)
    error = verify(comm, incoming, comm.allreduce(tuples.shape[0]), sent_checksum, dest_of)
    extras = {"partition_s": partition_s, "exchange_s": exchange_s, "timed_s": partition_s + exchange_s,
              "messages": comm.allreduce(messages),
              "imbalance": max(per_rank) / (sum(per_rank) / len(per_rank)) if sum(per_rank) else 1.0,
              "verified": error is None}
    if error:
        extras.update(ok=False, error=error)
    return exchange_s, comm.allreduce(received), extras


def measure_task(comm, task, group_meta=None):
    """One point: its buffers (allocated here, released on return), its repetitions, its records and meta."""
    from movebench.core import memory
    from movebench.core.p2p import PairStream
    from movebench.core.runner import run_mpi

    point, settings = task.point, task.settings
    pattern, size, window = point["pattern"], point["message_size"], point["window"]
    if comm.size != point["ranks"]:
        raise SystemExit(f"movebench.shuffle: the point has {point['ranks']} ranks but {comm.size} started")
    if pattern in PAIRED and comm.size % 2:
        raise SystemExit(f"movebench.shuffle: pattern {pattern} needs an even number of ranks, not {comm.size}")
    skip = settings.get("skip", osu_skip(size))
    mode = point.get("memory_mode", "4k")
    pairs, buffers = None, {}
    if pattern in PAIRED:
        buffers = {"send": memory.allocate_bytes(size, mode), "recv": memory.allocate_bytes(size, mode)}
        pairs = PairStream(comm, buffers["send"], buffers["recv"], size, window, pattern == "bidi")

        def stream(iterations, skip=skip):
            elapsed = pairs.run(iterations, skip)
            nbytes = stream_bytes(pattern, size, window, iterations, comm.size)
            extras = {"messages": nbytes // size, "verified": pairs.verified()}
            if not extras["verified"]:
                extras.update(ok=False, error="a receive buffer does not hold its peer's bytes after the repetition")
            return elapsed, nbytes, extras
    elif pattern == "alltoall":
        buffers = {"send": memory.allocate_bytes(size, mode, fill=1)}
        buffers.update({f"recv{k}": memory.allocate_bytes(size, mode) for k in range(1, comm.size)})
        rbufs = [buffers[f"recv{k}"] for k in range(1, comm.size)]

        def stream(iterations, skip=skip):
            return stream_alltoall(comm, size, window, iterations, buffers["send"], rbufs, skip)
    if pattern != "shuffle":
        iterations = settings["iterations"]
        if iterations == "auto":
            # OSU's skip warms the path up once: the probe's later runs follow a warm one, as repetitions do.
            probes = []

            def probe(count):
                probes.append(count)
                return stream(count, skip if len(probes) == 1 else 0)

            iterations = iterations_for_duration(probe, settings["repetition_time"])

        def measure(rep, warmup):
            elapsed, nbytes, extras = stream(iterations)
            return elapsed, nbytes, {**extras, "iterations": iterations, "skip": skip}
    else:
        tuples, sent_checksum = shuffle_input(settings["tuples_per_rank"], settings["tuple_size"], point["skew"],
                                              settings["seed"], comm.rank)

        def measure(rep, warmup):
            return run_shuffle(comm, tuples, size, window, sent_checksum)
    meta = {"buffers_reused": pattern != "shuffle", "memory": memory.memory_facts(mode, buffers), **(group_meta or {})}
    if pairs is not None:
        meta["request_mode"] = "persistent"
    try:
        run_mpi(comm, task, measure, meta)
    finally:
        if pairs is not None:
            pairs.free()  # before MPI_Finalize, and before the next task's requests


def main(argv=None):
    from mpi4py import MPI

    from movebench.core.runner import each_task

    for task, group_meta in each_task(argv):
        measure_task(MPI.COMM_WORLD, task, group_meta)


if __name__ == "__main__":
    main()
