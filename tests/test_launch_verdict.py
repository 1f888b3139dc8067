"""The launch-level comparison and its verdict, calibrated on seeded two-level data (launch spread 25%,
repetition spread 5%, 6 repetitions a launch)."""

import math

import numpy as np
import pytest

from movebench.core.verdict import (
    MIN_REPETITIONS,
    compare_launches,
    compare_samples,
    pooled_launch_variance,
    verdict,
)

SD_BETWEEN, SD_WITHIN, REPETITIONS, POINTS = 0.25, 0.05, 6, 20


def family(rng, launches, ratio=1.0, sds=None):
    """One family's points: (base launches, new launches) each, NEW scaled by `ratio`."""
    sds = [SD_BETWEEN] * POINTS if sds is None else sds
    out = []
    for sd in sds:
        sides = [np.exp(shift + rng.normal(0, sd, (launches, 1)) + rng.normal(0, SD_WITHIN, (launches, REPETITIONS)))
                 for shift in (0.0, math.log(ratio))]
        out.append(tuple(s.tolist() for s in sides))
    return out


def flagged(rng, families, launches, ratio=1.0, sds=None):
    judged = changed = 0
    for _ in range(families):
        points = family(rng, launches, ratio, sds() if sds else None)
        pooled = pooled_launch_variance(points)
        for base, new in points:
            result = compare_launches(base, new, pooled=pooled)
            assert result.unit == "launches" and result.launches_base == launches
            judged += 1
            changed += verdict(result, "lower") in ("regressed", "improved")
    return changed / judged


@pytest.mark.parametrize("launches", [3, 6])
def test_aa_false_verdicts_stay_at_most_2_percent(launches):
    rate = flagged(np.random.default_rng(launches), 100, launches)
    print(f"A/A regressed + improved at {launches} launches: {rate:.4f} of {100 * POINTS}")
    assert rate <= 0.02


def test_aa_rate_holds_when_a_familys_points_differ_in_spread():
    rng = np.random.default_rng(8)
    rate = flagged(rng, 100, 3, sds=lambda: np.exp(rng.uniform(math.log(0.125), math.log(0.5), POINTS)))
    print(f"A/A regressed + improved at 3 launches, launch spread 12.5-50%: {rate:.4f} of {100 * POINTS}")
    assert rate <= 0.02


def test_a_2x_change_is_found_with_3_launches_a_side():
    rate = flagged(np.random.default_rng(21), 50, 3, ratio=2.0)
    print(f"2x slowdown found (regressed) at 3 launches: {rate:.3f} of {50 * POINTS}")
    assert rate >= 0.55


def test_mdc_is_the_change_found_80_percent_of_the_time():
    rng = np.random.default_rng(4)
    points = family(rng, 3)
    pooled = pooled_launch_variance(points)
    result = compare_launches(*points[0], pooled=pooled)
    assert result.mdc > 0 and 0 < result.mdc_double < result.mdc
    own = compare_launches(*points[0])  # Welch on 4 df: far less resolution
    assert own.mdc > result.mdc


def test_ci_and_p_agree():
    rng = np.random.default_rng(9)
    for base, new in family(rng, 4, ratio=1.3):
        r = compare_launches(base, new)
        assert (r.p_value < 0.05) == (not r.ci_low <= 1 <= r.ci_high)
        assert r.ci_low < r.ratio < r.ci_high


def test_a_side_with_one_launch_falls_back_to_the_repetitions():
    rng = np.random.default_rng(1)
    base, new = family(rng, 3)[0]
    result = compare_launches(base, new[:1])
    assert result.unit == "repetitions" and result.launches_base == 3 and result.launches_new == 1
    assert result.mdc is None
    pooled = compare_samples([v for launch in base for v in launch], new[0])
    assert (result.ratio, result.ci_low, result.ci_high, result.p_value) == (
        pooled.ratio, pooled.ci_low, pooled.ci_high, pooled.p_value)


def test_one_launch_compares_as_today():
    rng = np.random.default_rng(2)
    x, y = rng.lognormal(0, 0.1, 10), rng.lognormal(0.3, 0.1, 10)
    today = compare_samples(x, y)
    assert today.unit == "repetitions" and today.launches_base == today.launches_new == 1 and today.mdc is None
    assert verdict(today, "lower") == "regressed"
    assert verdict(compare_samples(x[:MIN_REPETITIONS - 1], y), "lower") == "inconclusive"


def test_launch_verdicts_ignore_min_repetitions():
    base = [[1.0, 1.01], [1.02, 0.99], [1.0, 1.0]]
    new = [[2.0, 2.02], [2.04, 1.98], [2.0, 2.0]]
    result = compare_launches(base, new)
    assert result.n_base == 6 and result.unit == "launches"
    assert verdict(result, "lower") == "regressed"


def test_raw_scale_launches():
    base = [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [1.0, 2.0, 0.0]]
    result = compare_launches(base, base)
    assert result.scale == "raw" and result.ratio == pytest.approx(1.0)
