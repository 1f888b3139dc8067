"""Verdicts on two samples of one measure: did NEW change against BASE, and is the change real?

The statistic is the Hodges-Lehmann shift of the log values with its distribution-free
confidence interval, inverted from the exact Mann-Whitney distribution (Hollander & Wolfe,
Nonparametric Statistical Methods, 3rd ed., §4.3), and the Mann-Whitney (Wilcoxon rank-sum)
test for its p-value:

- `ratio` = exp(median over all pairs (i, j) of log new_j - log base_i): the ratio NEW/BASE.
  Under the model the interval assumes (NEW is BASE scaled by a factor) it estimates the
  ratio of the medians, and it is what the CI is centred on, so the two never disagree.
- The 95% CI is [D_(k), D_(nm+1-k)] of the sorted pairwise log differences D, with k the
  largest count such that P(U < k) <= 2.5% under the null distribution of U: its coverage is
  at least 95% for any continuous distribution of the repetitions, with no normality and
  no bootstrap resampling. A percentile bootstrap of the median is known to undercover at the
  6-20 repetitions a campaign has (the median of a resample takes only a few distinct values)
  and would need thousands of resamples per point; this interval is exact and takes
  microseconds.
- The p-value is the two-sided exact Mann-Whitney p-value when neither sample has ties and
  n + m <= EXACT_MAX; otherwise the normal approximation with the tie correction and a
  continuity correction (memory measures counted in pages have ties).
- Log values make the interval a ratio and make the test ask about scale; measures that can
  be zero or negative (a retry count, a setup time of 0) are compared on the raw scale and the
  shift is turned into a ratio against BASE's median.

The verdict (issue 10): `improved` or `regressed` only when p < `alpha` (1%) and the ratio
is beyond the practical threshold (default 5%) in the metric's direction; `unchanged` when
the whole 95% CI lies within the threshold; `inconclusive` otherwise, and always when either
side has fewer than `MIN_REPETITIONS` (6) measured repetitions (one-launch comparisons; a launch-level
comparison needs 2 launches a side instead, see `compare_launches`, and `compare_paired_launches` for two points
measured in the same launches). The threshold band is
symmetric on the log scale, [1/(1+t), 1+t], so a time ratio r and the bandwidth ratio 1/r
of the same point always get the same verdict.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace

import numpy as np

MIN_REPETITIONS = 6
ALPHA = 0.01
CONFIDENCE = 0.95
DEFAULT_THRESHOLD = 0.05
#: Largest n + m whose Mann-Whitney null distribution is computed exactly (int64 holds C(60, 30)).
EXACT_MAX = 60

# Directions of measures named neither by a family's `measures` nor by the suffix rule.
_NAMED_DIRECTIONS = {"ops_per_s": "higher", "efficiency": "higher", "imbalance": "lower", "retries": "lower"}


def direction(measure: str, declared: str | None = None) -> str | None:
    """"higher" or "lower" (which way is better) for a measure; None when unknown.

    `declared` (a family spec's `measures[measure].better`, looked up by the caller) decides when given;
    otherwise the name does: `*_Bps`, `*_per_s` higher; `*_s`, `*_bytes` lower.
    """
    if declared in ("higher", "lower"):
        return declared
    if measure in _NAMED_DIRECTIONS:
        return _NAMED_DIRECTIONS[measure]
    if measure.endswith(("_Bps", "_per_s")):
        return "higher"
    if measure.endswith(("_s", "_bytes")):
        return "lower"
    return None


@functools.lru_cache(maxsize=512)
def u_null_cdf(n: int, m: int) -> np.ndarray:
    """P(U <= u) for u = 0..n*m, U the Mann-Whitney count of two samples of sizes n and m, no ties.

    The counts are the coefficients of the Gaussian binomial [n+m choose n]_q =
    prod_{i=1..n} (1 - q^(m+i)) / (1 - q^i), built one factor at a time in exact integers.
    """
    if n + m > EXACT_MAX:
        raise ValueError(f"exact distribution only for n + m <= {EXACT_MAX}")
    n, m = min(n, m), max(n, m)  # symmetric in n and m; fewer factors this way
    size = n * m + n + 1
    p = np.zeros(size, dtype=np.int64)
    p[0] = 1
    deg = 0
    for i in range(1, n + 1):
        k = m + i
        p[k:k + deg + 1] -= p[:deg + 1].copy()
        deg += k
        # dividing by (1 - q^i) is a running sum along each residue class mod i
        for r in range(i):
            p[r:deg + 1:i] = np.cumsum(p[r:deg + 1:i])
        deg -= i
    counts = p[:n * m + 1].astype(float)
    return np.cumsum(counts) / math.comb(n + m, n)


@dataclass(frozen=True)
class Comparison:
    n_base: int
    n_new: int
    median_base: float
    median_new: float
    ratio: float  # NEW / BASE (Hodges-Lehmann)
    ci_low: float
    ci_high: float
    p_value: float
    scale: str  # "log" or "raw": which values the shift was estimated on
    launches_base: int = 1
    launches_new: int = 1
    unit: str = "repetitions"  # "launches" or "repetitions": what the test counts as one observation
    mdc: float | None = None  # minimum detectable change (fraction) at 80% power and ALPHA; launch level only
    mdc_double: float | None = None  # the same with twice the launches on each side
    paired: bool = False  # launch level only: the two sides measured in the same launches, their differences tested

    def as_dict(self) -> dict:
        return asdict(self)


def _clean(values) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    return np.sort(x[np.isfinite(x)])


def _median_sorted(x: np.ndarray) -> float:
    # np.median's argument checks outweigh the median of a sorted array, and the error-rate tests make tens of
    # thousands of comparisons (docs/compare.md, "The statistics, and why")
    half = x.size // 2
    return float(x[half]) if x.size % 2 else float((x[half - 1] + x[half]) / 2)


def compare_samples(base, new, confidence: float = CONFIDENCE) -> Comparison:
    """Medians, the ratio NEW/BASE with its CI, and the two-sided Mann-Whitney p-value."""
    x, y = _clean(base), _clean(new)
    n, m = x.size, y.size
    if n == 0 or m == 0:
        nan = float("nan")
        return Comparison(n, m, _median_sorted(x) if n else nan, _median_sorted(y) if m else nan,
                          nan, nan, nan, nan, "log")
    med_x, med_y = _median_sorted(x), _median_sorted(y)
    positive = bool((x > 0).all() and (y > 0).all())
    if positive:
        diffs = np.subtract.outer(np.log(y), np.log(x)).ravel()
    else:
        diffs = np.subtract.outer(y, x).ravel()
    diffs.sort()
    p_value = _mann_whitney_p(x, y, diffs)
    k = _ci_rank(n, m, 1 - confidence)
    shift = _median_sorted(diffs)
    lo, hi = (float(diffs[k - 1]), float(diffs[n * m - k])) if k >= 1 else (-math.inf, math.inf)
    if positive:
        ratio, ci_low, ci_high = math.exp(shift), math.exp(lo), math.exp(hi)
    elif med_x > 0:
        ratio, ci_low, ci_high = 1 + shift / med_x, 1 + lo / med_x, 1 + hi / med_x
    elif x[0] == x[-1] == y[0] == y[-1]:
        ratio = ci_low = ci_high = 1.0  # the same constant on both sides (e.g. zero retries)
    else:
        ratio = ci_low = ci_high = float("nan")
    return Comparison(n, m, med_x, med_y, ratio, ci_low, ci_high, p_value, "log" if positive else "raw")


def _ci_rank(n: int, m: int, alpha: float) -> int:
    """k such that [D_(k), D_(nm+1-k)] (1-based) covers the shift with probability >= 1 - alpha."""
    if n + m <= EXACT_MAX:
        cdf = u_null_cdf(n, m)
        return int(np.searchsorted(cdf, alpha / 2 * (1 + 1e-9), side="right"))
    z = _z(1 - alpha / 2)
    return max(0, int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))))


def _z(q: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def _mann_whitney_p(x: np.ndarray, y: np.ndarray, diffs: np.ndarray) -> float:
    n, m = x.size, y.size
    greater = int(np.count_nonzero(diffs > 0))
    ties_between = int(np.count_nonzero(diffs == 0))
    u = greater + 0.5 * ties_between
    pooled = np.sort(np.concatenate([x, y]))
    has_ties = bool((pooled[1:] == pooled[:-1]).any())
    if not has_ties and n + m <= EXACT_MAX:
        cdf = u_null_cdf(n, m)
        lower = cdf[int(u)]
        upper = 1 - cdf[int(u) - 1] if u >= 1 else 1.0
        return float(min(1.0, 2 * min(lower, upper)))
    _, tie_counts = np.unique(pooled, return_counts=True)
    total = n + m
    tie_term = float(((tie_counts**3) - tie_counts).sum()) / (total * (total - 1))
    var = n * m / 12 * ((total + 1) - tie_term)
    if var <= 0:
        return 1.0
    z = (abs(u - n * m / 2) - 0.5) / math.sqrt(var)
    from statistics import NormalDist

    return float(min(1.0, 2 * (1 - NormalDist().cdf(max(z, 0.0)))))


def verdict(result: Comparison, better: str, threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA,
            min_repetitions: int = MIN_REPETITIONS) -> str:
    """improved / regressed / unchanged / inconclusive for a comparison of a measure whose `better` is
    "higher" or "lower" (see the module docstring for the rules)."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better = {better!r}: must be 'higher' or 'lower'")
    if math.isnan(result.ratio):
        return "inconclusive"
    if result.unit == "launches":
        if result.launches_base < 2 or result.launches_new < 2:
            return "inconclusive"
    elif result.n_base < min_repetitions or result.n_new < min_repetitions:
        return "inconclusive"
    band_low, band_high = 1 / (1 + threshold), 1 + threshold
    beyond = result.ratio >= band_high or result.ratio <= band_low
    if result.p_value < alpha and beyond:
        went_up = result.ratio > 1
        return "improved" if went_up == (better == "higher") else "regressed"
    if band_low <= result.ci_low and result.ci_high <= band_high:
        return "unchanged"
    return "inconclusive"


# --- launches: the launch is the unit of replication ---

#: The power at which the minimum detectable change is quoted.
MDC_POWER = 0.8


def launch_centres(launches) -> tuple[np.ndarray, bool]:
    """Each launch's median (launches with no finite value dropped), and whether every value is > 0
    (then the centres are log medians, else raw medians)."""
    groups = [g for g in (_clean(launch) for launch in launches) if g.size]
    positive = all(g[0] > 0 for g in groups)
    medians = np.array([_median_sorted(g) for g in groups])
    return (np.log(medians) if positive and medians.size else medians), positive


@dataclass(frozen=True)
class VariancePrior:
    """What a family's points of one measure say about any one point's launch variance (log launch medians):
    a scaled inverse chi-square with `variance` s0^2 and `df` d0, fitted over `points` points."""

    variance: float
    df: float
    points: int


def _own_variance(sides) -> tuple[float, int] | None:
    """(variance of one log launch median, df) of one point: its sides' squared deviations from their own means
    over sum(L - 1); None when no side has 2 launches or a value is <= 0."""
    squares, df = 0.0, 0
    for side in sides:
        centres, positive = launch_centres(side)
        if not positive:
            return None
        if centres.size >= 2:
            squares += float(((centres - centres.mean()) ** 2).sum())
            df += centres.size - 1
    return (squares / df, df) if df else None


def launch_variance_prior(points) -> VariancePrior | None:
    """The empirical-Bayes prior of one family-measure's launch variances (Smyth, "Linear models and empirical
    Bayes methods for assessing differential expression in microarray experiments", Stat. Appl. Genet. Mol.
    Biol. 3(1), 2004, section 6.2): `points` is an iterable of (base launches, new launches).

    log s_i^2 of d_i df is log sigma_i^2 + log chi^2_d / d; the method of moments on those logs gives the
    prior's d0 from the spread left after the chi-square's own (trigamma(d_i / 2)) and s0^2 from their mean.
    Points alike in spread get a large d0 (each borrows the family's df); a family of 5% and 90% points gets a
    small one, so each keeps its own variance and only a little of the family's df. d0 never exceeds the df
    the family's points hold together. None with fewer than 3 points of positive variance."""
    return _fit_prior(_own_variance(sides) for sides in points)


def paired_variance_prior(pairs) -> VariancePrior | None:
    """`launch_variance_prior` of the variance of a per-launch log ratio: `pairs` is an iterable of (base launches,
    new launches) of two points measured in the same launches (base[k] and new[k] in launch k), as
    `compare_paired_launches` takes them. None with fewer than 3 pairs of positive variance."""
    return _fit_prior(_paired_variance(base, new) for base, new in pairs)


def _paired_variance(base, new) -> tuple[float, int] | None:
    """(variance of the per-launch log ratio, df = launches - 1) of two points measured in the same launches; None
    with fewer than 2 launches holding both or a value <= 0."""
    x, y, positive = _paired_centres(base, new)
    d = y - x
    return (float(d.var(ddof=1)), d.size - 1) if positive and d.size >= 2 else None


def _paired_centres(base, new) -> tuple[np.ndarray, np.ndarray, bool]:
    """BASE's and NEW's centres in the launches that hold both (`launch_centres`: log medians when every value of
    both is > 0, then True; else raw medians and False)."""
    pairs = [(b, n) for b, n in zip(base, new, strict=True) if _clean(b).size and _clean(n).size]
    x, positive_x = launch_centres([b for b, _ in pairs])
    y, positive_y = launch_centres([n for _, n in pairs])
    positive = positive_x and positive_y
    if positive != positive_x:
        x = np.exp(x)
    if positive != positive_y:
        y = np.exp(y)
    return x, y, positive


def _fit_prior(variances) -> VariancePrior | None:
    """The prior of `launch_variance_prior` fitted to (variance, df) estimates (None entries left out)."""
    from movebench.core.stats import digamma, trigamma, trigamma_inverse

    own = [v for v in variances if v is not None and v[0] > 0]
    if len(own) < 3:
        return None
    z = np.array([math.log(s2) - digamma(d / 2) + math.log(d / 2) for s2, d in own])
    mean = float(z.mean())
    spread = float(z.var(ddof=1)) - float(np.mean([trigamma(d / 2) for _, d in own]))
    total_df = float(sum(d for _, d in own))
    d0 = 2 * trigamma_inverse(spread) if spread > 0 else math.inf
    d0 = min(d0, total_df)
    return VariancePrior(math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2)), d0, len(own))


def moderated_variance(own: float, df: int, prior: VariancePrior | None) -> tuple[float, float]:
    """The point's launch variance shrunk toward the prior, weighted by df, and its df (d0 + d)."""
    if prior is None:
        return own, df
    return (prior.df * prior.variance + df * own) / (prior.df + df), prior.df + df


def run_level_variance(points) -> tuple[float, int, int] | None:
    """(variance of a point's run effect on the log scale, degrees of freedom, points) from one campaign run
    several times: `points` is an iterable of one point-measure's launches in each run (a list per run, a
    list of values per launch).

    A point's estimate in one run is the mean of its log launch medians; across runs those means vary by
    what the launches of one run share (the machine's state that day) on top of the launches' own noise.
    Method of moments, pooled over the points: sum of the variances of the run means minus the sum of what
    the launches alone predict (each point's pooled within-run launch variance times mean(1 / L_j)), over
    the points, clipped at 0; df (runs - 1) per point. Points with fewer than 2 runs of >= 2 launches, or
    with a value <= 0, are left out. None when no point is left."""
    observed = predicted = 0.0
    used = df = 0
    for runs in points:
        centres = [c for c, positive in (launch_centres(r) for r in runs) if positive and c.size >= 2]
        if len(centres) < 2:
            continue
        means = np.array([c.mean() for c in centres])
        within_df = sum(c.size - 1 for c in centres)
        within = sum(float(((c - c.mean()) ** 2).sum()) for c in centres) / within_df
        observed += float(means.var(ddof=1))
        predicted += within * float(np.mean([1 / c.size for c in centres]))
        used += 1
        df += len(centres) - 1
    if not used:
        return None
    return max(0.0, (observed - predicted) / used), df, used


def compare_launches(base, new, confidence: float = CONFIDENCE, alpha: float = ALPHA,
                     prior: VariancePrior | None = None,
                     run_level: tuple[float, int] | None = None) -> Comparison:
    """NEW against BASE with the launch as the unit: `base` and `new` are one list of values per launch.

    The ratio is exp(mean log launch median of NEW - that of BASE); its CI and two-sided p-value come from a
    t-test on the log launch medians. With `prior` (`launch_variance_prior` over the family's points of the
    same measure) the test is Student's with the point's own pooled variance moderated toward the prior and
    d + d0 df: 3 launches a side leave a point 4 df of its own (t_0.995 = 4.6), the family adds up to d0 more,
    and each point's variance stays its own (docs/compare.md, "Launches"). Without `prior`, Welch's t on the
    point's own launches. `mdc` is the
    change the test finds with 80% power at `alpha`: exp((t_(1-alpha/2) + t_0.8) * se) - 1; `mdc_double` the
    same with twice the launches on each side. A side with fewer than 2 launches cannot be judged at the
    launch level: the repetitions of all launches are compared (`compare_samples`), `unit` "repetitions".
    Values <= 0 anywhere: raw launch medians, the shift turned into a ratio against BASE's mean centre.
    `run_level` ((variance, df) of `run_level_variance`, from A/A runs of the campaign): each side's estimate
    also carries its run's effect, so 2 x that variance joins the difference's, with Satterthwaite's df; more
    launches do not shrink it, so `mdc_double` says what more launches cannot buy (log scale only).
    """

    x, positive_x = launch_centres(base)
    y, positive_y = launch_centres(new)
    n, m = x.size, y.size
    n_base = sum(int(_clean(v).size) for v in base)
    n_new = sum(int(_clean(v).size) for v in new)
    if n < 2 or m < 2:
        pooled_values = compare_samples([v for launch in base for v in launch], [v for launch in new for v in launch],
                                        confidence)
        return replace(pooled_values, launches_base=n, launches_new=m, unit="repetitions")
    positive = positive_x and positive_y
    if positive != positive_x:
        x = np.exp(x)
    if positive != positive_y:
        y = np.exp(y)
    diff = float(y.mean() - x.mean())
    vx, vy = float(x.var(ddof=1)), float(y.var(ddof=1))
    if prior is not None and positive:
        own = ((n - 1) * vx + (m - 1) * vy) / (n + m - 2)
        variance, df = moderated_variance(own, n + m - 2, prior)
        # twice the launches: twice the point's own df, the same prior
        df_double = prior.df + 2 * (n + m - 2)
        se2, se2_double = variance * (1 / n + 1 / m), variance * (1 / n + 1 / m) / 2
    else:
        se2, df = vx / n + vy / m, _welch_df(vx, n, vy, m)
        se2_double, df_double = vx / (2 * n) + vy / (2 * m), _welch_df(vx, 2 * n, vy, 2 * m)
    if run_level is not None and positive and run_level[0] > 0:
        shared = 2 * run_level[0]
        df = _satterthwaite(se2, df, shared, run_level[1])
        df_double = _satterthwaite(se2_double, df_double, shared, run_level[1])
        se2, se2_double = se2 + shared, se2_double + shared
    return Comparison(n_base, n_new, **_t_figures(diff, math.sqrt(se2), df, math.sqrt(se2_double), df_double, x, y,
                                                   positive, confidence, alpha),
                      scale="log" if positive else "raw", launches_base=n, launches_new=m, unit="launches")


def compare_paired_launches(base, new, confidence: float = CONFIDENCE, alpha: float = ALPHA,
                            prior: VariancePrior | None = None) -> Comparison:
    """NEW against BASE measured in the same launches (a launch group's members): `base[k]` and `new[k]` are the
    two points' values in launch k. The ratio is exp(mean over launches of log median NEW_k - log median BASE_k);
    its CI and two-sided p-value come from the t-test on those L per-launch log ratios. What a launch does to both
    points (its placement, the node's state, what its start left behind) cancels in each ratio, however much of it
    the two share. With `prior` (`paired_variance_prior` over the family's pairs of points measured together) the
    variance of a per-launch log ratio is moderated toward it as `compare_launches` moderates a point's, with
    L - 1 + d0 df; without, the pair's own, L - 1 df. Launches where a side has no value are left out; fewer than 2
    left: as `compare_launches` (the repetitions pooled). Values <= 0: raw medians, the shift turned into a ratio
    against BASE's mean centre."""

    kept = [(b, n) for b, n in zip(base, new, strict=True) if _clean(b).size and _clean(n).size]
    if len(kept) < 2:
        return compare_launches([b for b, _ in kept], [n for _, n in kept], confidence, alpha)
    x, y, positive = _paired_centres([b for b, _ in kept], [n for _, n in kept])
    d = y - x
    pairs, diff = d.size, float(d.mean())
    variance, df = float(d.var(ddof=1)), float(pairs - 1)
    df_double = 2.0 * pairs - 1  # twice the launches: twice the pair's own df
    if prior is not None and positive:
        variance, df = moderated_variance(variance, pairs - 1, prior)
        df_double = prior.df + 2 * pairs - 1
    se = math.sqrt(variance / pairs)
    return Comparison(sum(int(_clean(b).size) for b, _ in kept), sum(int(_clean(n).size) for _, n in kept),
                      **_t_figures(diff, se, df, se / math.sqrt(2), df_double, x, y, positive, confidence, alpha),
                      scale="log" if positive else "raw", launches_base=pairs, launches_new=pairs, unit="launches",
                      paired=True)


def _t_figures(diff: float, se: float, df: float, se_double: float, df_double: float, x, y, positive: bool,
               confidence: float, alpha: float) -> dict:
    """A Comparison's medians, ratio, CI and p-value from a t-test of the shift `diff` of the centres `x` -> `y`
    (logs when `positive`), and its mdc and mdc_double: the change found MDC_POWER of the time at `alpha`, with
    these launches and with twice as many (standard error `se_double` on `df_double` df)."""
    from movebench.core.stats import t_quantile, t_sf

    if se > 0:
        p_value = min(1.0, 2 * t_sf(abs(diff) / se, df))
        half = t_quantile(0.5 + confidence / 2, df) * se
        detect = (t_quantile(1 - alpha / 2, df) + t_quantile(MDC_POWER, df)) * se
        detect_double = (t_quantile(1 - alpha / 2, df_double) + t_quantile(MDC_POWER, df_double)) * se_double
    else:
        p_value = 1.0 if diff == 0 else 0.0
        half = detect = detect_double = 0.0
    med_x, med_y = float(np.median(np.exp(x) if positive else x)), float(np.median(np.exp(y) if positive else y))
    if positive:
        ratio, ci_low, ci_high = math.exp(diff), math.exp(diff - half), math.exp(diff + half)
        mdc, mdc_double = math.exp(detect) - 1, math.exp(detect_double) - 1
    elif x.mean() > 0:
        centre = float(x.mean())
        ratio, ci_low, ci_high = 1 + diff / centre, 1 + (diff - half) / centre, 1 + (diff + half) / centre
        mdc, mdc_double = detect / centre, detect_double / centre
    else:
        ratio = ci_low = ci_high = 1.0 if se == 0 and diff == 0 else float("nan")
        mdc = mdc_double = None
    return {"median_base": med_x, "median_new": med_y, "ratio": ratio, "ci_low": ci_low, "ci_high": ci_high,
            "p_value": p_value, "mdc": mdc, "mdc_double": mdc_double}


def _satterthwaite(a: float, df_a: float, b: float, df_b: float) -> float:
    """The df of a + b, two variance estimates with df_a and df_b."""
    if a <= 0:
        return float(df_b)
    return (a + b) ** 2 / (a * a / df_a + b * b / df_b)


def _welch_df(vx: float, n: int, vy: float, m: int) -> float:
    a, b = vx / n, vy / m
    if a + b == 0:
        return float(n + m - 2)
    return (a + b) ** 2 / (a * a / (n - 1) + b * b / (m - 1))

