"""shuffle: network streaming between MPI ranks (definitions: kernel.py's docstring)."""

from __future__ import annotations

import math

from movebench.core.sizes import expand_sizes
from movebench.spec import (
    BANDWIDTH,
    ELAPSED,
    ENV,
    HIGHER,
    LOWER,
    MEMORY_MODE,
    MPI_THREAD_LEVEL,
    STACK,
    Axis,
    Family,
    Measure,
    Setting,
)

PATTERNS = ("uni", "bidi", "alltoall", "shuffle")
PAIRED = ("uni", "bidi")
MiB = 2**20
# One rank before any buffer (interpreter, numpy, mpi4py, MPICH) and a node's share for mpiexec, Hydra's
# proxy and MPICH's shared-memory segment, both planned with a margin over what was measured
# (docs/notes/hardening.md, "Admission").
BASE_RANK_BYTES = 100 * MiB
BASE_NODE_BYTES = 512 * MiB
# MPICH copies a message that arrives before its receive is posted into an unexpected-message buffer
# when it goes eagerly (up to the eager limit, some KiB to 64 KiB); a window of them per peer can wait.
EAGER_BYTES = 64 * 1024
# The kernel's Zipf keys are drawn from 1 .. 2**20 - 1 (kernel.make_tuples).
ZIPF_KEYS = (1 << 20) - 1


def zipf_top_share(skew: float, keys: int = ZIPF_KEYS) -> float:
    """The most frequent key's share of the draws: 1 / sum_k k**-skew (the sum's tail by its integral)."""
    head = min(keys, 10_000)
    total = sum(k**-skew for k in range(1, head + 1))
    if keys > head:
        lo, hi = head + 0.5, keys + 0.5
        total += math.log(hi / lo) if skew == 1 else (hi ** (1 - skew) - lo ** (1 - skew)) / (1 - skew)
    return 1 / total


def rank_bytes(point: dict, section: dict) -> int:
    """Planned peak bytes of the busiest rank, receive side included.

    Streams reuse one send and one receive buffer per peer (kernel.main), so a window adds no buffer
    of the kernel's; what it adds is MPICH's unexpected-message copies, window x min(size, eager
    limit) per peer. shuffle: the rank's tuples, their partitioned copy, what it receives (the busiest
    receiver gets the hottest key's share of every rank's tuples when keys are skewed), a checksum
    temporary as large as the bigger of the two, 32 bytes per tuple of hash and sort temporaries.
    """
    size, window, ranks = point["message_size"], point["window"], point["ranks"]
    pattern, peers = point["pattern"], max(point["ranks"] - 1, 1)
    if pattern in PAIRED:
        return 2 * size + window * min(size, EAGER_BYTES)
    if pattern == "alltoall":
        return ranks * size + window * min(size, EAGER_BYTES) * peers
    tuples, tuple_size = section["tuples_per_rank"], section["tuple_size"]
    sent = tuples * tuple_size
    skew = point.get("skew", 0.0)
    share = zipf_top_share(skew) if skew > 0 else 0.0
    busiest = ranks * tuples * (share + (1 - share) / ranks) * 1.05  # 5%: the uniform draw's spread
    received = int(busiest) * tuple_size
    zipf_table = 16 * MiB if skew > 0 else 0
    return 2 * sent + received + max(sent, received) + 32 * tuples + zipf_table + window * min(size, EAGER_BYTES)


def _is_shuffle(point: dict) -> bool:
    return point["pattern"] == "shuffle"


class Shuffle(Family):
    name = "shuffle"
    variant = "pattern"
    # what one launch fixes (the runtime's start, the MPI library and its thread level)
    launch_group_axes = ("nodes", "ranks", "mpi_thread_level", "stack", "env")
    axes = (
        Axis("pattern", "patterns"),
        Axis("nodes", "nodes"),
        Axis("ranks", "ranks"),
        Axis("message_size", "message_sizes", expand_sizes),
        Axis("window", "windows"),
        Axis("skew", "skew", lambda values: [float(v) for v in values], when=_is_shuffle),
        MPI_THREAD_LEVEL,
        MEMORY_MODE,
        STACK,
        ENV,
    )
    settings = (
        Setting("iterations"),
        Setting("repetition_time"),
        Setting("tuples_per_rank", when=_is_shuffle),
        Setting("tuple_size", when=_is_shuffle),
        Setting("seed", when=_is_shuffle),
    )
    measures = (
        BANDWIDTH,
        ELAPSED,
        Measure("efficiency", "1", HIGHER, "share of the peak bidi bandwidth"),
        Measure("partition_s", "s", LOWER, "shuffle: partition time"),
        Measure("exchange_s", "s", LOWER, "shuffle: exchange time"),
        Measure("imbalance", "1", LOWER, "shuffle: max / mean bytes received"),
    )

    def check(self, section, campaign):
        problems = []
        try:
            sizes = expand_sizes(section["message_sizes"])
        except (ValueError, KeyError) as exc:
            return [("message_sizes", section["message_sizes"], str(exc))]
        if any(s < 1 for s in sizes):
            problems.append(("message_sizes", section["message_sizes"], "every size must be at least 1 byte"))
        if all(p in PAIRED for p in section["patterns"]):
            for i, ranks in enumerate(section["ranks"]):
                if ranks % 2:
                    problems.append((f"ranks[{i}]", ranks, f"patterns {', '.join(section['patterns'])} pair ranks "
                                     "(i, i + n/2): use an even count such as 2, 4 or 8 (or add alltoall or shuffle, "
                                     "which run at any count)"))
        if section["tuple_size"] % 8:
            problems.append(("tuple_size", section["tuple_size"], "must be a multiple of 8 (an 8-byte key, then "
                             "8-byte payload words), e.g. 64"))
        return problems

    def constraint(self, point):
        # the thesis' cluster sizes are 5, 6 and 7 nodes: all-to-all and the shuffle run at any count, uni and bidi
        # only where ranks pair up; a count no pattern of the section can run at is refused (config validation)
        if point["pattern"] in PAIRED and point["ranks"] % 2:
            return (f"pattern {point['pattern']} pairs ranks (i, i + n/2): an odd count runs alltoall and shuffle "
                    "only; use an even count such as 2, 4 or 8")
        return super().constraint(point)

    def node_memory_bytes(self, point, section):
        ranks_per_node = -(-point["ranks"] // point["nodes"])
        return BASE_NODE_BYTES + ranks_per_node * (BASE_RANK_BYTES + rank_bytes(point, section))


FAMILY = Shuffle()
