"""Upper bounds of bandwidths, measured in the same campaign, and each point's share of its bound.

A family's report (`movebench.reportkit.FamilyReport`) may *provide* bounds, `provide_bounds(summary,
points) -> list[dict]` (calibration: memcpy and fio; shuffle: the best bidirectional stream between
nodes), and *ask* for one per bandwidth point, `bound_request(row, meta) -> dict | None` (`row`: the point's
bandwidth summary row, `meta`: its row of the points table). A request names a kind and how to
pick among the provided rows of that kind:

    {"kind": "memcpy", "at_least": {"ranks": 2}, "nearest": {"size": 4096}}
    {"kind": "network", "exact": {"nodes": 2}}
    {"kind": "fio", "exact": {"pattern": "sfmw", "ranks": 2, "path": "/tmp/movebench-io"},
     "nearest": {"size_per_proc": 1048576}}

- `exact`: equal values only;
- `at_least`: the smallest value at or above the point's (more copying processes than the
  point has bound it from above); where none was measured, the largest, and the bound says so;
- `nearest`: the value nearest on a log scale (sizes);

then the largest bound among the rows left. The point's `pct_of_bound` is its median bandwidth
over the bound, in percent. A point is *above* its bound when its 95% CI lies wholly above the
bound's (`ci_low` over `bound_ci_high_Bps`, where both are known; else the medians): it moved more
than the bound allows, a measurement to distrust (a timer, a byte count, a cache) or a bound that
does not apply. A median above the bound with overlapping intervals is the two figures' noise
(*at* its bound), not a contradiction: both are measured, each with its spread.
"""

from __future__ import annotations

import math

import pandas as pd

from movebench import families

COLUMNS = ("bound_Bps", "bound_ci_high_Bps", "bound", "bound_note", "pct_of_bound")


def provided(sections: dict) -> pd.DataFrame:
    """Every bound the campaign's families provide, one row each (`kind`, its keys, `bound_Bps`, `label`)."""
    rows = []
    for name, section in sections.items():
        if section["summary"].empty:
            continue
        rows += families.report(name).provide_bounds(section["summary"], section["points_table"])
    return pd.DataFrame(rows)


def _log_distance(value, wanted) -> float:
    if not value or not wanted or value <= 0 or wanted <= 0:
        return math.inf
    return abs(math.log(value / wanted))


def resolve(request: dict, bounds: pd.DataFrame) -> dict:
    """The bound for one request: `bound_Bps`, `bound` (what it is), `bound_note`; or only a note why none."""
    kind = request["kind"]
    if bounds.empty or "kind" not in bounds or not (bounds["kind"] == kind).any():
        return {"bound_note": f"no {kind} bound measured in this campaign"}
    rows = bounds[bounds["kind"] == kind]
    notes = []
    for key, want in (request.get("exact") or {}).items():
        if key not in rows:
            return {"bound_note": f"no {kind} bound with {key}"}
        rows = rows[rows[key].map(lambda v, want=want: v == want)]
        if rows.empty:
            return {"bound_note": f"no {kind} bound at {key} = {want}"}
    for key, want in (request.get("at_least") or {}).items():
        values = rows[key].astype(float)
        enough = values[values >= want]
        pick = enough.min() if len(enough) else values.max()
        if not len(enough):
            notes.append(f"measured with {int(pick)} {key}, fewer than the point's {want}: may be below the true bound")
        rows = rows[values == pick]
    for key, want in (request.get("nearest") or {}).items():
        distance = rows[key].map(lambda v, want=want: _log_distance(float(v), float(want)))
        rows = rows[distance == distance.min()]
    best = rows.loc[rows["bound_Bps"].idxmax()]
    found = {"bound_Bps": float(best["bound_Bps"]), "bound": best["label"], "bound_note": "; ".join(notes)}
    high = best.get("bound_ci_high_Bps") if "bound_ci_high_Bps" in rows else None
    if high is not None and high == high:
        found["bound_ci_high_Bps"] = float(high)
    return found


def attach(name: str, summary: pd.DataFrame, points: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """The family's summary with `COLUMNS` filled in on its bandwidth rows (empty where no bound applies)."""
    summary = summary.copy()
    for column in COLUMNS:
        summary[column] = None
    if summary.empty:
        return summary
    request_of = families.report(name).bound_request
    metas = {r["point"]: r for r in points.to_dict("records")} if len(points) else {}
    for index, row in summary[summary["measure"] == "bandwidth_Bps"].iterrows():
        request = request_of(row, metas.get(row["point"], {}))
        if request is None:
            continue
        found = resolve(request, bounds)
        for key, value in found.items():
            summary.at[index, key] = value
        if found.get("bound_Bps"):
            summary.at[index, "pct_of_bound"] = 100 * row["median"] / found["bound_Bps"]
    summary["pct_of_bound"] = pd.to_numeric(summary["pct_of_bound"], errors="coerce")
    summary["bound_Bps"] = pd.to_numeric(summary["bound_Bps"], errors="coerce")
    summary["bound_ci_high_Bps"] = pd.to_numeric(summary["bound_ci_high_Bps"], errors="coerce")
    return summary


def _beyond(summary: pd.DataFrame) -> pd.Series:
    """Whether each row's CI lies wholly above its bound's (the medians where an interval is unknown)."""
    low = pd.to_numeric(summary["ci_low"], errors="coerce") if "ci_low" in summary else summary["median"] * float("nan")
    high = summary["bound_ci_high_Bps"] if "bound_ci_high_Bps" in summary else summary["bound_Bps"] * float("nan")
    point = low.where(low.notna(), summary["median"])
    bound = high.where(high.notna(), summary["bound_Bps"])
    return point > bound


def _over(summary: pd.DataFrame, limit: float, beyond: bool) -> pd.DataFrame:
    if summary.empty or "pct_of_bound" not in summary:
        return summary.iloc[0:0]
    over = summary[summary["pct_of_bound"] > limit]
    return over[_beyond(over) == beyond] if len(over) else over


def above(summary: pd.DataFrame, limit: float = 100.0) -> pd.DataFrame:
    """The bandwidth rows above their bound beyond both figures' uncertainty (see the module docstring)."""
    return _over(summary, limit, beyond=True)


def at_bound(summary: pd.DataFrame, limit: float = 100.0) -> pd.DataFrame:
    """The bandwidth rows whose median is above their bound but whose CI overlaps the bound's: within noise."""
    return _over(summary, limit, beyond=False)
