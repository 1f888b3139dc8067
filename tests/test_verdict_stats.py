"""The comparison statistic and the verdict rules, and their calibration on synthetic records."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from movebench.core.verdict import (
    EXACT_MAX,
    Comparison,
    compare_samples,
    u_null_cdf,
    verdict,
)


def _brute_force_cdf(n, m):
    counts = np.zeros(n * m + 1)
    for xs in itertools.combinations(range(n + m), n):
        ys = [r for r in range(n + m) if r not in xs]
        counts[sum(1 for a in xs for b in ys if b > a)] += 1
    return np.cumsum(counts) / counts.sum()


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (3, 2), (4, 4), (5, 7), (6, 6)])
def test_null_distribution_of_u_is_exact(n, m):
    assert np.allclose(u_null_cdf(n, m), _brute_force_cdf(n, m), rtol=0, atol=1e-15)


def test_null_distribution_at_the_exact_limit_is_a_distribution():
    cdf = u_null_cdf(30, 30)
    assert cdf[-1] == pytest.approx(1.0, abs=1e-12) and np.all(np.diff(cdf) >= 0)
    # symmetric around nm/2
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    assert np.allclose(pmf, pmf[::-1], atol=1e-15)
    with pytest.raises(ValueError):
        u_null_cdf(31, 30)


@pytest.mark.parametrize("n,m", [(6, 6), (10, 10), (7, 12), (20, 20)])
def test_p_value_matches_scipy_exact_mann_whitney(n, m):
    rng = np.random.default_rng(n * 100 + m)
    for _ in range(50):
        x, y = rng.lognormal(0, 0.1, n), rng.lognormal(0.05, 0.1, m)
        assert compare_samples(x, y).p_value == pytest.approx(
            stats.mannwhitneyu(y, x, method="exact").pvalue, abs=1e-12)


def test_p_value_with_ties_matches_scipy_asymptotic():
    x = np.array([4096, 8192, 8192, 12288, 4096, 8192, 8192, 16384], float)
    y = np.array([8192, 12288, 12288, 16384, 8192, 12288, 20480, 12288], float)
    assert compare_samples(x, y).p_value == pytest.approx(
        stats.mannwhitneyu(y, x, method="asymptotic", use_continuity=True).pvalue, rel=1e-9)


def test_beyond_the_exact_limit_the_normal_approximation_is_used():
    rng = np.random.default_rng(3)
    x, y = rng.lognormal(0, 0.1, 40), rng.lognormal(0.02, 0.1, 40)
    assert 2 * 40 > EXACT_MAX
    assert compare_samples(x, y).p_value == pytest.approx(
        stats.mannwhitneyu(y, x, method="asymptotic", use_continuity=True).pvalue, rel=1e-6)


def test_ratio_is_the_hodges_lehmann_estimate_of_the_log_shift():
    x = np.array([1.0, 2.0, 4.0])
    y = np.array([2.0, 4.0, 8.0, 16.0])
    c = compare_samples(x, y)
    pairwise = sorted(math.log(b) - math.log(a) for a in x for b in y)
    assert c.ratio == pytest.approx(math.exp(np.median(pairwise)))
    assert (c.median_base, c.median_new, c.n_base, c.n_new) == (2.0, 6.0, 3, 4)


def test_ci_ranks_for_ten_and_ten():
    # P(U <= 23) = 0.0216 <= 2.5% < P(U <= 24): the CI is the 24th smallest and the 24th largest difference.
    x = np.exp(np.arange(10) * 0.01)
    y = np.exp(np.arange(10) * 0.013 + 0.5)
    c = compare_samples(x, y)
    d = np.sort(np.subtract.outer(np.log(y), np.log(x)).ravel())
    assert math.log(c.ci_low) == pytest.approx(d[23]) and math.log(c.ci_high) == pytest.approx(d[100 - 24])


def test_ci_is_unbounded_when_too_few_samples_for_95_percent():
    c = compare_samples([1.0, 2.0], [3.0, 4.0])  # 2 + 2: P(U = 0) = 1/6 > 2.5%
    assert c.ci_low == 0.0 and c.ci_high == math.inf


def test_identical_constants_are_unchanged():
    c = compare_samples([1332.0] * 8, [1332.0] * 8)
    assert (c.ratio, c.ci_low, c.ci_high, c.p_value) == (1.0, 1.0, 1.0, 1.0)
    assert verdict(c, "lower") == "unchanged"


def test_zeros_are_compared_on_the_raw_scale():
    same = compare_samples([0.0] * 7, [0.0] * 7)
    assert same.scale == "raw" and same.ratio == 1.0 and verdict(same, "lower") == "unchanged"
    grew = compare_samples([0, 1, 0, 1, 1, 0, 1, 1], [5, 6, 5, 7, 6, 5, 6, 6])
    assert grew.scale == "raw" and grew.ratio > 1.05 and verdict(grew, "lower") == "regressed"
    from_zero = compare_samples([0.0] * 7, [3.0] * 7)
    assert math.isnan(from_zero.ratio) and verdict(from_zero, "lower") == "inconclusive"


def _cmp(ratio, lo, hi, p, n=10, m=10):
    return Comparison(n, m, 1.0, ratio, ratio, lo, hi, p, "log")


@pytest.mark.parametrize("better,ratio,expected", [
    ("higher", 1.10, "improved"), ("higher", 0.90, "regressed"),
    ("lower", 1.10, "regressed"), ("lower", 0.90, "improved"),
])
def test_direction_decides_improved_or_regressed(better, ratio, expected):
    assert verdict(_cmp(ratio, ratio - 0.02, ratio + 0.02, 0.001), better) == expected


def test_significant_but_small_changes_are_not_verdicts():
    # p < 1% but the ratio is within the 5% threshold: unchanged when the CI is inside it, else inconclusive
    assert verdict(_cmp(1.03, 1.02, 1.04, 1e-5), "lower") == "unchanged"
    assert verdict(_cmp(1.03, 1.01, 1.06, 1e-5), "lower") == "inconclusive"


def test_threshold_edges_are_symmetric_on_the_log_scale():
    t = 0.05
    assert verdict(_cmp(1.05, 1.04, 1.06, 0.001), "lower", t) == "regressed"  # at the threshold counts
    assert verdict(_cmp(1 / 1.05, 0.94, 0.96, 0.001), "lower", t) == "improved"
    assert verdict(_cmp(1.0499, 1.04, 1.06, 0.001), "lower", t) == "inconclusive"
    assert verdict(_cmp(0.96, 0.955, 0.97, 0.001), "lower", t) == "unchanged"  # 1/1.05 = 0.952 <= CI
    assert verdict(_cmp(0.96, 0.95, 0.97, 0.001), "lower", t) == "inconclusive"  # CI leaves the band below
    assert verdict(_cmp(1.0, 1 / 1.05, 1.05, 0.5), "lower", t) == "unchanged"  # CI exactly on the band's edges


def test_significance_edge_is_one_percent():
    assert verdict(_cmp(1.2, 1.1, 1.3, 0.0099), "lower") == "regressed"
    assert verdict(_cmp(1.2, 1.1, 1.3, 0.01), "lower") == "inconclusive"


def test_fewer_than_six_repetitions_is_always_inconclusive():
    assert verdict(_cmp(2.0, 1.9, 2.1, 1e-6, n=5), "lower") == "inconclusive"
    assert verdict(_cmp(1.0, 1.0, 1.0, 1.0, m=5), "lower") == "inconclusive"
    assert verdict(_cmp(2.0, 1.9, 2.1, 1e-6, n=6, m=6), "lower") == "regressed"


def test_threshold_is_configurable():
    c = _cmp(1.08, 1.07, 1.09, 0.001)
    assert verdict(c, "lower", threshold=0.05) == "regressed"
    assert verdict(c, "lower", threshold=0.10) == "unchanged"


def test_direction_falls_back_to_the_name():
    from movebench.judging.compare import direction

    assert direction(None, "bandwidth_Bps") == "higher"
    assert direction(None, "ops_per_s") == "higher"
    assert direction(None, "elapsed_s") == "lower"
    assert direction(None, "rss_hwm_delta_bytes") == "lower"
    assert direction(None, "mystery") is None
    assert direction("shuffle", "efficiency") == "higher"
    assert direction("kv", "imbalance") == "lower"


def test_direction_prefers_the_family_spec(monkeypatch):
    from movebench import families
    from movebench.spec import Family, Measure

    class Spec(Family):
        measures = (Measure("elapsed_s", "s", "higher"), Measure("score", "1", "lower"))

    from movebench.judging.compare import direction

    monkeypatch.setattr(families, "load", lambda name: Spec())
    assert direction("anything", "elapsed_s") == "higher"
    assert direction("anything", "score") == "lower"
    assert direction("anything", "bandwidth_Bps") == "higher"  # not declared: the name rule


# --- calibration (issue 10): lognormal repetitions, seeded ---

def _rates(n, cv, factor, trials=1000, seed=10):
    sigma = math.sqrt(math.log(1 + cv**2))
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(("improved", "regressed", "unchanged", "inconclusive"), 0)
    covered = 0
    for _ in range(trials):
        base = rng.lognormal(0, sigma, n)
        new = rng.lognormal(0, sigma, n) * factor  # times: `factor` 1.1 is a 10% slowdown
        c = compare_samples(base, new)
        counts[verdict(c, "lower")] += 1
        covered += c.ci_low <= factor <= c.ci_high
    return {k: v / trials for k, v in counts.items()}, covered / trials


def test_aa_comparisons_rarely_give_a_verdict():
    # The exact test's size at n = 10 is 0.89% and the threshold removes a little more: about 0.8% expected.
    # 1,000 trials (the count) would put 1.1% within one seed's reach; 10,000 make the bound a fact.
    rates, coverage = _rates(10, 0.10, 1.0, trials=10_000)
    assert rates["improved"] + rates["regressed"] <= 0.01
    assert coverage >= 0.94  # the 95% CI covers the true ratio


def test_aa_at_the_minimum_repetitions_rarely_gives_a_verdict():
    rates, _ = _rates(6, 0.10, 1.0, trials=10_000, seed=11)  # exact size 0.87%
    assert rates["improved"] + rates["regressed"] <= 0.01


@pytest.mark.parametrize("n,cv", [(40, 0.10), (12, 0.05)])
def test_a_ten_percent_slowdown_is_found_where_the_noise_allows(n, cv):
    rates, coverage = _rates(n, cv, 1.10, seed=12)
    assert rates["regressed"] >= 0.90 and rates["improved"] == 0
    assert coverage >= 0.94


def test_at_cv10_and_n10_no_one_percent_test_finds_a_ten_percent_slowdown_nine_times_in_ten():
    """The issue's second calibration target, measured: ours matches the best parametric test and both miss it.

    With sigma = 0.1 and n = 10 per side, a 10% slowdown is 2.1 standard errors of the difference of
    means: a two-sided 1% test (critical 2.9 SE) finds it about a quarter of the time. The t-test on
    the log values (optimal for lognormal data) is the bound we are held to.
    """
    rates, _ = _rates(10, 0.10, 1.10, seed=13)
    sigma = math.sqrt(math.log(1 + 0.1**2))
    rng = np.random.default_rng(13)
    oracle = np.mean(stats.ttest_ind(rng.normal(math.log(1.1), sigma, (1000, 10)), rng.normal(0, sigma, (1000, 10)),
                                     axis=1).pvalue < 0.01)
    assert oracle < 0.5
    assert rates["regressed"] >= 0.8 * oracle
