"""Change points in one point-measure's series of launch-level estimates, each run weighted by its own uncertainty.

The model: run i's estimate (log scale for positive measures) is y_i = mu_segment + e_i, e_i ~ N(0, s_i^2 + tau^2),
where s_i is the run's own standard error (from its launches' t-interval, core.stats.launch_summary) and tau^2 the
run-to-run variance that no run sees from inside (the machine's state that day; docs/compare.md, "Launches"),
estimated from the series' successive differences less the largest: a step moves one, a machine flipping between
states several.

A segment is tested with the largest weighted two-level F statistic over every candidate new level: a step (one
split) or a stretch that came back (two splits: a regression and its fix), each part at least MIN_SIZE runs, the
values clipped at CLIP standard deviations around their neighbourhood's median so that one or two wild runs cannot
make a level by themselves. Its p-value is a parametric bootstrap of the whole procedure (each run's standard
error and tau estimated again) under one mean. Binary segmentation repeats the test inside each part. On a series
with no change the first test alone decides, so the chance of any false change point in a series is the test's
level, ALPHA (docs/notes/history.md has why these choices and what the benchmark measured).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

#: the chance of a false change point in a series with none (per point-measure series, not per run)
ALPHA = 0.01
#: a run's variance is at least this: a series of identical values (or one with no uncertainty given) still divides
VAR_FLOOR = 1e-24
#: the weight, in degrees of freedom, of the series' typical variance in each run's moderated one
PRIOR_DF = 4.0
#: the fewest runs of a segment: one or two odd runs at either end are never a new level on their own (a side
#: of 2 has no median that an outlier cannot pull)
MIN_SIZE = 3
#: standardized values are clipped here around their segment's median before the split statistic
CLIP = 3.0
#: bootstrap replicates of the null distribution of the largest split statistic
REPLICATES = 999
#: replicates drawn at a time; drawing stops once the p-value is surely above 5 x ALPHA_CEILING
BATCH = 200
#: the largest level a caller may ask for and still get the full replicates where it matters
ALPHA_CEILING = 0.05
#: chi-square(1) 95% quantile: split points whose statistic lies within this of the largest form the location set
CHI2_95 = 3.841458820694124


@dataclass
class Change:
    """A change point: `index` is the first run of the new segment; `low`..`high` the runs where it may have
    happened (first new run, 95% likelihood set); `size` the new level over the old (or the difference, on a raw
    scale) with its 95% interval; `p` the split test's bootstrap p-value."""

    index: int
    low: int
    high: int
    size: float
    size_low: float
    size_high: float
    p: float
    before: float
    after: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Series:
    """One point-measure's runs in order: estimates, their own standard errors (on the scale of `log`)."""

    y: np.ndarray
    se: np.ndarray
    log: bool
    #: the degrees of freedom of each run's own standard error (None: known exactly)
    df: np.ndarray | None = None
    tau: float = 0.0
    changes: list[Change] = field(default_factory=list)


def prepare(estimates, ci_low, ci_high, se=None) -> Series:
    """A Series from estimates and either their standard errors or 95% intervals; log scale when every value and
    bound is positive (ratios, not differences, then). A run with no usable uncertainty gets the series' median."""
    est = np.asarray(estimates, dtype=float)
    low, high = np.asarray(ci_low, dtype=float), np.asarray(ci_high, dtype=float)
    positive = bool(np.all(est > 0) and np.all(np.nan_to_num(low, nan=1.0) > 0))
    y = np.log(est) if positive else est
    if se is None:
        lo = np.log(low) if positive else low
        hi = np.log(high) if positive else high
        se = (hi - lo) / (2 * 1.959963984540054)
    s = np.asarray(se, dtype=float)
    bad = ~np.isfinite(s) | (s < 0)
    if bad.all():
        s = np.zeros_like(y)
    elif bad.any():
        s = np.where(bad, np.median(s[~bad]), s)
    return Series(y=y, se=s, log=positive)


def moderate(se: np.ndarray, df: np.ndarray, prior_df: float = PRIOR_DF) -> np.ndarray:
    """Each run's standard error moderated toward the series' typical one (the median variance), as limma's
    empirical Bayes does (Smyth 2004): (d0 s0^2 + d s^2) / (d0 + d). Three launches give a variance on 2 degrees of
    freedom, which is as likely to be a fifth of the truth as twice it; unmoderated, a run that happened to agree
    with itself would outweigh all others and make a split out of nothing."""
    var = np.asarray(se, dtype=float) ** 2
    df = np.clip(np.nan_to_num(np.asarray(df, dtype=float), nan=1.0), 1.0, None)
    prior = np.median(var, axis=-1, keepdims=True) if var.shape[-1] else 0.0
    return np.sqrt((prior_df * prior + df * var) / (prior_df + df))


def run_to_run_variance(y: np.ndarray, se: np.ndarray) -> np.ndarray:
    """tau^2 for each row of y (shape (..., n)): the value at which the mean of the successive differences' squares
    over their variance (s_i^2 + s_j^2 + 2 tau^2), the largest left out, is chi-square(1)'s mean, 1; 0 when the runs'
    own errors already explain them. A step moves one difference, and that one is left out; a machine that flips
    between two states from run to run (a mode, as 4 KiB streams here do) moves several, and they raise tau, so
    that its flips are noise and not change points. (The median of the differences, used before, ignored those
    too: on six-launch runs three 4 KiB series flagged such flips; docs/notes/history.md.)"""
    d2 = np.diff(y, axis=-1) ** 2
    own = se[..., 1:] ** 2 + se[..., :-1] ** 2
    own = np.broadcast_to(own, d2.shape)
    keep = np.ones(d2.shape, dtype=bool)
    if d2.shape[-1] > 1:
        np.put_along_axis(keep, np.argmax(d2 / np.maximum(own, 1e-300), axis=-1)[..., None], False, axis=-1)
    kept = keep.sum(axis=-1)

    def excess(t2):
        return np.sum(np.where(keep, d2 / np.maximum(own + 2 * t2[..., None], 1e-300), 0.0), axis=-1) / kept - 1.0

    lo = np.zeros(d2.shape[:-1])
    hi = np.max(d2, axis=-1) + 1e-30
    zero_ok = excess(lo) <= 0
    for _ in range(40):
        mid = (lo + hi) / 2
        above = excess(mid) > 0
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(zero_ok, 0.0, (lo + hi) / 2)


def clipped(y: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Each run's value clipped at CLIP of its standard deviations around the median of the runs within 2 of it:
    one or two odd runs among their neighbours weigh at most CLIP each, while a level held for MIN_SIZE runs or
    more is its own neighbourhood's median and stays whole (clipping around a whole side's median cut a short
    regression, fixed after a few runs, down to noise)."""
    pad = np.full(y.shape[:-1] + (2,), np.nan)
    window = np.lib.stride_tricks.sliding_window_view(np.concatenate([pad, y, pad], axis=-1), 5, axis=-1)
    centre = np.nanmedian(window, axis=-1)
    sd = np.sqrt(np.broadcast_to(var, y.shape))
    return centre + np.clip((y - centre) / sd, -CLIP, CLIP) * sd


def candidates(n: int, min_size: int = MIN_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the candidate new levels [s, e) of a segment of n runs: a step (s = 0 or e = n: the level
    before or after one split) or a stretch within it (two splits: a regression and its fix); each part at least
    min_size runs."""
    starts, ends = [], []
    for s_ in [0, *range(min_size, n - min_size + 1)]:
        for e in range(s_ + min_size, n + 1):
            if (s_, e) == (0, n) or (e < n and n - e < min_size) or n - (e - s_) < min_size:
                continue
            starts.append(s_)
            ends.append(e)
    return np.array(starts, dtype=int), np.array(ends, dtype=int)


def level_statistics(y: np.ndarray, var: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The weighted two-level F statistic of each candidate [s, e) (columns) against the runs outside it, for each
    row of y, on clipped values: the weighted squared difference of the two levels over the pooled weighted
    residual variance. The runs' own variances (moderated, plus tau) weigh the runs; the scale they share is
    estimated at each candidate, so that a tau estimated too low or too high does not make the test liberal (a
    floor at the runs' own scale did: 3% false alarms at a nominal 1%)."""
    x = clipped(y, var)
    w = np.broadcast_to(1 / var, x.shape)
    zero = np.zeros(x.shape[:-1] + (1,))
    cw = np.concatenate([zero, np.cumsum(w, axis=-1)], axis=-1)
    cwx = np.concatenate([zero, np.cumsum(w * x, axis=-1)], axis=-1)
    cwxx = np.concatenate([zero, np.cumsum(w * x * x, axis=-1)], axis=-1)
    n = x.shape[-1]
    w_in, wx_in, wxx_in = (c[..., ends] - c[..., starts] for c in (cw, cwx, cwxx))
    w_out, wx_out, wxx_out = cw[..., -1:] - w_in, cwx[..., -1:] - wx_in, cwxx[..., -1:] - wxx_in
    between = (wx_in / w_in - wx_out / w_out) ** 2 * w_in * w_out / (w_in + w_out)
    within = (wxx_in - wx_in**2 / w_in + wxx_out - wx_out**2 / w_out) / (n - 2)
    return between / np.maximum(within, 1e-12 * np.maximum(between, 1e-300))


def _seed(y: np.ndarray) -> int:
    return int.from_bytes(hashlib.sha256(np.ascontiguousarray(y).tobytes()).digest()[:8], "little")


@dataclass
class Split:
    """The best candidate of a segment: the new level's runs [start, end), the range each boundary may lie in
    (95% likelihood set), the test's p-value."""

    start: int
    end: int
    start_range: tuple[int, int]
    end_range: tuple[int, int]
    p: float


def split_test(y: np.ndarray, se: np.ndarray, min_size: int = MIN_SIZE, replicates: int = REPLICATES,
               df: np.ndarray | None = None):
    """The best new level of one segment and its p-value (a Split); None when too short to split.

    The bootstrap draws series of one mean with the runs' own errors and the estimated tau, and repeats in each
    what was done to the real one: each run's standard error estimated again on its `df` degrees of freedom and
    moderated, tau estimated again, the largest statistic over the same candidates: what the procedure gives when
    nothing changed, the noise of its own estimates included. Seeded by the data, so the same store gives the
    same answer."""
    n = len(y)
    starts, ends = candidates(n, min_size)
    if not len(starts):
        return None
    tau2 = float(run_to_run_variance(y, se))
    var = np.maximum(se**2 + tau2, VAR_FLOOR)
    stats = level_statistics(y, var, starts, ends)
    observed = float(stats.max())
    rng = np.random.default_rng(_seed(y))
    # tau comes from a few runs' differences: the p-value is the larger of the one at its estimate and the one at a
    # tau larger by the runs' typical own variance, so that the test holds its level at either (at the estimate
    # alone: 1.1-1.2% false alarms at a nominal 1%)
    p = max(_bootstrap_p(observed, se, df, var_, starts, ends, min_size, replicates, rng)
            for var_ in (var, np.maximum(var + np.median(se**2), VAR_FLOOR)))
    best = int(np.argmax(stats))
    s_, e = int(starts[best]), int(ends[best])
    close = stats >= observed - CHI2_95
    start_alts = starts[close & (ends == e)]
    end_alts = ends[close & (starts == s_)]
    return Split(start=s_, end=e, start_range=(int(start_alts.min()), int(start_alts.max())),
                 end_range=(int(end_alts.min()), int(end_alts.max())), p=p)


def _bootstrap_p(observed, se, df, var, starts, ends, min_size, replicates, rng) -> float:
    """The share of series of one mean, drawn with variances `var`, whose procedure gives a statistic as large."""
    n = len(se)
    exceed = drawn = 0
    # in batches: a series far from significance (most are) stops after the first
    while drawn < replicates:
        batch = min(BATCH, replicates - drawn)
        sim = rng.standard_normal((batch, n)) * np.sqrt(var)
        sim_se = se if df is None else moderate(se * np.sqrt(rng.chisquare(df, (batch, n)) / df), df)
        sim_var = np.maximum(sim_se**2 + run_to_run_variance(sim, sim_se)[:, None], VAR_FLOOR)
        exceed += int(np.sum(level_statistics(sim, sim_var, starts, ends).max(axis=-1) >= observed - 1e-12))
        drawn += batch
        if (1 + exceed) / (1 + drawn) > 5 * ALPHA_CEILING:
            break
    return (1 + exceed) / (drawn + 1)


def detect(series: Series, alpha: float = ALPHA, min_size: int = MIN_SIZE, replicates: int = REPLICATES) -> Series:
    """Binary segmentation over steps and stretches: split where the test says so at `alpha` (once for a step, twice
    for a stretch that came back), then test each part again."""
    y, se = series.y, series.se
    n = len(y)
    series.tau = math.sqrt(float(run_to_run_variance(y, se))) if n >= 3 else 0.0
    found: dict[int, tuple[int, int, float]] = {}  # k -> (low, high, p)
    todo = [(0, n)]
    while todo:
        a, b = todo.pop()
        split = split_test(y[a:b], se[a:b], min_size, replicates, None if series.df is None else series.df[a:b])
        if split is None or split.p > alpha:
            continue
        if split.start > 0:
            found[a + split.start] = (a + split.start_range[0], a + split.start_range[1], split.p)
        if split.end < b - a:
            found[a + split.end] = (a + split.end_range[0], a + split.end_range[1], split.p)
        cuts = [a, a + split.start, a + split.end, b]
        todo += [(lo, hi) for lo, hi in zip(cuts, cuts[1:], strict=False) if hi > lo]
    bounds = [0, *sorted(found), n]
    tau2 = series.tau**2
    changes = []
    for i, k in enumerate(bounds[1:-1]):
        low, high, p = found[k]
        left, right = slice(bounds[i], k), slice(k, bounds[i + 2])
        wl, wr = 1 / np.maximum(se[left] ** 2 + tau2, VAR_FLOOR), 1 / np.maximum(se[right] ** 2 + tau2, VAR_FLOOR)
        ml, mr = float(np.sum(wl * y[left]) / wl.sum()), float(np.sum(wr * y[right]) / wr.sum())
        half = 1.959963984540054 * math.sqrt(1 / wl.sum() + 1 / wr.sum())
        d = mr - ml
        scale = math.exp if series.log else (lambda v: v)
        changes.append(Change(index=k, low=low, high=high, p=p,
                              size=scale(d), size_low=scale(d - half), size_high=scale(d + half),
                              before=scale(ml), after=scale(mr)))
    series.changes = changes
    return series


def worse(change: Change, better: str, log: bool) -> bool:
    """Whether the change goes the bad way for a measure whose `better` is 'higher' or 'lower'."""
    up = change.size > 1 if log else change.size > 0
    return up if better == "lower" else not up
