"""bench/history.py's analysis on ten results folders tabulated by the real aggregate (no campaign): A/A false alarms,
injected steps found where they were put, and the scoring it prints."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from history_support import write_run

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "history.py"
_spec = importlib.util.spec_from_file_location("bench_history", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def ten_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("aa")
    return [write_run(root / f"run-{i}", start=1.8e9 + 86400 * i, seed=500 + i, cv_launch=0.02) for i in range(10)]


def test_analyse_counts_aa_false_alarms_and_finds_the_injected_steps(ten_runs):
    result = bench.analyse(ten_runs, python=None, with_others=False)
    assert result["series"] == 6 and result["runs"] == 10  # 3 points x (elapsed_s, bandwidth_Bps)
    assert result["movebench_aa"]["false_per_100_series"] <= 100 / 6  # at most one of six
    for factor in bench.STEPS:
        assert result[f"movebench_step_{factor}"]["recall"] == 1.0


def test_a_step_is_injected_the_bad_way_from_run_6(ten_runs):
    (_, series, better), *_ = bench.series_from_runs(ten_runs)
    copy = bench.injected(series, better, 1.5)
    moved = np.exp(copy.y - series.y)
    expected = 1.5 if better == "lower" else 1 / 1.5
    assert np.allclose(moved[:5], 1.0) and np.allclose(moved[5:], expected)


def test_scoring_pairs_each_true_change_with_one_found_nearby():
    sc = bench.score([[5, 6, 20], [], [4]], [[5], [5], [5]], tolerance=1)
    assert (sc["tp"], sc["fp"], sc["fn"]) == (2, 2, 1)
    assert sc["precision"] == 0.5 and sc["recall"] == pytest.approx(2 / 3)
