"""The detector on series cut from the 10 real A/A campaigns of docs/notes/history.md (their noise, modes and
outliers as measured, not drawn), and bench/history.py's tools for finding where recall is lost: steps at other runs
than the 6th, and the real runs redrawn into longer series."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from history_support import write_run
from movebench.judging.history import detect

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "history.py"
_spec = importlib.util.spec_from_file_location("bench_history_recall", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

# /work/histbench/run-1..10 (bench/history.yaml, one commit), log launch-level estimates less run 1's and their
# moderated standard errors (3 launches: 2 df)
# shuffle uni 4096 B bandwidth: two modes 1.4x apart, each run's own interval tight (0.8%) in the lower one
BIMODAL_Y = [0.0, 0.0223, 0.0088, 0.3341, 0.3658, 0.0326, 0.3434, 0.0318, 0.3690, 0.0104]
BIMODAL_SE = [0.0082, 0.0090, 0.0076, 0.0643, 0.0087, 0.0079, 0.0608, 0.0711, 0.0701, 0.0095]
# bcast dense buffer 100x100 elapsed: 12% run-to-run wander, 6-9% own intervals
WANDER_Y = [0.0, -0.0320, -0.1764, -0.2966, -0.3076, -0.1060, -0.1994, -0.0499, -0.1798, 0.0109]
WANDER_SE = [0.0943, 0.0818, 0.0757, 0.0704, 0.0604, 0.0605, 0.0656, 0.0822, 0.0595, 0.0728]

# /work/histbench6/run-1..10 (bench/history.yaml at 6 launches: 5 df): shuffle bidi 4096 B bandwidth, whose runs 7,
# 9 and 10 sat 0.62x below the rest, each run's six launches agreeing: the machine flipping between two states
FLIPS_Y = [0.0, 0.0048, -0.0071, 0.0023, 0.0012, -0.0182, -0.48, -0.0042, -0.4722, -0.4768]
FLIPS_SE = [0.008, 0.009, 0.0604, 0.0163, 0.0088, 0.0066, 0.0759, 0.0063, 0.0571, 0.0063]


def _detect(y, se, df=2.0):
    return detect.detect(detect.Series(y=np.asarray(y, float), se=np.asarray(se, float), log=True,
                                       df=np.full(len(y), df))).changes


@pytest.mark.parametrize("y, se", [(BIMODAL_Y, BIMODAL_SE), (WANDER_Y, WANDER_SE)], ids=["bimodal", "wander"])
def test_real_aa_series_are_not_flagged(y, se):
    # a series whose runs jump 1.4x between two modes, against runs that each say they are within 1%: trusting
    # the runs' own intervals as the whole noise would make a change point of every jump
    assert _detect(y, se) == []


def test_a_machine_flipping_between_two_states_is_not_a_change():
    # three of the last four runs low, one back up between them: the run-to-run variance counts each flip (it
    # leaves out only the largest difference, which a step makes), so they are noise, not a level
    assert _detect(FLIPS_Y, FLIPS_SE, df=5.0) == []
    # the same runs with the high one low too: a level held for the last four runs, which is a change
    held = list(FLIPS_Y)
    held[7] = -0.47
    assert [c.index for c in _detect(held, FLIPS_SE, df=5.0)] == [6]


def test_a_2x_step_in_a_real_wandering_series_is_found_at_run_6():
    y = np.array(WANDER_Y)
    y[5:] += np.log(2.0)
    found = _detect(y, WANDER_SE)
    assert [c.index for c in found] == [5]
    assert 1.5 < found[0].size < 2.6


# --- bench/history.py: steps at other runs, longer series redrawn from the real runs ---

def test_injected_at_another_run_moves_only_the_runs_from_there():
    s = detect.Series(y=np.zeros(10), se=np.full(10, 0.01), log=True, df=np.full(10, 2.0))
    moved = np.exp(bench.injected(s, "higher", 1.5, at=3).y)
    assert np.allclose(moved[:3], 1.0) and np.allclose(moved[3:], 1 / 1.5)


def test_resampled_keeps_each_runs_estimate_with_its_error_and_never_repeats_a_run():
    s = detect.Series(y=np.arange(10.0), se=np.arange(10.0) / 100, log=True, df=np.arange(10.0) + 1)
    drawn = bench.resampled(s, 30, np.random.default_rng(0))
    assert len(drawn.y) == 30
    assert np.allclose(drawn.se, drawn.y / 100) and np.allclose(drawn.df, drawn.y + 1)
    assert np.all(np.diff(drawn.y) != 0)
    assert set(drawn.y) <= set(s.y)


@pytest.fixture(scope="module")
def ten_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("aa")
    return [write_run(root / f"run-{i}", start=1.8e9 + 86400 * i, seed=500 + i, cv_launch=0.02) for i in range(10)]


def test_analyse_reports_steps_at_each_run_asked_and_the_default_keys_stay(ten_runs, capsys):
    result = bench.analyse(ten_runs, python=None, with_others=False, at=[3, 5], misses=True)
    assert result["movebench_step_1.5"]["recall"] == 1.0  # run 6, as before
    assert "movebench_step_1.5_at_4" in result
    assert "step x1.5 at run 4" in capsys.readouterr().out


def test_resample_reports_aa_and_recall_per_length(ten_runs, capsys):
    result = bench.resample(ten_runs, [12], draws=1, steps=[2.0])
    assert result[12]["aa_series"] == 6
    assert result[12]["step_2.0"]["recall"] == 1.0
    assert "12 runs: A/A" in capsys.readouterr().out
