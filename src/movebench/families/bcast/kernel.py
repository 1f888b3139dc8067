"""bcast: one root's array to every rank, out of place and in place.

A point is one method broadcasting one array (dense, or sparse CSR) of one shape,
density and dtype from rank 0 to all ranks. The methods:

- pickle: `comm.bcast(obj)`. Out of place: the root pickles the whole object
  (payload included, in band), every rank receives the stream into a new bytes
  object and unpickles it into a new object. mpi4py's root unpickles its own
  stream too, so the root also ends with a copy.
- buffer: in place. The metadata (dense: shape, dtype; sparse: format, shape,
  nnz, dtypes) goes by lowercase `comm.bcast`, then each buffer (dense: the
  array; CSR: data, indices, indptr) by uppercase `Bcast` into arrays that each
  receiver allocated once and reuses while the metadata stays the same.
- pkl5: `mpi4py.util.pkl5.Intracomm(comm).bcast(obj)`: protocol 5 pickling with
  out-of-band buffers. The pickle stream holds only metadata; the buffers go
  raw by `Bcast`, into new bytearrays on every receiver each time.
- p2p: in place, the study's send/receive: the root sends the metadata
  (lowercase `send`) and then every buffer (`Send`) to rank 1, then rank 2, ...;
  receivers `Recv` into their reused arrays.
- rma: in place, one-sided. The root exposes each of its buffers in a window
  (`Win.Create(buffer, comm=comm)`, once per point, outside the timed region;
  its cost is kept as `window_setup_s`); the metadata goes by lowercase bcast;
  the receivers `Get` every buffer into their reused arrays. Synchronisation is
  active-target Fence (NOPRECEDE ... NOSUCCEED), not Lock_all/Flush: a
  broadcast is collective, and the root must learn when its buffers may be
  reused; the closing Fence tells every rank at once. With passive target the
  root would need an extra barrier to learn it, and the MPI standard lets a
  passive-target Get wait for the target to enter MPI anyway. The three forms
  timed alike within the noise, so the simpler collective one was kept
  (docs/notes/kernels.md, section 3, "rma: why Fence").
- osu: the pure transfer, timed as OSU's osu_bcast (OMB 5.3.2, mpi/collective/osu_bcast.c):
  the shape is known to every rank from the point's setup (no metadata while timed), the
  receivers' buffers are preallocated, and one repetition is `skip + iterations` back-to-back
  rounds of `Bcast` of every buffer (dense: the array; CSR: data, indices, indptr), each round
  timed alone on every rank (`MPI.Wtime` before and after) and followed by an untimed `Barrier`.
  OSU's counts: iterations 1000, skip 200 for payloads up to 8 KiB; 100 and 10 above.
  `buffer` minus `osu` is what the study's in-place method pays for metadata, the object and
  its barrier-aligned single-shot timing.

Receivers of sparse arrays end each repetition holding a `scipy.sparse.csr_array`
(in-place methods wrap their reused buffers without copying), as pickle's do.

Measures per repetition:
- time, every method but osu: every rank waits at a barrier, then times its own
  part with `MPI.Wtime`; `elapsed_s` is the largest of these (the last rank's
  finish, from the barrier-aligned start). It includes the metadata exchange and,
  for pickle and pkl5, the pickling and unpickling (that is what those methods cost).
- time, osu: osu_bcast's average latency. With t(r, i) rank r's time of timed
  round i, R ranks and N = iterations:
      elapsed_s = (1 / R) * sum_r [ (1 / N) * sum_i t(r, i) ]
  the average over ranks of each rank's mean (osu_bcast prints this as "Avg
  Latency"); `iterations` and `skip` are in every record, and `timed_s` =
  elapsed_s x iterations, the seconds inside the timed regions (for
  `python -m movebench efficiency`; the skipped rounds are outside them).
- bytes = payload bytes x (ranks - 1), payload = the array's bytes (dense) or
  data + indices + indptr bytes (CSR); bandwidth = bytes / elapsed_s, for osu as
  for every method (so osu's bandwidth is per call of the mean latency).
- buffers: every buffer a timed broadcast reads or writes in place (the root's
  source, the in-place methods' receive buffers) comes from
  `movebench.core.memory.allocate` in the point's `memory_mode` (4k by default;
  the root's generated array is copied in once), and the meta's `memory` says
  what pages they got. pickle and pkl5 receive into new objects by definition.
- memory is never measured in a timed broadcast: timed broadcasts run with
  tracemalloc stopped and without an RSS high-water reset. After each timed
  repetition (and its verification) every rank runs one more broadcast of the
  same method, untimed, with the probes on (for osu: one round of `Bcast`s),
  and the repetition's record carries that probe broadcast's memory:
  per rank, then the largest over the receivers (`root_*`: the root's):
  `tracemalloc_peak_bytes`: the peak of memory allocated through Python's
  allocators during the probe broadcast (numpy reports its array data to
  tracemalloc; pickle streams and bytearrays are Python objects), tracing
  started just before it. It leaves out receive buffers allocated before the
  repetition and MPI's own C allocations: the study's "allocated" figure.
  `rss_hwm_delta_bytes`: the resident-set high-water mark during the probe
  broadcast (VmHWM of /proc/self/status, reset to the current RSS by writing 5
  to /proc/self/clear_refs just before it) minus the rank's RSS before any
  of the point's arrays existed on it (the root: after placing its source).
  It counts every resident page the broadcast costs a rank, reused receive
  buffers included, and MPI's buffers too. The report shows this one as the
  peak extra memory.
- verification, after the timed region: the in-place methods' receive buffers
  are zeroed before each timed repetition (untimed), and every receiver's CRC-32
  of its received buffers (and shape, dtype, nnz) must equal the root's after it;
  a mismatch makes the repetition `ok = false` with the failing ranks named.

Where this differs from the reference study (Dagger.jl, 16 ranks): the time is
the slowest rank's from a common barrier, not the root's; memory is measured per
rank as above rather than Julia's allocation count.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

from movebench.core import memory

METHODS = ("pickle", "buffer", "pkl5", "p2p", "rma", "osu")
IN_PLACE = ("buffer", "p2p", "rma", "osu")
ROOT = 0
_TAG_META, _TAG_DATA = 200, 201
# osu_bcast's (osu_coll.h): payloads above LARGE_MESSAGE_SIZE get the large-message counts.
OSU_LARGE_MESSAGE_SIZE = 8192


def osu_counts(payload: int) -> tuple[int, int]:
    """(timed iterations, skipped iterations) of osu_bcast for a payload of this many bytes."""
    return (100, 10) if payload > OSU_LARGE_MESSAGE_SIZE else (1000, 200)


def parse_shape(text) -> tuple[int, ...]:
    return tuple(int(n) for n in str(text).split("x"))


def index_dtype(shape, nnz: int) -> np.dtype:
    """scipy's choice for CSR indices: int32 while every index and nnz fits."""
    return np.dtype(np.int32 if max(nnz, *shape) < 2**31 else np.int64)


# --- the arrays ---


def make_dense(shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.random(shape, dtype=dtype)
    return rng.integers(0, 2**31 - 1, size=shape, dtype=dtype)


def make_csr(shape, density: float, dtype: str, seed: int, rows_per_chunk: int = 256):
    """A CSR matrix whose every entry is nonzero with probability `density`, drawn row block by row block."""
    import scipy.sparse

    rows, cols = shape
    rng = np.random.default_rng(seed)
    index = index_dtype(shape, round(density * rows * cols))
    counts, column_blocks = np.zeros(rows, dtype=np.int64), []
    for lo in range(0, rows, rows_per_chunk):
        hit = rng.random((min(rows_per_chunk, rows - lo), cols)) < density
        counts[lo : lo + hit.shape[0]] = hit.sum(axis=1)
        column_blocks.append(np.nonzero(hit)[1].astype(index))
    indptr = np.zeros(rows + 1, dtype=index)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate(column_blocks) if column_blocks else np.zeros(0, dtype=index)
    data = make_dense(indices.size, dtype, seed + 1)
    return scipy.sparse.csr_array((data, indices, indptr), shape=shape, copy=False)


def buffers_of(obj) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    return [obj.data, obj.indices, obj.indptr]


def metadata_of(obj) -> dict:
    if isinstance(obj, np.ndarray):
        return {"kind": "dense", "shape": obj.shape, "dtype": obj.dtype.str}
    return {
        "kind": "sparse",
        "format": obj.format,
        "shape": obj.shape,
        "nnz": int(obj.nnz),
        "dtype": obj.data.dtype.str,
        "index_dtype": obj.indices.dtype.str,
    }


def allocate(meta: dict, mode: str = "4k") -> list[np.ndarray]:
    """Receive buffers for `meta` in memory of `mode` (core.memory.allocate), every page touched once."""
    if meta["kind"] == "dense":
        return [memory.allocate(meta["shape"], meta["dtype"], mode)]
    return [
        memory.allocate(meta["nnz"], meta["dtype"], mode),
        memory.allocate(meta["nnz"], meta["index_dtype"], mode),
        memory.allocate(meta["shape"][0] + 1, meta["index_dtype"], mode),
    ]


def place(obj, mode: str = "4k"):
    """The root's object with its buffers copied once into memory of `mode`, as the receivers' are."""
    if isinstance(obj, np.ndarray):
        placed = memory.allocate(obj.shape, obj.dtype, mode)
        placed[...] = obj
        return placed
    import scipy.sparse

    arrays = tuple(place(array, mode) for array in buffers_of(obj))
    return scipy.sparse.csr_array(arrays, shape=obj.shape, copy=False)


def assemble(meta: dict, arrays: list[np.ndarray]):
    """The receiver's object over its buffers, without a copy."""
    if meta["kind"] == "dense":
        return arrays[0]
    import scipy.sparse

    return scipy.sparse.csr_array(tuple(arrays), shape=meta["shape"], copy=False)


def checksum(obj) -> int:
    crc = 0
    for array in buffers_of(obj):
        crc = zlib.crc32(np.ascontiguousarray(array).view(np.uint8).reshape(-1), crc)
    return crc


class ReceiveBuffers:
    """An in-place receiver's arrays: allocated for the first metadata seen, reused while it stays the same."""

    def __init__(self, mode: str = "4k"):
        self.mode, self.meta, self.arrays = mode, None, None

    def for_meta(self, meta: dict) -> list[np.ndarray]:
        if meta != self.meta:
            self.meta, self.arrays = meta, allocate(meta, self.mode)
        return self.arrays


# --- the methods: every rank calls them; each returns the rank's object ---


def bcast_pickle(comm, source, state):
    return comm.bcast(source, root=ROOT)


def bcast_pkl5(comm, source, state):
    return state["pkl5"].bcast(source, root=ROOT)


def bcast_buffer(comm, source, state):
    meta = comm.bcast(metadata_of(source) if comm.rank == ROOT else None, root=ROOT)
    arrays = buffers_of(source) if comm.rank == ROOT else state["receive"].for_meta(meta)
    for array in arrays:
        comm.Bcast(array, root=ROOT)
    return source if comm.rank == ROOT else assemble(meta, arrays)


def bcast_p2p(comm, source, state):
    if comm.rank == ROOT:
        meta = metadata_of(source)
        for dest in range(comm.size):
            if dest != ROOT:
                comm.send(meta, dest, _TAG_META)
                for array in buffers_of(source):
                    comm.Send(array, dest, _TAG_DATA)
        return source
    meta = comm.recv(source=ROOT, tag=_TAG_META)
    arrays = state["receive"].for_meta(meta)
    for array in arrays:
        comm.Recv(array, ROOT, _TAG_DATA)
    return assemble(meta, arrays)


def bcast_rma(comm, source, state):
    from mpi4py import MPI

    meta = comm.bcast(metadata_of(source) if comm.rank == ROOT else None, root=ROOT)
    windows = state["windows"]
    for window in windows:
        window.Fence(MPI.MODE_NOPRECEDE)
    if comm.rank != ROOT:
        arrays = state["receive"].for_meta(meta)
        for window, array in zip(windows, arrays, strict=True):
            window.Get(array, ROOT)
    for window in windows:
        window.Fence(MPI.MODE_NOSUCCEED)
    return source if comm.rank == ROOT else assemble(meta, arrays)


def osu_probe_round(comm, source, state):
    """One round of osu's loop, untimed: what osu's memory probe runs (its timed loop is `bcast_osu`).

    Each buffer by `Bcast` into the receivers' preallocated buffers, the shape known from setup.
    """
    arrays = buffers_of(source) if comm.rank == ROOT else state["receive"].arrays
    for array in arrays:
        comm.Bcast(array, root=ROOT)
    return source if comm.rank == ROOT else assemble(state["receive"].meta, arrays)


def bcast_osu(comm, arrays, iterations: int, skip: int) -> float:
    """osu_bcast's loop; returns the average over ranks of each rank's mean time of a round, on every rank.

    A round is one `Bcast` of each of `arrays` (the root's buffers, or the receiver's preallocated
    ones), timed alone on every rank and followed by an untimed `Barrier`; the first `skip` rounds
    are not counted: elapsed = (1 / ranks) * sum over ranks of (sum of the rank's timed rounds / iterations).
    """
    from mpi4py import MPI

    bcast_, barrier, wtime = comm.Bcast, comm.Barrier, MPI.Wtime
    timer = 0.0
    for i in range(skip + iterations):
        start = wtime()
        for array in arrays:
            bcast_(array, ROOT)
        stop = wtime()
        if i >= skip:
            timer += stop - start
        barrier()
    return comm.allreduce(timer / iterations, op=MPI.SUM) / comm.size


# One broadcast of each of the study's methods, timed once per repetition by `timed_broadcast`. osu is not here:
# its timed repetition is `bcast_osu`'s loop of skip + iterations rounds.
BROADCASTS = {"pickle": bcast_pickle, "buffer": bcast_buffer, "pkl5": bcast_pkl5, "p2p": bcast_p2p, "rma": bcast_rma}
# What the untimed memory probe after each repetition runs: one broadcast of the method; for osu one round of its
# loop, so that the probe sees one transfer without repeating the whole timed loop.
PROBE_BROADCASTS = {**BROADCASTS, "osu": osu_probe_round}


def setup(comm, method: str, source, memory_mode: str = "4k") -> dict:
    """What a method keeps across repetitions: receive buffers, windows, the pkl5 communicator, osu's counts."""
    from mpi4py import MPI
    from mpi4py.util import pkl5

    state = {"windows": [], "window_setup_s": 0.0}
    if method == "pkl5":
        state["pkl5"] = pkl5.Intracomm(comm)
    if method in IN_PLACE and comm.rank != ROOT:
        state["receive"] = ReceiveBuffers(memory_mode)
    meta = comm.bcast(metadata_of(source) if comm.rank == ROOT else None, root=ROOT)
    if "receive" in state:
        state["receive"].for_meta(meta)
    if method == "osu":
        payload = comm.bcast(sum(a.nbytes for a in buffers_of(source)) if comm.rank == ROOT else None, root=ROOT)
        state["osu_counts"] = osu_counts(payload)
    if method == "rma":
        comm.Barrier()
        start = MPI.Wtime()
        exposed = buffers_of(source) if comm.rank == ROOT else [None] * (3 if meta["kind"] == "sparse" else 1)
        state["windows"] = [MPI.Win.Create(buffer, comm=comm) for buffer in exposed]
        state["window_setup_s"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
    return state


# --- memory probes ---


def _status_bytes(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) * 1024


def rss_bytes() -> int:
    return _status_bytes("VmRSS")


def reset_rss_peak() -> None:
    """Make VmHWM the current RSS (Linux >= 4.0), so each repetition gets its own high-water mark."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_peak_bytes() -> int:
    return _status_bytes("VmHWM")


# --- one repetition ---


def timed_broadcast(comm, method, source, state):
    """One timed repetition, probes off; returns (elapsed_s on every rank, this rank's received object)."""
    from mpi4py import MPI

    if "receive" in state:
        for array in state["receive"].arrays:
            array.fill(0)  # so that verification sees this repetition's delivery, not an earlier one's
    comm.Barrier()
    if method == "osu":
        arrays = buffers_of(source) if comm.rank == ROOT else state["receive"].arrays
        elapsed = bcast_osu(comm, arrays, *state["osu_counts"])
        return elapsed, source if comm.rank == ROOT else assemble(state["receive"].meta, arrays)
    start = MPI.Wtime()
    received = BROADCASTS[method](comm, source, state)
    mine = MPI.Wtime() - start
    return comm.allreduce(mine, op=MPI.MAX), received


def probe_broadcast(comm, method, source, state, rss_baseline) -> tuple[int, int]:
    """One untimed broadcast with the memory probes on; returns this rank's (tracemalloc peak, RSS HWM delta).

    Tracing is started here and stopped after, so that no timed broadcast runs under tracemalloc
    (tracing slows every Python allocation: docs/notes/kernels.md, section 3).
    """
    import tracemalloc

    # The heap is not trimmed here, although freed pages an earlier broadcast left resident count in this probe
    # (a late receiver's unexpected-message copy, under load): a trim before every probe made the timed
    # broadcasts of small pickle points 1.2-1.4x slower (docs/notes/kernels.md, section 13).
    tracemalloc.start()
    reset_rss_peak()
    received = PROBE_BROADCASTS[method](comm, source, state)
    traced_peak = tracemalloc.get_traced_memory()[1]
    rss_delta = rss_peak_bytes() - rss_baseline
    del received
    tracemalloc.stop()
    return traced_peak, rss_delta


def broadcast_once(comm, method, source, state, expected, rss_baseline, corrupt=False):
    """Time one broadcast, verify it, then measure memory in a probe broadcast.

    Returns (elapsed_s, bytes, extras), the same on every rank.
    """
    elapsed, received = timed_broadcast(comm, method, source, state)
    error = None
    if comm.rank != ROOT:
        if corrupt and comm.rank == comm.size - 1:
            flip_one_byte(received)
        error = verify(received, expected)
    del received
    traced_peak, rss_delta = probe_broadcast(comm, method, source, state, rss_baseline)
    per_rank = comm.allgather((traced_peak, rss_delta, error))
    receivers = [row for rank, row in enumerate(per_rank) if rank != ROOT]
    errors = [f"rank {rank}: {row[2]}" for rank, row in enumerate(per_rank) if row[2]]
    payload = expected["payload_bytes"]
    extras = {
        "payload_bytes": payload,
        "tracemalloc_peak_bytes": max(row[0] for row in receivers),
        "rss_hwm_delta_bytes": max(row[1] for row in receivers),
        "root_tracemalloc_peak_bytes": per_rank[ROOT][0],
        "root_rss_hwm_delta_bytes": per_rank[ROOT][1],
        "buffers_reused": method in IN_PLACE,
        "window_setup_s": state["window_setup_s"],
        "verified": not errors,
    }
    if method == "osu":
        extras["iterations"], extras["skip"] = state["osu_counts"]
        extras["timed_s"] = elapsed * extras["iterations"]
    if expected["meta"]["kind"] == "sparse":
        extras["nnz"] = expected["meta"]["nnz"]
    if errors:
        extras.update(ok=False, error="verification failed: " + "; ".join(errors))
    return elapsed, payload * (comm.size - 1), extras


def verify(received, expected) -> str | None:
    """None when the receiver holds the root's array, else what differs."""
    meta = expected["meta"]
    if meta["kind"] == "dense":
        if not isinstance(received, np.ndarray):
            return f"received a {type(received).__name__}, not an ndarray"
    elif getattr(received, "format", None) != "csr":
        return f"received a {type(received).__name__}, not a CSR matrix"
    got = metadata_of(received)
    if (
        tuple(got["shape"]) != tuple(meta["shape"])
        or got.get("nnz") != meta.get("nnz")
        or got["dtype"] != meta["dtype"]
    ):
        return f"metadata {got} differs from the root's {meta}"
    crc = checksum(received)
    if crc != expected["crc32"]:
        return f"CRC-32 {crc:#010x} differs from the root's {expected['crc32']:#010x}"
    return None


def flip_one_byte(received) -> None:
    """Test hook: damage the receive so that verification must catch it."""
    for array in buffers_of(received):
        if array.size:
            view = array.reshape(-1).view(np.uint8)
            view[view.size // 2] ^= 0xFF
            return


def _named(prefix: str, arrays: list[np.ndarray]) -> dict:
    if len(arrays) == 1:
        return {prefix: arrays[0]}
    return {f"{prefix}.{name}": array for name, array in zip(("data", "indices", "indptr"), arrays, strict=True)}


def buffer_memory_facts(comm, mode: str, source, state) -> dict | None:
    """On the root, memory_facts of its source buffers and of the first receiver's receive buffers; elsewhere None."""
    if comm.rank == ROOT:
        facts = memory.memory_facts(mode, _named("source", buffers_of(source)))
    receiver = None
    if comm.rank == 1 and "receive" in state:
        receiver = memory.memory_facts(mode, _named("receive", state["receive"].arrays))["buffers"]
    receiver = comm.bcast(receiver, root=1)
    if comm.rank != ROOT:
        return None
    facts["buffers"].update({f"rank 1 {name}": value for name, value in (receiver or {}).items()})
    return facts


def measure_task(comm, task, group_meta=None):
    """One point: its arrays, windows and memory baseline are its own (made here, released on return), so that
    an earlier point of the launch is neither in this one's baseline nor in its probes."""
    import tracemalloc

    from movebench.core.runner import release_memory, run_mpi

    point, seed = task.point, task.settings["seed"]
    kind, method, dtype = point["kind"], point["method"], point["dtype"]
    shape = parse_shape(point["shape"])
    corrupt = task.settings.get("fault") == "corrupt-receive"
    if comm.size != point["ranks"] or comm.size < 2:
        raise SystemExit(f"movebench.bcast: the point has {point['ranks']} ranks (>= 2) but {comm.size} started")

    # Imported before the memory baseline, so that their pages do not count as the broadcast's.
    from mpi4py.util import pkl5  # noqa: F401

    if kind == "sparse":
        import scipy.sparse  # noqa: F401
    memory_mode = point.get("memory_mode", "4k")
    if comm.rank == ROOT:
        if kind == "dense":
            generated = make_dense(shape, dtype, seed)
        else:
            generated = make_csr(shape, point["density"], dtype, seed)
        source = place(generated, memory_mode)
        del generated
        expected = {
            "meta": metadata_of(source),
            "crc32": checksum(source),
            "payload_bytes": sum(a.nbytes for a in buffers_of(source)),
        }
    else:
        source = expected = None
    # The generated array went back to malloc: after an earlier point of the launch freed a large block, glibc
    # serves blocks this large from its heap (its mmap threshold rises) and keeps them resident when freed, and a
    # probe reusing those pages would not grow RSS. Handed back, the baseline is this point's alone.
    release_memory()
    # tracemalloc's own tables live in RSS: on at the baseline, as in every probe, so that they do not count
    # as the broadcast's; off again, as in every timed broadcast.
    tracemalloc.start()
    rss_baseline = rss_bytes()
    tracemalloc.stop()
    expected = comm.bcast(expected, root=ROOT)
    state = setup(comm, method, source, memory_mode)

    def measure(rep, warmup):
        return broadcast_once(comm, method, source, state, expected, rss_baseline, corrupt)

    extra_meta = {
        "buffers_reused": method in IN_PLACE,
        "rma_sync": "fence" if method == "rma" else None,
        "payload_bytes": expected["payload_bytes"],
        "nnz": expected["meta"].get("nnz"),
        "memory_probe": "an untimed broadcast after each timed repetition",
        "memory": buffer_memory_facts(comm, memory_mode, source, state),
        **(group_meta or {}),
    }
    try:
        run_mpi(comm, task, measure, extra_meta)
    finally:
        for window in state["windows"]:
            window.Free()


#: passes of the rehearsal before a launch's first point (docs/notes/kernels.md, section 13)
REHEARSALS = 3


def rehearse(comm, task) -> None:
    """The launch's first point, as a 4x4 dense array, measured REHEARSALS times and thrown away before any point is.

    A launch's first broadcast point showed 1.1 MB more RSS high-water mark per receiver than the same point later
    in the launch (the process's first pass through the code: lazy imports, the heap's first growth), and a launch
    draws its order anew: the memory a point reported depended on its place (docs/notes/kernels.md, section 12).
    After one pass the next point still grew the brk heap by 140-270 kB more than later points did, and after two
    still did with some sizes of the environment: three passes held at every size tried (section 13).
    """
    import dataclasses
    import tempfile

    from movebench.core.runner import release_memory

    with tempfile.TemporaryDirectory(prefix="movebench-bcast-rehearsal-") as folder:
        point = {**task.point, "kind": "dense", "shape": "4x4"}
        rehearsal = dataclasses.replace(task, point=point, out=f"{folder}/records.jsonl", meta=f"{folder}/meta.json")
        for _ in range(REHEARSALS):
            measure_task(comm, rehearsal)
            release_memory()


def main(argv=None):
    from mpi4py import MPI

    from movebench.core.runner import each_task

    comm = MPI.COMM_WORLD
    for task, group_meta in each_task(argv, rehearse=lambda first: rehearse(comm, first)):
        measure_task(comm, task, group_meta)


if __name__ == "__main__":
    main()
