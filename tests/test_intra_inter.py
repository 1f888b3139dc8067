"""Intra- and inter-node figures side by side, and an efficiency that compares like with like (shuffle's report)."""

import pandas as pd
import pytest

from movebench.families.shuffle.report import REPORT, intra_inter, placement_labels

MiB = 1 << 20


def rows(variant, nodes, window, bws, size=MiB, ranks=2):
    return [{"family": "shuffle", "variant": variant, "pattern": variant, "nodes": nodes, "ranks": ranks,
             "message_size": size, "window": window, "rep": rep, "warmup": False, "ok": True, "bandwidth_Bps": bw}
            for rep, bw in enumerate(bws)]


def test_efficiency_at_two_nodes_divides_by_the_bidi_peak_at_two_nodes():
    table = REPORT.derive(pd.DataFrame(rows("bidi", 1, 64, [20e9] * 3) + rows("bidi", 2, 64, [0.24e9] * 3)
                                + rows("uni", 1, 64, [10e9] * 3) + rows("uni", 2, 64, [0.12e9] * 3)))
    uni = table[table["variant"] == "uni"]
    assert uni[uni["nodes"] == 1]["efficiency"].tolist() == pytest.approx([0.5] * 3)
    # against the 1-node peak it would be 0.006: shared memory is not the network's bound
    assert uni[uni["nodes"] == 2]["efficiency"].tolist() == pytest.approx([0.5] * 3)


def summary(entries):
    return pd.DataFrame([{"pattern": p, "nodes": n, "ranks": r, "message_size": s, "window": w, "skew": k,
                          "measure": "bandwidth_Bps", "median": m} for p, n, r, s, w, k, m in entries])


def test_side_by_side_takes_the_best_window_per_node_count_and_the_ratio_to_one_node():
    nan = float("nan")
    bw = summary([("uni", 1, 2, MiB, 8, nan, 8e9), ("uni", 1, 2, MiB, 64, nan, 10e9),
                  ("uni", 2, 2, MiB, 8, nan, 0.10e9), ("uni", 2, 2, MiB, 64, nan, 0.12e9),
                  ("shuffle", 1, 2, MiB, 8, 0.0, 4e9), ("shuffle", 2, 2, MiB, 8, 0.0, 0.1e9),
                  ("alltoall", 2, 4, MiB, 8, nan, 0.2e9)])
    sides = intra_inter(bw).set_index(["pattern", "ranks"])
    assert sides.loc[("uni", 2), "GB/s, 1 node"] == pytest.approx(10.0)
    assert sides.loc[("uni", 2), "GB/s, 2 nodes"] == pytest.approx(0.12)
    assert sides.loc[("uni", 2), "2 nodes / 1 node"] == pytest.approx(0.012)
    assert sides.loc[("shuffle", 2), "2 nodes / 1 node"] == pytest.approx(0.025)  # skew kept, NaN or not
    assert pd.isna(sides.loc[("alltoall", 4), "GB/s, 1 node"])  # no 1-node twin: shown, not invented


def test_one_node_count_has_no_side_by_side():
    assert intra_inter(summary([("uni", 1, 2, MiB, 8, float("nan"), 8e9)])).empty


def test_thread_level_and_memory_mode_are_kept_apart():
    def at(level, mode, variant, bw):
        return [{**r, "mpi_thread_level": level, "memory_mode": mode} for r in rows(variant, 1, 64, [bw] * 3)]

    table = REPORT.derive(pd.DataFrame(at("single", "4k", "bidi", 8e9) + at("multiple", "4k", "bidi", 4e9)
                                + at("single", "4k", "uni", 4e9) + at("multiple", "4k", "uni", 4e9)
                                + at("multiple", "thp", "bidi", 2e9) + at("multiple", "thp", "uni", 2e9)))
    uni = table[table["variant"] == "uni"].groupby(["mpi_thread_level", "memory_mode"])["efficiency"].first()
    # each divided by the bidi peak at its own thread level and memory mode
    assert uni.to_dict() == pytest.approx({("multiple", "4k"): 1.0, ("multiple", "thp"): 1.0, ("single", "4k"): 0.5})
    frame = pd.DataFrame({"nodes": [1, 1], "ranks": [2, 2], "mpi_thread_level": ["single", "multiple"],
                          "memory_mode": ["4k", "4k"]})
    assert placement_labels(frame) == ["2 ranks, 1 node, single", "2 ranks, 1 node, multiple"]
