"""shuffle: network streaming between MPI ranks (definitions: kernel.py's docstring)."""

from __future__ import annotations

from movebench.core.sizes import expand_sizes
from movebench.spec import BANDWIDTH, ELAPSED, HIGHER, LOWER, Axis, Family, Measure, Setting

PATTERNS = ("uni", "bidi", "alltoall", "shuffle")
PAIRED = ("uni", "bidi")


def _is_shuffle(point: dict) -> bool:
    return point["pattern"] == "shuffle"


class Shuffle(Family):
    name = "shuffle"
    variant = "pattern"
    axes = (
        Axis("pattern", "patterns"),
        Axis("nodes", "nodes"),
        Axis("ranks", "ranks"),
        Axis("message_size", "message_sizes", expand_sizes),
        Axis("window", "windows"),
        Axis("skew", "skew", lambda values: [float(v) for v in values], when=_is_shuffle),
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
        paired = [p for p in section["patterns"] if p in PAIRED]
        for i, ranks in enumerate(section["ranks"]):
            if paired and ranks % 2:
                problems.append((f"ranks[{i}]", ranks, f"patterns {', '.join(paired)} pair ranks (i, i + n/2): "
                                 "use an even count such as 2, 4 or 8"))
        if section["tuple_size"] % 8:
            problems.append(("tuple_size", section["tuple_size"], "must be a multiple of 8 (an 8-byte key, then "
                             "8-byte payload words), e.g. 64"))
        return problems

    def node_memory_bytes(self, point, section):
        per_rank = 2 * point["message_size"] * max(point["window"], 1) * max(point["ranks"] - 1, 1)
        if point["pattern"] == "shuffle":
            per_rank = 4 * section["tuples_per_rank"] * section["tuple_size"]
        ranks_per_node = -(-point["ranks"] // point["nodes"])
        return 512 * 2**20 + ranks_per_node * (100 * 2**20 + per_rank)


FAMILY = Shuffle()
