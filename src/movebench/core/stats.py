"""Summary statistics of repeated measurements.

The confidence interval of the median is distribution-free: the order statistics
x_(j) and x_(k) such that P(j <= B < k) >= 0.95 for B ~ Binomial(n, 1/2)
(Conover, Practical Nonparametric Statistics, 3rd ed., §3.2). With fewer than 6
samples no such pair exists at 95%, and the interval is the full range,
flagged by `ci_exact = False`.
"""

from __future__ import annotations

import math

SUMMARY_FIELDS = ("n", "median", "mean", "std", "min", "max", "p5", "p95", "ci_low", "ci_high", "ci_exact")


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, bool]:
    """0-based ranks (lo, hi) of the sorted sample bounding the median's CI."""
    if n < 1:
        raise ValueError("no samples")
    best = None
    for j in range(1, n // 2 + 1):
        k = n - j + 1
        coverage = 1 - 2 * _binom_cdf(j - 1, n)
        if coverage >= confidence - 1e-12:
            best = (j - 1, k - 1)
        else:
            break
    if best is None:
        return 0, n - 1, False
    return best[0], best[1], True


def summarize(values) -> dict:
    """n, median, mean, std (sample), min, max, p5, p95 and the median's 95% CI."""
    import numpy as np  # here, not above: kernels use median_ci_ranks and their ranks need not load numpy

    x = np.sort(np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float))
    if x.size == 0:
        return {f: None for f in SUMMARY_FIELDS} | {"n": 0}
    lo, hi, exact = median_ci_ranks(x.size)
    return {
        "n": int(x.size),
        "median": float(np.median(x)),
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "min": float(x[0]),
        "max": float(x[-1]),
        "p5": float(np.percentile(x, 5)),
        "p95": float(np.percentile(x, 95)),
        "ci_low": float(x[lo]),
        "ci_high": float(x[hi]),
        "ci_exact": exact,
    }
