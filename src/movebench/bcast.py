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

import math
import re
import zlib
from pathlib import Path

import numpy as np

from movebench.core import stats
from movebench.family import Family

KINDS = ("dense", "sparse")
METHODS = ("pickle", "buffer", "pkl5", "p2p", "rma")
IN_PLACE = ("buffer", "p2p", "rma")
DTYPES = ("float64", "float32", "int64", "int32")
ROOT = 0
_TAG_META, _TAG_DATA = 200, 201
# One rank's RSS before any data: interpreter, numpy, scipy, mpi4py, MPICH. 66 MiB measured
# here; planned at 160 MiB to leave room for MPI's buffers and RMA windows (a few MiB) and
# for other platforms' larger libraries.
BASE_RANK_BYTES = 160 * 2**20
_MEMINFO = Path("/proc/meminfo")


# --- what a point moves and what it needs ---


def shape_text(shape) -> str:
    return "x".join(str(int(n)) for n in shape)


def parse_shape(text) -> tuple[int, ...]:
    """Inverse of shape_text; a 1-D shape comes back from a point path as an int."""
    return tuple(int(n) for n in str(text).split("x"))


def index_dtype(shape, nnz: int) -> np.dtype:
    """scipy's choice for CSR indices: int32 while every index and nnz fits."""
    return np.dtype(np.int32 if max(nnz, *shape) < 2**31 else np.int64)


def payload_bytes(kind: str, shape, dtype: str, density: float | None) -> int:
    """Bytes broadcast to each receiver; for sparse, the expected nnz = density x rows x cols."""
    itemsize = np.dtype(dtype).itemsize
    if kind == "dense":
        return math.prod(shape) * itemsize
    rows, cols = shape
    nnz = round(density * rows * cols)
    index = index_dtype(shape, nnz).itemsize
    return nnz * (itemsize + index) + (rows + 1) * index


def rank_bytes(method: str, payload: int) -> tuple[int, int]:
    """Planned peak bytes of (the root, one receiver), the root's source included.

    pickle: the root holds its source, the pickle stream and its own unpickled
    copy; a receiver the received stream and the object unpickled from it.
    pkl5: the root's buffers go out of band (no copy); a receiver's new buffers.
    In-place methods: the source, and one reused receive buffer per receiver.
    """
    if method == "pickle":
        return BASE_RANK_BYTES + 3 * payload, BASE_RANK_BYTES + 2 * payload
    return BASE_RANK_BYTES + payload, BASE_RANK_BYTES + payload


def node_bytes(point: dict, payload: int) -> int:
    """Planned bytes on the busiest node: the root's node, with ceil(ranks / nodes) ranks."""
    root, receiver = rank_bytes(point["method"], payload)
    per_node = -(-point["ranks"] // point["nodes"])
    return root + (per_node - 1) * receiver


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is no such file)."""
    try:
        text = _MEMINFO.read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+)\s+kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


class Bcast(Family):
    name = "bcast"
    point_keys = ("kind", "method", "nodes", "ranks", "shape", "density", "dtype")
    summary_measures = (
        "tracemalloc_peak_bytes",
        "rss_hwm_delta_bytes",
        "root_tracemalloc_peak_bytes",
        "root_rss_hwm_delta_bytes",
    )

    def check(self, section, campaign):
        problems = []
        if "sparse" in section["kinds"]:
            hint = "sparse arrays are 2-D CSR matrices: give [rows, columns], e.g. [10000, 10000]"
            problems += [(f"shapes[{i}]", s, hint) for i, s in enumerate(section["shapes"]) if len(s) != 2]
        for i, ranks in enumerate(section["ranks"]):
            hint = f"more nodes than the {ranks} ranks of ranks[{i}]: each node needs at least one rank"
            problems += [("nodes", nodes, hint) for nodes in section["nodes"] if nodes > ranks]
        return problems or self.memory_problems(section, campaign)

    def memory_problems(self, section, campaign):
        """Each shape whose hungriest point plans more than memory_fraction of this machine's MemAvailable."""
        available = mem_available()
        if available is None:
            return []
        fraction = campaign.get("memory_fraction", 0.8)
        budget = int(fraction * available)
        problems = []
        for i, shape in enumerate(section["shapes"]):
            points = [p for p in self.points(section, campaign) if p["shape"] == shape_text(shape)]
            if not points:
                continue
            worst = max(points, key=lambda p: node_bytes(p, self.payload(p)))
            need = node_bytes(worst, self.payload(worst))
            if need > budget:
                density = f" at density {worst['density']}" if worst["kind"] == "sparse" else ""
                what = f"{worst['kind']} {worst['dtype']}{density}, method {worst['method']}"
                where = f"{worst['ranks']} ranks on {worst['nodes']} node(s)"
                hint = (
                    f"{what}, {where} plans {_gib(need)} on one node (payload {_gib(self.payload(worst))}; "
                    f"bcast.rank_bytes), more than campaign.memory_fraction {fraction} x MemAvailable "
                    f"{_gib(available)} = {_gib(budget)}: use a smaller shape, fewer ranks or more nodes"
                )
                problems.append((f"shapes[{i}]", shape, hint))
        return problems

    @staticmethod
    def payload(point: dict) -> int:
        return payload_bytes(point["kind"], parse_shape(point["shape"]), point["dtype"], point.get("density"))

    def points(self, section, campaign):
        points = []
        for kind in section["kinds"]:
            for method in section["methods"]:
                for nodes in section["nodes"]:
                    for ranks in section["ranks"]:
                        if nodes > ranks:
                            continue
                        for shape in section["shapes"]:
                            for density in section["densities"] if kind == "sparse" else [None]:
                                for dtype in section["dtypes"]:
                                    point = {
                                        "kind": kind,
                                        "method": method,
                                        "nodes": nodes,
                                        "ranks": ranks,
                                        "shape": shape_text(shape),
                                    }
                                    if density is not None:
                                        point["density"] = float(density)
                                    point["dtype"] = dtype
                                    points.append(point)
        return points

    def kernel_args(self, point, section, campaign):
        args = [
            "--kind",
            point["kind"],
            "--method",
            point["method"],
            "--shape",
            shape_text(parse_shape(point["shape"])),
            "--dtype",
            point["dtype"],
            "--seed",
            str(section["seed"]),
            "--nodes",
            str(point["nodes"]),
        ]
        if point["kind"] == "sparse":
            args += ["--density", repr(float(point["density"]))]
        return args

    def memory_mb(self, point, section):
        return 256 + node_bytes(point, self.payload(point)) // 2**20

    def report_context(self, table, summary, campaign):
        return report_context(table)


FAMILY = Bcast()


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


# --- the report section ---

CASE = ["kind", "shape", "density", "dtype", "nodes", "ranks"]
_MiB = 2**20
MEMORY_PLOT_MIN_BYTES = 4 * _MiB


def method_medians(table):
    """One row per case and method: medians of the counted repetitions, and the cold (first warm-up) time."""
    import pandas as pd

    table = table.assign(density=table["density"] if "density" in table else float("nan"))
    counted = table[~table["warmup"] & table["ok"]]
    medians = (
        counted.groupby(CASE + ["method"], dropna=False, sort=True)
        .agg(
            n=("elapsed_s", "size"),
            time_s=("elapsed_s", "median"),
            bandwidth_Bps=("bandwidth_Bps", "median"),
            payload_bytes=("payload_bytes", "first"),
            rss_hwm_delta_bytes=("rss_hwm_delta_bytes", "median"),
            tracemalloc_peak_bytes=("tracemalloc_peak_bytes", "median"),
            root_rss_hwm_delta_bytes=("root_rss_hwm_delta_bytes", "median"),
            buffers_reused=("buffers_reused", "first"),
        )
        .reset_index()
    )
    intervals = counted.groupby(CASE + ["method"], dropna=False)["elapsed_s"].apply(
        lambda times: pd.Series(stats.summarize(times.tolist()))[["ci_low", "ci_high"]]
    )
    medians = medians.merge(intervals.unstack().reset_index(), on=CASE + ["method"], how="left")
    cold = table[table["warmup"] & (table["rep"] == 0)].groupby(CASE + ["method"], dropna=False)["elapsed_s"]
    medians = medians.merge(cold.first().rename("cold_s").reset_index(), on=CASE + ["method"], how="left")
    pickle = medians[medians["method"] == "pickle"][CASE + ["time_s", "ci_low", "ci_high"]].rename(
        columns={"time_s": "pickle_s", "ci_low": "pickle_ci_low", "ci_high": "pickle_ci_high"}
    )
    medians = medians.merge(pickle, on=CASE, how="left")
    medians["speedup_vs_pickle"] = medians["pickle_s"] / medians["time_s"]
    # A difference the noise cannot explain: the 95% intervals of the two medians do not overlap.
    medians["clear_vs_pickle"] = (medians["ci_high"] < medians["pickle_ci_low"]) | (
        medians["ci_low"] > medians["pickle_ci_high"]
    )
    medians["receiver_extra_per_payload"] = medians["rss_hwm_delta_bytes"] / medians["payload_bytes"]
    medians["method"] = pd.Categorical(medians["method"], [m for m in METHODS if m in set(medians["method"])])
    return medians.sort_values(CASE + ["method"]).reset_index(drop=True)


def _case_label(row) -> str:
    density = "" if row["kind"] == "dense" else f" d={row['density']:g}"
    return f"{row['kind']} {row['shape']}{density} {row['dtype']}, {row['ranks']} ranks"


def _memory_cell(row) -> str:
    """MiB, and in payloads where the payload is large enough for the ratio to mean something."""
    text = f"{row['rss_hwm_delta_bytes'] / _MiB:.1f} MiB"
    if row["payload_bytes"] >= MEMORY_PLOT_MIN_BYTES:
        text += f" ({row['receiver_extra_per_payload']:.2f}x)"
    return text


def crossover_rows(medians) -> list[dict]:
    """Per sparse shape, dtype, ranks and in-place method: the lowest density from which it beats pickle.

    A speed-up marked * is clear: the 95% intervals of the two medians do not overlap.
    """
    rows = []
    sparse = medians[(medians["kind"] == "sparse") & medians["pickle_s"].notna()]
    for (shape, dtype, nodes, ranks, method), group in sparse.groupby(
        ["shape", "dtype", "nodes", "ranks", "method"], observed=True, sort=True
    ):
        if method not in IN_PLACE:
            continue
        group = group.sort_values("density")
        wins = (group["speedup_vs_pickle"] > 1).tolist()
        first = next((i for i in range(len(wins)) if all(wins[i:])), None)
        verdict = (
            "loses at every density measured"
            if first is None
            else "wins at every density measured"
            if first == 0
            else f"wins from density {group['density'].iloc[first]:g}"
        )
        rows.append(
            {
                "shape": shape,
                "dtype": dtype,
                "nodes": nodes,
                "ranks": ranks,
                "method": method,
                "in place vs pickle": verdict,
                "speed-up by density": ", ".join(
                    f"{d:g}: {x:.2f}x{'*' if clear else ''}"
                    for d, x, clear in zip(
                        group["density"], group["speedup_vs_pickle"], group["clear_vs_pickle"], strict=True
                    )
                ),
            }
        )
    return rows


def report_context(table) -> dict:
    import pandas as pd

    from movebench import report

    medians = method_medians(table)
    if medians.empty:
        return {}
    shown = medians.assign(case=medians.apply(_case_label, axis=1))
    per_method = pd.DataFrame(
        {
            "case": shown["case"],
            "method": shown["method"].astype(str),
            "n": shown["n"],
            "median time (s)": shown["time_s"],
            "cold first rep (s)": shown["cold_s"],
            "GB/s": shown["bandwidth_Bps"] / 1e9,
            "payload (MiB)": shown["payload_bytes"] / _MiB,
            "receiver peak extra RSS (MiB)": shown["rss_hwm_delta_bytes"] / _MiB,
            "receiver extra / payload": shown["receiver_extra_per_payload"],
            "receiver allocated in rep (MiB, tracemalloc)": shown["tracemalloc_peak_bytes"] / _MiB,
            "root peak extra RSS (MiB)": shown["root_rss_hwm_delta_bytes"] / _MiB,
            "buffers reused": shown["buffers_reused"].astype(bool),
        }
    )
    speedups = shown.pivot_table(index="case", columns="method", values="speedup_vs_pickle", observed=True, sort=False)
    times = shown.pivot_table(index="case", columns="method", values="time_s", observed=True, sort=False)
    clear = shown.pivot(index="case", columns="method", values="clear_vs_pickle").reindex(times.index)
    study = pd.DataFrame(index=times.index)
    for method in times.columns:
        study[f"{method} (s)"] = times[method]
        if method != "pickle" and "pickle" in times.columns:
            marks = clear[method].map(lambda c: "*" if c is True else "")
            study[f"{method} vs pickle"] = speedups[method].map(lambda x: "" if pd.isna(x) else f"{x:.2f}x") + marks
    memory = shown.assign(cell=shown.apply(_memory_cell, axis=1)).pivot(index="case", columns="method", values="cell")
    memory = memory.reindex(times.index)[list(times.columns)]
    memory.columns = [str(m) for m in memory.columns]
    return {
        "figures": _figures(medians, report),
        "per_method": report.html_table(per_method),
        "speedups": report.html_table(study.reset_index()),
        "memory": report.html_table(memory.reset_index()),
        "crossover": report.html_table(pd.DataFrame(crossover_rows(medians)))
        if (medians["kind"] == "sparse").any()
        else "",
    }


def _figures(medians, report) -> list[tuple[str, str]]:
    sns, plt = report.plotting()
    figures = []
    data = medians.assign(method=medians["method"].astype(str), ranks_label=medians["ranks"].map("{} ranks".format))
    dense = data[data["kind"] == "dense"]
    if not dense.empty:
        grid = sns.catplot(
            data=dense,
            x="shape",
            y="time_s",
            hue="method",
            col="ranks_label",
            kind="bar",
            height=3.6,
            aspect=1.2,
            hue_order=[m for m in METHODS if m in set(dense["method"])],
        )
        grid.set(yscale="log", ylabel="median time (s)")
        grid.set_titles("{col_name}")
        figures.append(("Dense arrays: median time per method (log scale)", report.figure_uri(grid.figure)))
    sparse = data[data["kind"] == "sparse"]
    if not sparse.empty:
        grid = sns.relplot(
            data=sparse,
            x="density",
            y="time_s",
            hue="method",
            style="method",
            col="shape",
            row="ranks_label",
            kind="line",
            markers=True,
            height=3.6,
            aspect=1.2,
            hue_order=[m for m in METHODS if m in set(sparse["method"])],
        )
        grid.set(xscale="log", yscale="log", ylabel="median time (s)")
        grid.set_titles("{row_name}, {col_name}")
        figures.append(("Sparse CSR: median time against density (log-log)", report.figure_uri(grid.figure)))
    # Below a few MiB, page and heap granularity (~1 MiB) swamps the ratio.
    large = data[data["payload_bytes"] >= MEMORY_PLOT_MIN_BYTES]
    if not large.empty:
        large = large.assign(case=large.apply(_case_label, axis=1))
        fig, ax = plt.subplots(figsize=(9, 1.5 + 0.6 * large["case"].nunique()))
        sns.barplot(
            data=large,
            y="case",
            x="receiver_extra_per_payload",
            hue="method",
            ax=ax,
            hue_order=[m for m in METHODS if m in set(large["method"])],
        )
        ax.set(xlabel="receiver peak extra RSS / payload", ylabel="")
        ax.legend(title="method", bbox_to_anchor=(1.01, 1), loc="upper left")
        figures.append(
            (
                f"Peak extra memory of a receiver, in payloads (payloads of at least "
                f"{MEMORY_PLOT_MIN_BYTES // _MiB} MiB)",
                report.figure_uri(fig),
            )
        )
    return figures


def main(argv=None):
    import tracemalloc

    from mpi4py import MPI

    from movebench.kernel import argument_parser, run_mpi

    parser = argument_parser("bcast", __doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--method", choices=METHODS, required=True)
    parser.add_argument("--shape", required=True, help="dimensions joined by x, e.g. 10000x10000")
    parser.add_argument("--density", type=float, help="sparse: probability that an entry is nonzero, in (0, 1]")
    parser.add_argument("--dtype", choices=DTYPES, default="float64")
    parser.add_argument("--seed", type=int, default=2024, help="seed of the root's array")
    parser.add_argument("--nodes", type=int, default=1, help="nodes of the point (recorded)")
    parser.add_argument(
        "--corrupt", action="store_true", help="for tests: the last rank damages each receive before verifying it"
    )
    args = parser.parse_args(argv)
    shape = parse_shape(args.shape)
    if args.kind == "sparse" and (len(shape) != 2 or args.density is None or not 0 < args.density <= 1):
        parser.error("sparse needs a 2-D --shape and a --density in (0, 1]")
    comm = MPI.COMM_WORLD
    if comm.size < 2:
        parser.error("a broadcast needs at least 2 ranks")
    params = {
        "kind": args.kind,
        "method": args.method,
        "nodes": args.nodes,
        "ranks": comm.size,
        "shape": shape_text(shape),
    }
    if args.kind == "sparse":
        params["density"] = args.density
    params["dtype"] = args.dtype

    # Imported before the memory baseline, so that their pages do not count as the broadcast's.
    from mpi4py.util import pkl5  # noqa: F401

    if args.kind == "sparse":
        import scipy.sparse  # noqa: F401
    if comm.rank == ROOT:
        source = (
            make_dense(shape, args.dtype, args.seed)
            if args.kind == "dense"
            else make_csr(shape, args.density, args.dtype, args.seed)
        )
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
    state = setup(comm, args.method, source)

    def measure(rep, warmup):
        return broadcast_once(comm, args.method, source, state, expected, rss_baseline, args.corrupt)

    extra_meta = {
        "buffers_reused": args.method in IN_PLACE,
        "rma_sync": "fence" if args.method == "rma" else None,
        "seed": args.seed,
        "payload_bytes": expected["payload_bytes"],
        "nnz": expected["meta"].get("nnz"),
        "corrupt": args.corrupt,
    }
    try:
        run_mpi(comm, args, "bcast", args.method, params, measure, extra_meta)
    finally:
        for window in state["windows"]:
            window.Free()


if __name__ == "__main__":
    main()
