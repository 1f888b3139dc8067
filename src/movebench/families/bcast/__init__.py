"""bcast: one root's dense or sparse array to every rank (definitions: kernel.py's docstring)."""

from __future__ import annotations

import math

from movebench.spec import (
    BANDWIDTH,
    ELAPSED,
    ENV,
    LOWER,
    MEMORY_MODE,
    MPI_THREAD_LEVEL,
    STACK,
    Axis,
    Family,
    Measure,
    Setting,
)

ITEM_BYTES = {"float64": 8, "float32": 4, "int64": 8, "int32": 4}
# One rank's RSS before any data: interpreter, numpy, scipy, mpi4py, MPICH; planned well above what was
# measured, to leave room for MPI's buffers and RMA windows and for other platforms' larger libraries
# (docs/notes/hardening.md, "Admission").
BASE_RANK_BYTES = 160 * 2**20


def shape_text(shape) -> str:
    return "x".join(str(int(n)) for n in shape)


def parse_shape(text) -> tuple[int, ...]:
    return tuple(int(n) for n in str(text).split("x"))


def index_bytes(shape, nnz: int) -> int:
    """scipy's choice for CSR indices: int32 while every index and nnz fits."""
    return 4 if max(nnz, *shape) < 2**31 else 8


def payload_bytes(kind: str, shape, dtype: str, density: float | None) -> int:
    """Bytes broadcast to each receiver; for sparse, the expected nnz = density x rows x cols."""
    itemsize = ITEM_BYTES[dtype]
    if kind == "dense":
        return math.prod(shape) * itemsize
    rows, cols = shape
    nnz = round(density * rows * cols)
    index = index_bytes(shape, nnz)
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


def _is_sparse(point: dict) -> bool:
    return point["kind"] == "sparse"


class Bcast(Family):
    name = "bcast"
    variant = "method"
    # what one launch fixes (the runtime's start, the MPI library and its thread level)
    launch_group_axes = ("nodes", "ranks", "mpi_thread_level", "stack", "env")
    axes = (
        Axis("kind", "kinds"),
        Axis("method", "methods"),
        Axis("nodes", "nodes"),
        Axis("ranks", "ranks"),
        Axis("shape", "shapes", lambda shapes: [shape_text(s) for s in shapes]),
        Axis("density", "densities", lambda values: [float(v) for v in values], when=_is_sparse),
        Axis("dtype", "dtypes"),
        MPI_THREAD_LEVEL,
        MEMORY_MODE,
        STACK,
        ENV,
    )
    settings = (Setting("seed"),)
    measures = (
        BANDWIDTH,
        ELAPSED,
        Measure("tracemalloc_peak_bytes", "B", LOWER, "receiver's Python allocations (peak)"),
        Measure("rss_hwm_delta_bytes", "B", LOWER, "receiver's peak extra resident memory"),
        Measure("root_tracemalloc_peak_bytes", "B", LOWER, "root's Python allocations (peak)"),
        Measure("root_rss_hwm_delta_bytes", "B", LOWER, "root's peak extra resident memory"),
    )

    def check(self, section, campaign):
        problems = []
        if "sparse" in section["kinds"]:
            hint = "sparse arrays are 2-D CSR matrices: give [rows, columns], e.g. [10000, 10000]"
            problems += [(f"shapes[{i}]", s, hint) for i, s in enumerate(section["shapes"]) if len(s) != 2]
        return problems

    @staticmethod
    def payload(point: dict) -> int:
        return payload_bytes(point["kind"], parse_shape(point["shape"]), point["dtype"], point.get("density"))

    def node_memory_bytes(self, point, section):
        """The busiest node: the root's, with ceil(ranks / nodes) ranks."""
        root, receiver = rank_bytes(point["method"], self.payload(point))
        per_node = -(-point["ranks"] // point["nodes"])
        return root + (per_node - 1) * receiver


FAMILY = Bcast()
