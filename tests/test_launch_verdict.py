"""The launch-level comparison and its verdict, calibrated on seeded two-level data (launch spread 25%,
repetition spread 5%, 6 repetitions a launch)."""

import math

import numpy as np
import pytest

from movebench.core.verdict import (
    MIN_REPETITIONS,
    compare_launches,
    compare_samples,
    launch_variance_prior,
    run_level_variance,
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
        prior = launch_variance_prior(points)
        for base, new in points:
            result = compare_launches(base, new, prior=prior)
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
    prior = launch_variance_prior(points)
    result = compare_launches(*points[0], prior=prior)
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


# --- a third level: what every launch of one run shares (the machine that day) ---

SD_RUN = 0.15


def runs_of(rng, runs, launches, sd_run=SD_RUN, ratio=1.0):
    """One family's points measured in `runs` runs of `launches` launches, each run moving a point by its own
    effect; the last run scaled by `ratio`."""
    points = []
    for _ in range(POINTS):
        per_run = []
        for r in range(runs):
            shift = rng.normal(0, sd_run) + (math.log(ratio) if r == runs - 1 else 0.0)
            per_run.append(np.exp(shift + rng.normal(0, SD_BETWEEN, (launches, 1))
                                  + rng.normal(0, SD_WITHIN, (launches, REPETITIONS))).tolist())
        points.append(per_run)
    return points


def test_run_level_variance_recovers_the_run_effect():
    rng = np.random.default_rng(30)
    estimates = [run_level_variance(runs_of(rng, 3, 3))[0] for _ in range(40)]
    assert np.mean(estimates) == pytest.approx(SD_RUN**2, rel=0.2)
    variance, df, points = run_level_variance(runs_of(rng, 3, 3))
    assert (df, points) == (2 * POINTS, POINTS)
    none = [run_level_variance(runs_of(rng, 2, 3, sd_run=0.0))[0] for _ in range(40)]
    assert np.mean(none) < 0.2 * SD_RUN**2  # launches alone: near 0 (clipping at 0 biases it up a little)
    assert run_level_variance([[[[1.0, 1.1]], [[1.0]]]]) is None  # one launch a run: nothing to separate


def test_aa_rate_with_run_effects_holds_only_with_the_runs_variance():
    # A/A pairs of runs that each move a point by 15% beyond their launches: the launch-level test alone calls
    # far more than 2% changed; with the run-level variance measured on two other runs it stays at the rate
    rng = np.random.default_rng(31)
    plain = with_runs = judged = 0
    for _ in range(60):
        calibration = run_level_variance(runs_of(rng, 2, 3))
        pair = runs_of(rng, 2, 3)
        prior = launch_variance_prior([tuple(p) for p in pair])
        for base, new in pair:
            judged += 1
            plain += verdict(compare_launches(base, new, prior=prior), "lower") in ("regressed", "improved")
            result = compare_launches(base, new, prior=prior, run_level=calibration[:2])
            with_runs += verdict(result, "lower") in ("regressed", "improved")
    print(f"A/A with a 15% run effect, 3 launches: {plain / judged:.4f} plain, {with_runs / judged:.4f} with the "
          f"runs' variance, of {judged}")
    assert plain / judged > 0.03 and with_runs / judged <= 0.02


def test_more_launches_cannot_resolve_below_the_run_effect():
    rng = np.random.default_rng(32)
    base, new = runs_of(rng, 2, 3)[0]
    without = compare_launches(base, new)
    run = compare_launches(base, new, run_level=(SD_RUN**2, 40))
    assert run.mdc > without.mdc and run.mdc_double > without.mdc_double
    assert run.mdc_double > math.exp(2.0 * math.sqrt(2) * SD_RUN) - 1  # twice the launches: the floor stays
    assert compare_launches(base, new, run_level=(0.0, 40)) == without


# --- each point's variance its own: 5% and 90% launch spreads in one family ---

def mixed_family(rng, launches, ratio=1.0):
    """Half the points at 5% launch spread, half at 90%, in one family."""
    return family(rng, launches, ratio, sds=[0.05] * (POINTS // 2) + [0.9] * (POINTS - POINTS // 2))


def test_prior_keeps_coverage_and_the_aa_rate_on_a_mixed_family():
    rng = np.random.default_rng(40)
    covered = changed = judged = 0
    by_spread = {0.05: [0, 0], 0.9: [0, 0]}
    for _ in range(150):
        points = mixed_family(rng, 3)
        prior = launch_variance_prior(points)
        for i, (base, new) in enumerate(points):
            result = compare_launches(base, new, prior=prior)
            judged += 1
            inside = result.ci_low <= 1.0 <= result.ci_high
            covered += inside
            by_spread[0.05 if i < POINTS // 2 else 0.9][0] += inside
            by_spread[0.05 if i < POINTS // 2 else 0.9][1] += 1
            changed += verdict(result, "lower") in ("regressed", "improved")
    shares = {sd: round(c / n, 3) for sd, (c, n) in by_spread.items()}
    print(f"mixed family, 3 launches: coverage {covered / judged:.3f} (by spread {shares}), "
          f"A/A {changed / judged:.4f} of {judged}")
    assert covered / judged >= 0.93 and min(shares.values()) >= 0.93
    assert changed / judged <= 0.02


def test_a_points_detectable_change_follows_its_own_noise():
    rng = np.random.default_rng(41)
    points = mixed_family(rng, 3)
    prior = launch_variance_prior(points)
    quiet = [compare_launches(b, n, prior=prior).mdc for b, n in points[:POINTS // 2]]
    noisy = [compare_launches(b, n, prior=prior).mdc for b, n in points[POINTS // 2:]]
    # the family's noisy half no longer sets the quiet half's resolution
    assert np.median(quiet) < 0.35 < 2.0 < np.median(noisy)
    alone = launch_variance_prior(family(rng, 3, sds=[0.05] * POINTS))
    assert alone.df > prior.df  # points alike: each borrows more of the family's df


def test_prior_recovers_the_spread_of_a_family_alike():
    rng = np.random.default_rng(42)
    prior = launch_variance_prior(family(rng, 4, sds=[0.2] * 40))
    # a launch median's variance: 0.2^2 plus the within-launch noise of a median of 6 (~ 0.05^2 * pi / 12)
    assert prior.variance == pytest.approx(0.2**2 + 0.05**2 * math.pi / 12, rel=0.3)
    assert prior.df >= 40  # alike: a large d0 (capped at what the family holds: 40 points x 6 df)
    assert launch_variance_prior(family(rng, 3)[:2]) is None


def test_a_2x_change_is_found_on_the_quiet_points_of_a_mixed_family():
    rng = np.random.default_rng(43)
    found = judged = 0
    for _ in range(50):
        points = mixed_family(rng, 3, ratio=2.0)
        prior = launch_variance_prior(points)
        for base, new in points[:POINTS // 2]:
            judged += 1
            found += verdict(compare_launches(base, new, prior=prior), "lower") == "regressed"
    print(f"2x on the 5% points of a mixed family: {found / judged:.3f}")
    assert found / judged >= 0.95
