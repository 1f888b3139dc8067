"""Adaptive repetitions: measure a point until its median is known well enough, or a limit is hit.

`repetitions: {min: 6, max: 50, ci_target: 0.05, max_seconds: 120}` keeps running counted
repetitions until the distribution-free 95% confidence interval of the median (core.stats),
as a half-width relative to the median, is within `ci_target`; or `max` repetitions ran; or
`max_seconds` of counted repetitions have passed (a budget: it may stop a point before `min`).
`repetitions: 5` is a fixed count, as before.

half-width = (x_(hi) - x_(lo)) / 2 over the order statistics that bound the median's CI, relative
to the median. Below 6 repetitions no pair of order statistics covers 95%, the interval is the
whole range (stats.median_ci_ranks), whose coverage is below 95%: such a count never meets the target,
however narrow its range (two repetitions that tie at the timer's resolution have a range of zero).

Every rank of an MPI point must stop after the same repetition: kernels pass their reduced timings
(equal on every rank), and `agree` (e.g. rank 0's decision broadcast) settles the wall clock, which is not.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from movebench.core.stats import median_ci_ranks

#: The reasons that mean the CI target was not reached: the report lists these points.
LIMITS = ("max_repetitions", "max_seconds")


@dataclass(frozen=True)
class RepetitionPolicy:
    min: int = 6
    max: int = 50
    ci_target: float | None = 0.05
    max_seconds: float | None = None

    def __post_init__(self):
        if self.min < 1 or self.max < self.min:
            raise ValueError(f"repetitions: need 1 <= min <= max, got min {self.min}, max {self.max}")
        if self.ci_target is not None and not 0 < self.ci_target < 1:
            raise ValueError(f"repetitions.ci_target = {self.ci_target}: a fraction of the median in (0, 1)")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"repetitions.max_seconds = {self.max_seconds}: must be > 0")

    @classmethod
    def from_config(cls, value) -> RepetitionPolicy:
        """An int is a fixed count; a mapping sets the adaptive rule (missing keys take the defaults)."""
        if isinstance(value, bool):
            raise ValueError(f"repetitions = {value!r}: a count such as 5, or {{min, max, ci_target, max_seconds}}")
        if isinstance(value, int):
            return cls(min=value, max=value, ci_target=None)
        return cls(**value)

    @property
    def fixed(self) -> bool:
        return self.ci_target is None and self.max_seconds is None and self.min == self.max


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str | None
    n: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    ci_half_width: float | None  # relative to the median

    def record_fields(self) -> dict:
        """What each record of the point carries (an infinite half-width, of a zero median, as None)."""
        width = self.ci_half_width
        if width is not None and not math.isfinite(width):
            width = None
        return {"stop_reason": self.reason, "ci_half_width_rel": width, "repetitions_run": self.n}


def relative_half_width(values: Sequence[float]) -> tuple[float, float, float, float, bool]:
    """(median, ci_low, ci_high, half-width / |median|, whether the interval covers 95%) of the median's CI."""
    x = sorted(values)
    lo, hi, exact = median_ci_ranks(len(x))
    median = statistics.median(x)
    half = (x[hi] - x[lo]) / 2
    return median, x[lo], x[hi], (half / abs(median) if median else float("inf")), exact


def decide(values: Sequence[float], policy: RepetitionPolicy, elapsed_s: float = 0.0,
           next_s: float = 0.0) -> Decision:
    """Whether to stop after the counted repetitions `values` took `elapsed_s` of wall time.

    `next_s`: what the next repetition is expected to take; the budget stops a point when it
    would overrun `max_seconds`, not after. A value None is a repetition that failed or measured
    nothing: a count goes on (as it always did), an adaptive rule stops (`failed`): more
    repetitions cannot narrow an interval that has no value, and launch fails the point anyway.
    """
    n = len(values)
    if n == 0:
        return Decision(False, None, 0, None, None, None, None)
    measured = [v for v in values if v is not None]
    if len(measured) < n:
        if policy.fixed:
            return Decision(n >= policy.max, "fixed" if n >= policy.max else None, n, None, None, None, None)
        return Decision(True, "failed", n, None, None, None, None)
    median, ci_low, ci_high, width, covers = relative_half_width(values)

    def done(reason):
        return Decision(True, reason, n, median, ci_low, ci_high, width)

    if policy.fixed:
        return done("fixed") if n >= policy.max else Decision(False, None, n, median, ci_low, ci_high, width)
    if policy.ci_target is not None and n >= policy.min and covers and width <= policy.ci_target:
        return done("ci_target")
    if n >= policy.max:
        return done("max_repetitions")
    if policy.max_seconds is not None and elapsed_s + next_s > policy.max_seconds:
        return done("max_seconds")
    return Decision(False, None, n, median, ci_low, ci_high, width)


class AdaptiveRepetitions:
    """(rep, warmup) pairs, warm-ups first, then counted ones for as long as the policy says.

    After each counted repetition the caller reports its value with `add`; iteration stops when
    `decide` says so. `agree(decision) -> decision` makes every MPI rank take the same one, e.g.
    `lambda d: comm.bcast(d, root=0)`: the wall clock differs between ranks even when the values do not.
    """

    def __init__(self, policy: RepetitionPolicy, warmups: int, clock: Callable[[], float] = time.perf_counter,
                 agree: Callable[[Decision], Decision] | None = None):
        self.policy, self.warmups, self.clock, self.agree = policy, warmups, clock, agree
        self.values: list[float] = []
        self.decision = Decision(False, None, 0, None, None, None, None)
        self._started = None

    def add(self, value: float | None) -> None:
        self.values.append(value)

    def __iter__(self):
        for i in range(self.warmups):
            yield i, True
        self._started = self.clock()
        last = self._started
        rep = 0
        while True:
            yield rep, False
            rep += 1
            if len(self.values) != rep:
                raise RuntimeError(f"AdaptiveRepetitions: add() one value per counted repetition ({rep} ran, "
                                   f"{len(self.values)} added)")
            now = self.clock()
            decision = decide(self.values, self.policy, now - self._started, now - last)
            self.decision = decision if self.agree is None else self.agree(decision)
            last = now
            if self.decision.stop:
                return
