"""Summary statistics of repeated measurements.

The confidence interval of the median is distribution-free: the order statistics
x_(j) and x_(k) such that P(j <= B < k) >= 0.95 for B ~ Binomial(n, 1/2)
(Conover, Practical Nonparametric Statistics, 3rd ed., §3.2). With fewer than 6
samples no such pair exists at 95%, and the interval is the full range,
flagged by `ci_exact = False`.
"""

from __future__ import annotations

import functools
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


# --- launches: the launch is the unit of replication ---

def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes §6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betai(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return front * h / a


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom (df may be fractional, as Welch's is)."""
    if math.isinf(df):
        from statistics import NormalDist

        return 1 - NormalDist().cdf(t)
    tail = 0.5 * _betai(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1 - tail


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t with `df` degrees of freedom (bisection on `t_sf`, to 1e-12)."""
    if not 0 < q < 1:
        raise ValueError(f"q = {q}: must lie in (0, 1)")
    if q < 0.5:
        return -t_quantile(1 - q, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf(mid, df) > 1 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def launch_interval(centres, confidence: float = 0.95):
    """The t-interval (df = L - 1) of the mean of `centres` along the last axis (L values each): (low, high).

    Vectorised over leading axes, so a coverage test can judge thousands of synthetic points at once.
    """
    import numpy as np

    x = np.asarray(centres, dtype=float)
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    half = t_quantile(0.5 + confidence / 2, n - 1) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    return mean - half, mean + half


def rerun_interval(centres, confidence: float = 0.95):
    """Where the same estimate from a rerun with as many launches lands (`confidence` of the time): the
    prediction interval mean +- t(df = L - 1) x s x sqrt(2 / L) of the launch centres along the last axis.

    A confidence interval covers the true mean; a rerun's estimate carries its own launch noise too, so a 95%
    CI of 3 launches holds another run's estimate only ~91% of the time (87% at 6), however exact it is
    (tests/test_launch_stats.py). This is the interval for "if I run it again". Neither sees what is shared
    by every launch of one run (the machine's state that day): docs/compare.md, "Launches"."""
    # the CI's half-width is t x s / sqrt(L); a rerun adds its own s / sqrt(L) in quadrature: sqrt(2) wider
    low, high = launch_interval(centres, confidence)
    mean, half = (low + high) / 2, (high - low) / 2 * math.sqrt(2)
    return mean - half, mean + half


def variance_components(launches) -> tuple[float | None, float | None, float | None]:
    """(between_share, sd_between, sd_within) of values grouped by launch: a one-way random-effects ANOVA
    (method of moments, unbalanced: n0 = (N - sum n_i^2 / N) / (L - 1)); the between-launch variance is
    max(0, (MSB - MSW) / n0), its share of a single value's variance clipped to [0, 1]. None where a component
    cannot be estimated (one launch; one value per launch leaves no within-launch spread)."""
    import numpy as np

    groups = [np.asarray(g, dtype=float) for g in launches if len(g)]
    big_l = len(groups)
    total = sum(g.size for g in groups)
    if big_l < 2:
        return None, None, None
    grand = np.concatenate(groups).mean()
    msb = sum(g.size * (g.mean() - grand) ** 2 for g in groups) / (big_l - 1)
    if total == big_l:
        return None, None, None
    msw = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / (total - big_l)
    n0 = (total - sum(g.size**2 for g in groups) / total) / (big_l - 1)
    between = max(0.0, (msb - msw) / n0)
    share = between / (between + msw) if between + msw > 0 else 0.0
    return float(min(1.0, max(0.0, share))), math.sqrt(between), math.sqrt(msw)


def launch_summary(launches, confidence: float = 0.95) -> dict:
    """`summarize` of the pooled values of a point measured in several launches (one list per launch), with
    the launch as the unit of replication: `launches` (L), `ci_level`, and the variance components of the log
    values (`between_share`, `sd_between_log`, `sd_within_log`; raw values when any value <= 0).

    With L >= 2 the median is the median of the launch medians (each launch counts once, whatever its
    repetitions) and the CI is the t-interval (df = L - 1) of the log launch medians, exponentiated: a launch
    median is nearly normal on the log scale and the t-interval is exact for normal centres at any L, where a
    bootstrap over 3 launches has 10 distinct resamples and under-covers (docs/compare.md, "Launches").
    `rerun_low`/`rerun_high`: where a rerun of the point with as many launches lands (`rerun_interval`).
    With one launch it is `summarize` itself (the repetitions' order-statistics CI), `ci_level` "repetitions",
    and no rerun interval. Launches with no value are dropped.
    """
    import numpy as np

    groups = []
    for launch in launches:
        x = np.asarray([v for v in launch if v is not None and not math.isnan(v)], dtype=float)
        if x.size:
            groups.append(np.sort(x))
    pooled = [float(v) for g in groups for v in g]
    out = summarize(pooled) | {"launches": len(groups), "ci_level": "repetitions", "between_share": None,
                               "sd_between_log": None, "sd_within_log": None, "rerun_low": None,
                               "rerun_high": None}
    if len(groups) < 2:
        return out
    positive = all(g[0] > 0 for g in groups)
    medians = np.array([np.median(g) for g in groups])
    centres = np.log(medians) if positive else medians
    low, high = launch_interval(centres, confidence)
    rerun_low, rerun_high = rerun_interval(centres, confidence)
    if positive:
        low, high = math.exp(low), math.exp(high)
        rerun_low, rerun_high = math.exp(rerun_low), math.exp(rerun_high)
    share, sd_between, sd_within = variance_components([np.log(g) if positive else g for g in groups])
    # An interval holds its own estimate: exp(mean log) of launches that agree to the byte is not exactly that
    # byte count (5088 came back as 5087.999...), and the median of 3 launch medians may sit a hair outside
    # the t-interval of their mean when one launch is far off.
    estimate = float(np.median(medians))
    low, high = min(low, estimate), max(high, estimate)
    rerun_low, rerun_high = min(rerun_low, estimate), max(rerun_high, estimate)
    out.update(median=estimate, ci_low=float(low), ci_high=float(high),
               ci_exact=True, ci_level="launches", between_share=share, sd_between_log=sd_between,
               sd_within_log=sd_within, rerun_low=float(rerun_low), rerun_high=float(rerun_high))
    return out


# --- the polygamma functions the variance prior needs (no scipy in core) ---

def digamma(x: float) -> float:
    """psi(x) for x > 0: the recurrence up to x >= 10, then the asymptotic series (error < 1e-12)."""
    result = 0.0
    while x < 10:
        result -= 1 / x
        x += 1
    inv2 = 1 / (x * x)
    return result + math.log(x) - 0.5 / x - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 / 240)))


def trigamma(x: float) -> float:
    """psi'(x) for x > 0, as `digamma`."""
    result = 0.0
    while x < 10:
        result += 1 / (x * x)
        x += 1
    inv = 1 / x
    inv2 = inv * inv
    return result + inv + inv2 / 2 + inv * inv2 * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))


def trigamma_inverse(y: float) -> float:
    """x such that trigamma(x) = y > 0 (Newton's iteration on 1 / trigamma, as limma's trigammaInverse)."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = trigamma(x)
        # d(1/trigamma)/dx = -psi''/psi'^2; psi''(x) ~ from the difference of trigamma, exact enough for Newton
        step = tri * (1 - tri / y) / _tetragamma(x)
        x += step
        if -step / x < 1e-10:
            break
    return x


def _tetragamma(x: float) -> float:
    result = 0.0
    while x < 10:
        result -= 2 / x**3
        x += 1
    inv = 1 / x
    inv2 = inv * inv
    return result - inv2 - inv * inv2 - inv2 * inv2 / 2 + inv2 * inv2 * inv2 / 6 - inv2**4 / 6
