"""Bandwidth formulas on synthetic timings: what each figure means, checked by hand."""

import pandas as pd
import pytest

from movebench.core.records import record
from movebench.core.timing import iterations_for_duration
from movebench.families.shuffle.kernel import stream_bytes
from movebench.families.shuffle.report import REPORT

MiB = 1 << 20


def test_osu_bw_bytes_count_one_direction():
    # osu_bw: size x window x iterations for one pair
    assert stream_bytes("uni", MiB, 64, 10, 2) == MiB * 64 * 10


def test_osu_bibw_bytes_count_both_directions():
    assert stream_bytes("bidi", MiB, 64, 10, 2) == 2 * MiB * 64 * 10


def test_pairs_add_up_with_more_ranks():
    # osu_mbw_mr pairing: 4 ranks = 2 pairs
    assert stream_bytes("uni", 4096, 8, 5, 4) == 2 * 4096 * 8 * 5


def test_alltoall_counts_every_ordered_pair():
    assert stream_bytes("alltoall", 1000, 2, 3, 4) == 4 * 3 * 2 * 1000 * 3


def test_record_bandwidth_is_bytes_over_seconds():
    rec = record("shuffle", "uni", {"message_size": MiB}, 0, False, elapsed_s=0.5, nbytes=stream_bytes(
        "uni", MiB, 64, 10, 2))
    assert rec["bandwidth_Bps"] == pytest.approx(MiB * 640 / 0.5)
    assert rec["ok"] is True and rec["error"] is None
    assert record("x", "y", {}, 0, False, elapsed_s=0.0, nbytes=10)["bandwidth_Bps"] is None


def test_efficiency_divides_by_the_best_bidi_median_at_the_same_size_and_ranks():
    rows = []
    for variant, window, bws in [("bidi", 8, [8e9, 10e9, 12e9]), ("bidi", 64, [18e9, 20e9, 22e9]),
                                 ("uni", 64, [9e9, 10e9, 11e9])]:
        for rep, bw in enumerate(bws):
            rows.append({"family": "shuffle", "variant": variant, "pattern": variant, "nodes": 1, "ranks": 2,
                         "message_size": MiB, "window": window, "rep": rep, "warmup": False, "ok": True,
                         "bandwidth_Bps": bw})
    rows.append({**rows[-1], "message_size": 4096, "rep": 0})  # no bidi at this size
    rows.append({**rows[0], "warmup": True, "bandwidth_Bps": 99e9})  # warm-ups never set the peak
    table = REPORT.derive(pd.DataFrame(rows))
    uni = table[(table["variant"] == "uni") & (table["message_size"] == MiB)]
    assert (uni["peak_bidi_Bps"] == 20e9).all()  # median of the best window, not the max sample
    assert uni["efficiency"].tolist() == pytest.approx([0.45, 0.5, 0.55])
    assert table[table["message_size"] == 4096]["efficiency"].isna().all()


def test_iterations_for_duration_hits_the_target_time():
    seconds_per_iteration = 1e-4
    calls = []

    def stream(iterations):
        calls.append(iterations)
        return iterations * seconds_per_iteration, 0, {}

    assert iterations_for_duration(stream, 0.5) == 5000
    assert sum(calls) * seconds_per_iteration < 0.5 / 4  # choosing the count costs under a quarter of a repetition
