import math

import numpy as np
import pytest

from movebench.core.stats import median_ci_ranks, summarize


def _coverage(n, lo, hi):
    # P(x_(lo) <= median < x_(hi)) for 0-based ranks = P(lo+1 <= B <= hi), B ~ Bin(n, 1/2)
    return sum(math.comb(n, i) for i in range(lo + 1, hi + 1)) / 2**n


@pytest.mark.parametrize("n", [6, 7, 10, 20, 50, 101])
def test_median_ci_has_95_percent_coverage_and_is_tightest(n):
    lo, hi, exact = median_ci_ranks(n)
    assert exact
    assert _coverage(n, lo, hi) >= 0.95
    assert _coverage(n, lo + 1, hi - 1) < 0.95  # one rank tighter would fall short


def test_median_ci_known_values():
    # Conover's table: n = 10 -> x_(2), x_(9) (1-based), coverage 0.9785
    assert median_ci_ranks(10)[:2] == (1, 8)
    assert median_ci_ranks(20)[:2] == (5, 14)


def test_small_samples_fall_back_to_the_range():
    assert median_ci_ranks(5) == (0, 4, False)


def test_summarize_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.lognormal(size=25)
    s = summarize(x)
    assert s["n"] == 25
    assert s["median"] == pytest.approx(np.median(x))
    assert s["mean"] == pytest.approx(x.mean())
    assert s["std"] == pytest.approx(x.std(ddof=1))
    assert s["min"] == x.min() and s["max"] == x.max()
    assert s["p5"] == pytest.approx(np.percentile(x, 5)) and s["p95"] == pytest.approx(np.percentile(x, 95))
    assert s["ci_low"] <= s["median"] <= s["ci_high"]


def test_summarize_ignores_missing_values():
    s = summarize([1.0, None, float("nan"), 3.0])
    assert s["n"] == 2 and s["median"] == 2.0
    assert summarize([])["n"] == 0
