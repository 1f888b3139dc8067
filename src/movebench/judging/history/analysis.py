"""The store's series, one per campaign, family, point and measure, through the detector; what changed with each
change point; which of the newest runs started a worse level."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from movebench.judging.compare import is_time
from movebench.judging.history import detect
from movebench.judging.history.run import WORK

#: a change point whose first new run is among the newest this many runs of its series is "recent": what
#: --fail-on regression fails on (the detector needs MIN_SIZE runs of the new level to see it)
RECENT = 3
SERIES_KEY = ["campaign", "family", "point", "measure"]


@dataclass
class Found:
    """A change point of one series, placed on its runs."""

    change: detect.Change
    worse: bool
    recent: bool
    run_id: str
    started: pd.Timestamp
    first_possible: pd.Timestamp
    last_possible: pd.Timestamp
    changed: dict  # fingerprint field -> [before, after] across the runs where it may have happened


@dataclass
class SeriesResult:
    key: tuple
    unit: str
    better: str
    frame: pd.DataFrame  # the series' runs in order: run_id, started, estimate, ci_low, ci_high, fingerprint
    log: bool
    tau: float
    found: list[Found] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.key[1]} {self.key[2]} {self.key[3]}"


def fingerprint_changes(prints: list[dict]) -> dict:
    """field -> [first value, last value] for each field that is not the same in all of `prints` (in run order)."""
    # a point's work separates series of a time measure; it is no cause to name (`iterations: auto`: every run's)
    keys = sorted(set().union(*prints) - {WORK}) if prints else []
    return {k: [prints[0].get(k), prints[-1].get(k)] for k in keys if len({p.get(k) for p in prints}) > 1}


def series_groups(estimates: pd.DataFrame):
    """(key, runs) of every series, the runs in order. A time measure's series holds only the runs that did the same
    work as its newest (compare does not compare times of different work either); a store written before the work
    was recorded has none, and keeps every run."""
    for key, group in estimates.groupby(SERIES_KEY, sort=True):
        group = group.sort_values(["started", "run_id"]).dropna(subset=["estimate"]).reset_index(drop=True)
        if group.empty:
            continue
        if is_time(str(key[3])):
            work = [(json.loads(p) if isinstance(p, str) else {}).get(WORK) for p in group["fingerprint"]]
            group = group[[w == work[-1] for w in work]].reset_index(drop=True)
        yield key, group


def series_of(group: pd.DataFrame) -> detect.Series:
    logs = group["se_log"].notna().all() and (group["estimate"] > 0).all()
    if logs:
        series = detect.Series(y=np.log(group["estimate"].to_numpy(float)), se=group["se_log"].to_numpy(float),
                               log=True)
    else:
        series = detect.Series(y=group["estimate"].to_numpy(float), se=group["se"].to_numpy(float), log=False)
    bad = ~np.isfinite(series.se)
    if bad.all():
        series.se = np.zeros_like(series.y)
        return series
    if bad.any():
        series.se = np.where(bad, np.median(series.se[~bad]), series.se)
    # the degrees of freedom of each run's own variance: its launches less one, or its repetitions less one
    launches = group["launches"].fillna(1).to_numpy(float)
    df = np.where(launches >= 2, launches - 1, group["n"].fillna(2).to_numpy(float) - 1)
    series.se = detect.moderate(series.se, df)
    series.df = df
    return series


def analyse(estimates: pd.DataFrame, alpha: float = detect.ALPHA, min_size: int = detect.MIN_SIZE,
            recent: int = RECENT) -> list[SeriesResult]:
    results = []
    if estimates.empty:
        return results
    for key, group in series_groups(estimates):
        series = detect.detect(series_of(group), alpha=alpha, min_size=min_size)
        better = str(group["better"].iloc[0])
        result = SeriesResult(key=key, unit=str(group["unit"].iloc[0]), better=better, log=series.log,
                              tau=series.tau, frame=group)
        prints = [json.loads(p) if isinstance(p, str) else {} for p in group["fingerprint"]]
        n = len(group)
        for change in series.changes:
            result.found.append(Found(
                change=change, worse=detect.worse(change, better, series.log), recent=change.index >= n - recent,
                run_id=group["run_id"].iloc[change.index], started=group["started"].iloc[change.index],
                first_possible=group["started"].iloc[change.low], last_possible=group["started"].iloc[change.high],
                changed=fingerprint_changes(prints[max(0, change.low - 1): change.high + 1])))
        results.append(result)
    return results


def regressions(results: list[SeriesResult]) -> list[tuple[SeriesResult, Found]]:
    """The series whose newest runs started a worse level: the last change point is recent and goes the bad way."""
    out = []
    for result in results:
        if result.found and result.found[-1].recent and result.found[-1].worse:
            out.append((result, result.found[-1]))
    return out


def change_rows(results: list[SeriesResult]) -> list[dict]:
    """Every change point as one row (the page's table, the command's output)."""
    rows = []
    for result in results:
        for f in result.found:
            c = f.change
            rows.append({
                "campaign": result.key[0], "family": result.key[1], "point": result.key[2],
                "measure": result.key[3], "unit": result.unit, "run": f.run_id, "started": f.started,
                "first_possible": f.first_possible, "last_possible": f.last_possible,
                "size": c.size, "size_low": c.size_low, "size_high": c.size_high, "scale": "ratio" if result.log
                else "difference", "before": c.before, "after": c.after, "p": c.p,
                "direction": "worse" if f.worse else "better", "recent": f.recent,
                "changed": "; ".join(f"{k}: {a} -> {b}" for k, (a, b) in f.changed.items()),
            })
    return rows
