"""Adaptive launches: whether a point needs another launch, and how many repetitions that launch should run.

Under `launches: {min, max, ci_target | mdc_target}` a launch past `min` is judged on the point's earlier
launches' values: `launches_reached` says whether they already reach the target, `repetitions_per_launch` how
many repetitions the next launch should run (Kalibera and Jones, ISMM 2013). Launch reads the launches and asks
here; adaptive repetitions within a launch are `core.adaptive`'s. Kept apart from it because the kernels import
that module and not this one: their memory measures (bcast's RSS high-water mark) see the code they load.
"""

from __future__ import annotations

import math

from movebench.core.stats import launch_summary


def detectable_change(values: list[list[float]], prior) -> float | None:
    """The change a comparison of this point against a rerun with as many launches finds 80% of the time at the
    verdicts' 1% level (core.verdict.compare_launches, the point's variance moderated toward `prior`)."""
    from movebench.core import verdict  # numpy: kept out of the kernels, which import this module

    return verdict.compare_launches(values, values, prior=prior).mdc


def launches_reached(rule: dict, values: list[list[float]], prior=None) -> str | None:
    """Why no further launch is needed, or None: `ci_target`, the launch-level 95% CI of the estimate within it;
    `mdc_target`, a comparison against a rerun with as many launches would find a change of that size (the
    point's variance moderated toward its family's `prior`, as compare's verdicts do)."""
    if rule.get("mdc_target") is not None:
        mdc = detectable_change(values, prior)
        if mdc is not None and mdc <= rule["mdc_target"]:
            return (f"launches.mdc_target {rule['mdc_target']:g} reached after {len(values)} launches (a change of "
                    f"{100 * mdc:.0f}% would be found)")
        return None
    summary = launch_summary(values)
    half = (summary["ci_high"] - summary["ci_low"]) / 2 / summary["median"] if summary["median"] else None
    target = rule.get("ci_target", 0.1)
    if half is not None and half <= target:
        return (f"launches.ci_target {target:g} reached after {len(values)} launches (half-width "
                f"{half:.3f} of the estimate)")
    return None


def repetitions_per_launch(values: list[list[float]], walls: list[float], timed: list[float],
                           repetitions: int) -> int | None:
    """The repetitions a launch should run, from the earlier launches' values, their walls (a member's share of a
    launch group's) and their timed seconds: r = sqrt(c_launch / c_repetition x var_within / var_between)
    (Kalibera and Jones), at least 1 and at most `repetitions`; None when the costs or variances are unknown."""
    summary = launch_summary(values)
    rep_s = sum(sum(v) for v in values) / sum(len(v) for v in values)
    within, between = summary.get("sd_within_log"), summary.get("sd_between_log")
    if not walls or not rep_s or not within or between is None:
        return None
    launch_s = max(0.0, sum(walls) / len(walls) - sum(timed) / len(timed))
    if between <= 0:
        return repetitions
    best = math.sqrt(launch_s / rep_s * within**2 / between**2)
    return max(1, min(repetitions, round(best)))
