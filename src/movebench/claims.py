"""The studies' qualitative claims (a `claims` YAML file) judged on a campaign's records.

A claim names a quantity (a metric of one `variant`, or the `ratio` of two variants' figures in the same cell:
the same parameters but the variant; `across` names another parameter to compare by, e.g. io's backend) and
says something about its shape, in one of four kinds:

- `trend`: the quantity rises (`sign: 1`) or falls (`sign: -1`) along an `axis` (nodes, value_size, ...),
  and, where the study says "linear", has a log-log `slope` near a value (`slope: {value: 1, within: 0.25}`);
- `crossover`: a ratio passes 1 along an axis between two values (`between: [lo, hi]`): below 1 at every
  measured axis value <= lo and above 1 at every one >= hi (in place overtakes out of place as density grows);
- `share`: the ratio is above 1 in at least `at_least` of the cells where both variants ran (get beats put
  "frequently": at least half);
- `band`: the quantity lies in `[low, high]` (a band of % of peak) at every matching point.

`per: rank` divides the metric by each point's ranks and pairs points at equal ranks per node instead of equal
ranks, for a claim about a cluster that grows one process per node ("bandwidth per rank lowers as the cluster
grows": 2 ranks on 2 nodes against 4 on 4, not 4 ranks on 2 nodes against 4 on 4).

Each claim is judged `reproduced`, `not reproduced` or `not measured`, never a bare pass: `evidence` says which
points stood behind it and what they gave (the fitted slope with its CI, the crossover's position, k of n
cells, the medians against the band).

Statistics: a point's figure is `core.stats.launch_summary` of its counted records (the median of its launch
medians and the t-interval over launches; with one launch, the repetitions' order-statistics CI). A ratio's CI
is the conservative interval of the two figures' CIs, [lo_num / hi_den, hi_num / lo_den]. A trend's slope is
least squares of log figure on log axis value; its 95% CI is the t-interval (df = n - 2) with three or more axis
values, and with two the extremes of the two points' CIs. A trend or a share or a crossover counts only what its
CIs settle: a slope whose CI holds 0, or a ratio whose CI holds 1, is inconclusive, and an inconclusive claim is
"not reproduced" with the reason in its evidence.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from movebench import families, references, resources
from movebench.core import stats
from movebench.core.problems import schema_problems
from movebench.core.sizes import SizeError, parse_size
from movebench.core.tables import counted

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = resources.schema("claims")
STATUSES = ("reproduced", "not reproduced", "not measured")
COLUMNS = ("id", "study", "kind", "family", "what", "statement", "status", "evidence", "points", "quote", "note")


class ClaimsError(references.ReferencesError):
    """A bad claims file: one line per problem."""

    def message(self) -> str:
        return super().message().replace("invalid references file", "invalid claims file", 1)


def default_file() -> Path:
    return resources.published_claims()


def validate(document: dict, path=None) -> dict:
    import copy

    document = copy.deepcopy(document if document is not None else {})
    problems = schema_problems(document, yaml.safe_load(SCHEMA.read_text()))
    if not problems:
        known, seen = families.names(), set()
        for i, claim in enumerate(document["claims"]):
            where = f"claims[{i}]"
            if claim["id"] in seen:
                problems.append((f"{where}.id", claim["id"], "already used by an earlier claim: ids must be unique"))
            seen.add(claim["id"])
            if claim["family"] not in known:
                problems.append((f"{where}.family", claim["family"], "must be one of " + ", ".join(known)))
            if ("variant" in claim) == ("ratio" in claim):
                problems.append((where, claim["id"], "give `variant` (one variant's metric) or `ratio`, one of them"))
            if claim["kind"] in ("crossover", "share") and "ratio" not in claim:
                problems.append((f"{where}.kind", claim["kind"], "compares two variants: give `ratio`"))
            need = {"trend": ("axis", "sign"), "crossover": ("axis", "between"), "share": ("at_least",),
                    "band": ("low", "high")}[claim["kind"]]
            for key in need:
                if key not in claim:
                    problems.append((f"{where}.{key}", None, f"a {claim['kind']} claim needs `{key}`"))
    if problems:
        raise ClaimsError(problems, path)
    return document


def load(path=None) -> dict:
    path = Path(path or default_file())
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ClaimsError([("(file)", str(path), f"cannot be read: {error.strerror}")], path) from None
    return validate(document, path)


# --- the points a claim reads ---


def _number(value) -> float | None:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(parse_size(value))
    except (SizeError, TypeError, ValueError):
        try:
            return float(value)
        except (TypeError, ValueError):
            return None


def _plain(value):
    """A table cell as the config wrote it: numpy scalars as Python's, 1048576.0 (a float column) as 1048576."""
    value = value.item() if hasattr(value, "item") else value
    return int(value) if isinstance(value, float) and value.is_integer() else value


class Figure:
    """A point's (or a cell's ratio's) figure: median and 95% CI, with where it came from."""

    def __init__(self, params: dict, median: float, low: float, high: float, label: str, n: str):
        self.params, self.median, self.low, self.high, self.label, self.n = params, median, low, high, label, n

    def text(self, unit: str = "") -> str:
        return f"{self.median:.3g}{unit} [{self.low:.3g}, {self.high:.3g}]"


def _figures(records: pd.DataFrame, claim: dict) -> list[Figure]:
    """The claim's quantity at every cell the records hold that matches `where`."""
    import pandas as pd

    part = records[records["family"] == claim["family"]] if len(records) else records
    if not len(part) or claim["metric"] not in part.columns:
        return []
    fam = families.load(claim["family"])
    across = claim.get("across") or fam.variant  # the parameter whose values `variant` / `ratio` name
    keys = [k for k in fam.point_keys if k in part.columns and k != across]
    if across != fam.variant and across not in part.columns:
        return []
    where = claim.get("where") or {}
    by_cell: dict[tuple, dict[str, Figure]] = {}
    for point, group in part.groupby("point", sort=True):
        first = group.iloc[0]
        params = {k: _plain(first[k]) for k in keys if not pd.isna(first[k])}
        if not all(k in params and references._matches(v, params[k]) for k, v in where.items()):
            continue
        values = pd.to_numeric(group[claim["metric"]], errors="coerce")
        if "launch" in group.columns:
            launches = [v.dropna().tolist() for _, v in values.groupby(group["launch"].fillna(0))]
        else:
            launches = [values.dropna().tolist()]
        s = stats.launch_summary(launches)
        if not s["n"]:
            continue
        scale = 100.0 if claim.get("unit") == "%" else 1.0
        if claim.get("per") == "rank" and _number(params.get("ranks")):
            ranks = _number(params.pop("ranks"))
            scale /= ranks
            params["ranks_per_node"] = f"{ranks / (_number(params.get('nodes')) or 1):g}"
        cell = tuple(sorted((k, str(v)) for k, v in params.items()))
        by_cell.setdefault(cell, {})[str(first["variant"] if across == fam.variant else first[across])] = Figure(
            params, s["median"] * scale, s["ci_low"] * scale, s["ci_high"] * scale, point,
            f"{s['n']} in {s['launches']} launch{'es' if s['launches'] != 1 else ''}")
    out = []
    for variants in by_cell.values():
        if "variant" in claim:
            if claim["variant"] in variants:
                out.append(variants[claim["variant"]])
            continue
        top, bottom = variants.get(claim["ratio"]["numerator"]), variants.get(claim["ratio"]["denominator"])
        if top is None or bottom is None or bottom.median <= 0 or bottom.low <= 0:
            continue
        out.append(Figure(top.params, top.median / bottom.median, top.low / bottom.high, top.high / bottom.low,
                          f"{top.label} / {bottom.label}", f"{top.n} / {bottom.n}"))
    return out


def _series(figures: list[Figure], axis: str) -> dict[tuple, list[tuple[float, Figure]]]:
    """Figures grouped by every parameter but `axis`, each series sorted along it."""
    series: dict[tuple, list[tuple[float, Figure]]] = {}
    for f in figures:
        x = _number(f.params.get(axis))
        if x is None or x <= 0:
            continue
        rest = tuple(sorted((k, str(v)) for k, v in f.params.items() if k != axis))
        series.setdefault(rest, []).append((x, f))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in series.items()}


def _label(rest: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in rest) or "all"


def fit_slope(points: list[tuple[float, Figure]]) -> tuple[float, float, float]:
    """Log-log least-squares slope with its 95% CI (t, df = n - 2; with two points the CIs' extremes)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(f.median) for _, f in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if n == 2:
        (x1, f1), (x2, f2) = points
        dx = math.log(x2) - math.log(x1)
        ends = [(math.log(a) - math.log(b)) / dx for a in (f2.low, f2.high) for b in (f1.low, f1.high)]
        return slope, min(ends), max(ends)
    residual = sum((y - (my + slope * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    se = math.sqrt(residual / (n - 2) / sxx)
    t = stats.t_quantile(0.975, n - 2)
    return slope, slope - t * se, slope + t * se


# --- the four kinds ---


def _in_range(claim, x: float) -> bool:
    low, high = (claim.get("axis_range") or [None, None])
    return (low is None or x >= _number(low)) and (high is None or x <= _number(high))


def _trend(claim, figures):
    series = {k: [(x, f) for x, f in v if _in_range(claim, x) and f.median > 0 and f.low > 0]
              for k, v in _series(figures, claim["axis"]).items()}  # a log-log fit: positive figures only
    series = {k: v for k, v in series.items() if len(v) >= 2}
    if not series:
        return "not measured", f"no series with two or more values of {claim['axis']}", 0
    sign, target = claim["sign"], claim.get("slope")
    parts, good = [], 0
    for rest, points in series.items():
        slope, low, high = fit_slope(points)
        settled = (low > 0) if sign > 0 else (high < 0)
        near = target is None or abs(slope - target["value"]) <= target["within"]
        why = "" if settled else " (CI holds 0 or the other sign)"
        if settled and not near:
            why = f" (slope not within {target['value']} +- {target['within']})"
        good += settled and near
        pts = "; ".join(f"{claim['axis']}={x:g}: {f.text()}" for x, f in points)
        parts.append(f"[{_label(rest)}] slope {slope:.2f} [{low:.2f}, {high:.2f}] over {len(points)} values{why}: "
                     f"{pts}")
    status = "reproduced" if good == len(series) else "not reproduced"
    return status, f"{good} of {len(series)} series as claimed; " + " | ".join(parts), sum(map(len, series.values()))


def _crossover(claim, figures):
    lo, hi = (_number(v) for v in claim["between"])
    series = _series(figures, claim["axis"])
    parts, good, measured, count = [], 0, 0, 0
    for rest, points in series.items():
        before = [(x, f) for x, f in points if x <= lo]
        after = [(x, f) for x, f in points if x >= hi]
        pts = "; ".join(f"{claim['axis']}={x:g}: {f.text('x')}" for x, f in points)
        count += len(points)
        if not before or not after:
            parts.append(f"[{_label(rest)}] no value at or below {lo:g} and at or above {hi:g}: {pts}")
            continue
        measured += 1
        ok = all(f.high < 1 for _, f in before) and all(f.low > 1 for _, f in after)
        where = _crossing(points)
        good += ok
        near = (f"the medians cross 1 near {claim['axis']}={where:.3g}" if where is not None
                else "the medians never cross 1 upwards")
        verdict = "as claimed" if ok else (f"not as claimed (claimed: the CI below 1 at every {claim['axis']} <= "
                                           f"{lo:g} and above 1 at every one >= {hi:g})")
        parts.append(f"[{_label(rest)}] {verdict}; {near}: {pts}")
    if not measured:
        return "not measured", " | ".join(parts) or f"no point of {claim['axis']}", count
    status = "reproduced" if good == measured else "not reproduced"
    return status, f"{good} of {measured} series as claimed; " + " | ".join(parts), count


def _crossing(points) -> float | None:
    """Where the ratio's medians first pass 1 upwards, log-interpolated between the two axis values around it."""
    for (x1, f1), (x2, f2) in zip(points, points[1:], strict=False):
        if f1.median < 1 <= f2.median:
            a, b = math.log(f1.median), math.log(f2.median)
            return math.exp(math.log(x1) + (0 - a) / (b - a) * (math.log(x2) - math.log(x1)))
    return None


def _share(claim, figures):
    if not figures:
        return "not measured", "no cell where both variants ran", 0
    above = [f for f in figures if f.low > 1]
    below = [f for f in figures if f.high < 1]
    share = len(above) / len(figures)
    status = "reproduced" if share >= claim["at_least"] else "not reproduced"
    cells = "; ".join(f"{_label(tuple(sorted((k, str(v)) for k, v in f.params.items())))}: {f.text('x')}"
                      for f in figures)
    return status, (f"above 1 in {len(above)} of {len(figures)} cells ({share:.0%}; claim: at least "
                    f"{claim['at_least']:.0%}), below 1 in {len(below)}, CI holds 1 in "
                    f"{len(figures) - len(above) - len(below)}: {cells}"), len(figures)


def _band(claim, figures):
    if not figures:
        return "not measured", "no matching point", 0
    low, high, unit = claim["low"], claim["high"], claim.get("unit", "")
    inside = [f for f in figures if low <= f.median <= high]
    status = "reproduced" if len(inside) == len(figures) else "not reproduced"
    pts = "; ".join(f"{_label(tuple(sorted((k, str(v)) for k, v in f.params.items())))}: {f.text(unit)}"
                    for f in figures)
    return status, f"{len(inside)} of {len(figures)} points in [{low:g}, {high:g}]{unit}: {pts}", len(figures)


KINDS = {"trend": _trend, "crossover": _crossover, "share": _share, "band": _band}


def judge(records: pd.DataFrame, document: dict | None = None, studies=None) -> pd.DataFrame:
    """One row per claim (columns `COLUMNS`) of the given studies (all when None), judged on `records`."""
    import pandas as pd

    document = document if document is not None else load()
    records = counted(records) if len(records) else records
    rows = []
    for claim in document["claims"]:
        if studies is not None and claim["study"] not in studies:
            continue
        figures = _figures(records, claim)
        status, evidence, n = KINDS[claim["kind"]](claim, figures)
        what = (f"{claim['ratio']['numerator']} / {claim['ratio']['denominator']}" if "ratio" in claim
                else claim["variant"]) + f" ({claim['metric']})"
        rows.append({"id": claim["id"], "study": claim["study"], "kind": claim["kind"], "family": claim["family"],
                     "what": what, "statement": claim["statement"], "status": status, "evidence": evidence,
                     "points": n, "quote": claim.get("quote"), "note": claim.get("note")})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def check(results, document: dict | None = None, studies=None) -> pd.DataFrame:
    """`judge` on a results folder (or `compare.Results`)."""
    from movebench.compare import Results, read_results

    results = results if isinstance(results, Results) else read_results(results)
    return judge(results.records, document, studies)
