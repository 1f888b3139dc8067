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
  passive-target Get wait for the target to enter MPI anyway. Measured here
  (200 MB, MPICH 5.0.2, medians of 5): Fence 0.16 s, Lock/Unlock 0.18 s,
  Lock_all/Flush 0.12 s at 2 ranks; 1.6, 1.2 and 1.7 s at 4 ranks: alike
  within the 20-50% noise, so the simpler collective form was kept.

Receivers of sparse arrays end each repetition holding a `scipy.sparse.csr_array`
(in-place methods wrap their reused buffers without copying), as pickle's do.

Measures per repetition:
- time: every rank waits at a barrier, then times its own part with `MPI.Wtime`;
  `elapsed_s` is the largest of these (the last rank's finish, from the
  barrier-aligned start). It includes the metadata exchange and, for pickle and
  pkl5, the pickling and unpickling (that is what those methods cost).
- bytes = payload bytes x (ranks - 1), payload = the array's bytes (dense) or
  data + indices + indptr bytes (CSR); bandwidth = bytes / elapsed_s.
- memory, per rank, then the largest over the receivers (`root_*`: the root's):
  `tracemalloc_peak_bytes`: the peak of memory allocated through Python's
  allocators during the repetition (numpy reports its array data to
  tracemalloc; pickle streams and bytearrays are Python objects) above the level
  at the repetition's start. It leaves out receive buffers allocated before the
  repetition and MPI's own C allocations: the study's "allocated" figure.
  `rss_hwm_delta_bytes`: the resident-set high-water mark during the repetition
  (VmHWM of /proc/self/status, reset to the current RSS by writing 5 to
  /proc/self/clear_refs before each repetition) minus the rank's RSS before any
  of the point's arrays existed on it (the root: after generating its source).
  It counts every resident page the broadcast costs a rank, reused receive
  buffers included, and MPI's buffers too. The report shows this one as the
  peak extra memory.
- verification, after the timed region: every receiver's CRC-32 of its received
  buffers (and shape, dtype, nnz) must equal the root's; a mismatch makes the
  repetition `ok = false` with the failing ranks named.

Where this differs from the reference study (Dagger.jl, 16 ranks): the time is
the slowest rank's from a common barrier, not the root's; memory is measured per
rank as above rather than Julia's allocation count.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

METHODS = ("pickle", "buffer", "pkl5", "p2p", "rma")
IN_PLACE = ("buffer", "p2p", "rma")
ROOT = 0
_TAG_META, _TAG_DATA = 200, 201


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


def allocate(meta: dict) -> list[np.ndarray]:
    """Receive buffers for `meta`, written once so that no page is first touched while timed."""
    if meta["kind"] == "dense":
        arrays = [np.empty(meta["shape"], dtype=meta["dtype"])]
    else:
        arrays = [
            np.empty(meta["nnz"], dtype=meta["dtype"]),
            np.empty(meta["nnz"], dtype=meta["index_dtype"]),
            np.empty(meta["shape"][0] + 1, dtype=meta["index_dtype"]),
        ]
    for array in arrays:
        array.fill(0)
    return arrays


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

    def __init__(self):
        self.meta, self.arrays = None, None

    def for_meta(self, meta: dict) -> list[np.ndarray]:
        if meta != self.meta:
            self.meta, self.arrays = meta, allocate(meta)
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


BROADCASTS = {"pickle": bcast_pickle, "buffer": bcast_buffer, "pkl5": bcast_pkl5, "p2p": bcast_p2p, "rma": bcast_rma}


def setup(comm, method: str, source) -> dict:
    """What a method keeps across repetitions: receive buffers, windows, the pkl5 communicator."""
    from mpi4py import MPI
    from mpi4py.util import pkl5

    state = {"windows": [], "window_setup_s": 0.0}
    if method == "pkl5":
        state["pkl5"] = pkl5.Intracomm(comm)
    if method in IN_PLACE and comm.rank != ROOT:
        state["receive"] = ReceiveBuffers()
    meta = comm.bcast(metadata_of(source) if comm.rank == ROOT else None, root=ROOT)
    if "receive" in state:
        state["receive"].for_meta(meta)
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


def broadcast_once(comm, method, source, state, expected, rss_baseline, corrupt=False):
    """Time one broadcast, then measure and verify it; returns (elapsed_s, bytes, extras) on every rank."""
    import tracemalloc

    from mpi4py import MPI

    reset_rss_peak()
    tracemalloc.reset_peak()
    traced_start = tracemalloc.get_traced_memory()[0]
    comm.Barrier()
    start = MPI.Wtime()
    received = BROADCASTS[method](comm, source, state)
    mine = MPI.Wtime() - start
    traced_peak = tracemalloc.get_traced_memory()[1] - traced_start
    rss_delta = rss_peak_bytes() - rss_baseline
    elapsed = comm.allreduce(mine, op=MPI.MAX)
    error = None
    if comm.rank != ROOT:
        if corrupt and comm.rank == comm.size - 1:
            flip_one_byte(received)
        error = verify(received, expected)
    del received
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


def main(argv=None):
    import tracemalloc

    from mpi4py import MPI

    from movebench.runner import load_task, run_mpi

    task = load_task(argv)
    point, seed = task.point, task.settings["seed"]
    kind, method, dtype = point["kind"], point["method"], point["dtype"]
    shape = parse_shape(point["shape"])
    corrupt = task.settings.get("fault") == "corrupt-receive"
    comm = MPI.COMM_WORLD
    if comm.size != point["ranks"] or comm.size < 2:
        raise SystemExit(f"movebench.bcast: the point has {point['ranks']} ranks (>= 2) but {comm.size} started")

    # Imported before the memory baseline, so that their pages do not count as the broadcast's.
    from mpi4py.util import pkl5  # noqa: F401

    if kind == "sparse":
        import scipy.sparse  # noqa: F401
    if comm.rank == ROOT:
        source = make_dense(shape, dtype, seed) if kind == "dense" else make_csr(shape, point["density"], dtype, seed)
        expected = {
            "meta": metadata_of(source),
            "crc32": checksum(source),
            "payload_bytes": sum(a.nbytes for a in buffers_of(source)),
        }
    else:
        source = expected = None
    # tracemalloc's own tables live in RSS: start it before the baseline so they do not count as the broadcast's.
    tracemalloc.start()
    rss_baseline = rss_bytes()
    expected = comm.bcast(expected, root=ROOT)
    state = setup(comm, method, source)

    def measure(rep, warmup):
        return broadcast_once(comm, method, source, state, expected, rss_baseline, corrupt)

    extra_meta = {
        "buffers_reused": method in IN_PLACE,
        "rma_sync": "fence" if method == "rma" else None,
        "payload_bytes": expected["payload_bytes"],
        "nnz": expected["meta"].get("nnz"),
    }
    try:
        run_mpi(comm, task, measure, extra_meta)
    finally:
        for window in state["windows"]:
            window.Free()


if __name__ == "__main__":
    main()
