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
grows": 2 ranks on 2 nodes against 4 on 4, not 4 ranks on 2 nodes against 4 on 4). `per: link` divides it by
the point's nodes times the rate of one node's link, which the campaign states (`<family>.link_rate_gbit`:
"~1/3 of the hardware-limited network bandwidth"); with no rate stated the claim is not measured, and says so.

Each claim gets one of five words, never stronger than its intervals, and `evidence` that says which points
stood behind it and what they gave (the fitted slope with its CI, the crossover's position, k of n cells, the
figures against the band):

- `reproduced`: every 95% interval the claim reads lies wholly on the claimed side (a band's figure inside the
  band, a trend's slope interval inside the claimed range, a share's cells above 1 in enough cells);
- `not reproduced`: an interval lies wholly on the wrong side (outside the band, the slope's interval outside
  the range, too few cells left that could still come out above 1);
- `inconclusive`: otherwise; the evidence says how many launches a rerun would need to settle it if the
  estimate held (`launches_to_settle`);
- `not comparable`: the campaign ran on a stand-in the claim excludes (`needs`: Azurite for Azure Blob, a
  disk that is not Lustre, fewer hosts than a point's nodes), from each point's meta; the evidence still
  says what the figures gave;
- `not measured`: no point the claim reads.

Statistics: a point's figure is `core.stats.launch_summary` of its counted records (the median of its launch
medians and the t-interval over launches; with one launch, the repetitions' order-statistics CI). A ratio's CI
is the conservative interval of the two figures' CIs, [lo_num / hi_den, hi_num / lo_den]. A trend's slope is
the weighted least-squares fit of log figure on log axis value, each point weighted by its own interval (its
log half-width read as 1.96 standard errors), so three wide intervals give a wide slope; with three or more
points that scatter beyond their intervals the slope's standard error grows by the scatter (t, df = n - 2).
One rule for two values and for many. A figure whose interval reaches 0 is listed in the evidence; it carries
no weight in a slope and settles no cell.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from movebench import families
from movebench.core import resources, stats
from movebench.core.layout import ResultsLayout
from movebench.core.problems import schema_problems
from movebench.core.sizes import SizeError, parse_size
from movebench.core.tables import counted
from movebench.judging import references
from movebench.judging.references import log_distance, place, settle_words

if TYPE_CHECKING:
    import pandas as pd

STATUSES = ("reproduced", "not reproduced", "inconclusive", "not comparable", "not measured")
#: What a claim may need of the system its points ran on (`needs`), and what a point's meta must show for it.
NEEDS = {
    "azure-blob": "blob points against Azure Blob Storage, not an emulator (Azurite)",
    "lustre": "posix and mpiio points on a Lustre filesystem",
    "host-per-node": "every point on as many distinct hosts as its nodes",
}
COLUMNS = ("id", "study", "kind", "family", "what", "statement", "status", "evidence", "points", "quote", "note",
           "needs")


class ClaimsError(references.ReferencesError):
    """A bad claims file: one line per problem."""

    def message(self) -> str:
        return super().message().replace("invalid references file", "invalid claims file", 1)


def default_file() -> Path:
    return resources.published_claims()


def validate(document: dict, path=None) -> dict:
    import copy

    document = copy.deepcopy(document if document is not None else {})
    problems = schema_problems(document, resources.schema_document("claims"))
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
            if claim.get("sign") == 0 and "slope" not in claim:
                problems.append((f"{where}.sign", 0, "a flat trend (sign 0) needs `slope` (e.g. {value: 0, "
                                                      "within: 0.1}); or give 1 (rises) or -1 (falls)"))
    if problems:
        raise ClaimsError(problems, path)
    return document


def load(path=None) -> dict:
    path = Path(path or default_file())
    try:
        document = resources.load_yaml(path.read_text())
    except OSError as error:
        raise ClaimsError([("(file)", str(path), f"cannot be read: {error.strerror}")], path) from None
    except yaml.YAMLError as error:
        raise ClaimsError([("(file)", str(path), f"is not YAML: {error}".splitlines()[0])], path) from None
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


Z95 = 1.959964  # a two-sided 95% normal quantile: a point's interval read as estimate +- 1.96 standard errors


class Figure:
    """A point's (or a cell's ratio's) figure: median and 95% CI, with where it came from (`points`: the point
    paths behind it, for what they ran on; `launches`: the fewest launches behind it)."""

    def __init__(self, params: dict, median: float, low: float, high: float, label: str, n: str,
                 points: tuple = (), launches: int = 1):
        self.params, self.median, self.low, self.high, self.label, self.n = params, median, low, high, label, n
        self.points, self.launches = points or (label,), launches

    def reaches_zero(self) -> bool:
        return not (self.low > 0 and math.isfinite(self.high))

    def text(self, unit: str = "") -> str:
        middle = f"{self.median:.3g}" if math.isfinite(self.median) else "undefined"
        high = f"{self.high:.3g}" if math.isfinite(self.high) else "inf"
        said = " (its interval reaches 0)" if self.reaches_zero() else ""
        return f"{middle}{unit} [{self.low:.3g}, {high}]{said}"


def link_rates(config: dict | None) -> dict[str, float]:
    """family -> the rate of one node's link in bytes/s, from each section's `link_rate_gbit` (`per: link`)."""
    return {name: float(section["link_rate_gbit"]) * 1e9 / 8 for name, section in (config or {}).items()
            if isinstance(section, dict) and section.get("link_rate_gbit")}


def _figures(records: pd.DataFrame, claim: dict, link_Bps: float | None = None) -> list[Figure]:
    """The claim's quantity at every cell the records hold that matches `where` (`per: link`: over `link_Bps`
    x nodes)."""
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
        if claim.get("per") == "link":
            if not link_Bps:
                continue
            scale /= link_Bps * (_number(params.get("nodes")) or 1)
        if claim.get("per") == "rank" and _number(params.get("ranks")):
            ranks = _number(params.pop("ranks"))
            scale /= ranks
            params["ranks_per_node"] = f"{ranks / (_number(params.get('nodes')) or 1):g}"
        cell = tuple(sorted((k, str(v)) for k, v in params.items()))
        by_cell.setdefault(cell, {})[str(first["variant"] if across == fam.variant else first[across])] = Figure(
            params, s["median"] * scale, s["ci_low"] * scale, s["ci_high"] * scale, point,
            f"{s['n']} in {s['launches']} launch{'es' if s['launches'] != 1 else ''}", (point,), s["launches"])
    out = []
    for variants in by_cell.values():
        if "variant" in claim:
            if claim["variant"] in variants:
                out.append(variants[claim["variant"]])
            continue
        top, bottom = variants.get(claim["ratio"]["numerator"]), variants.get(claim["ratio"]["denominator"])
        if top is None or bottom is None:
            continue
        # a denominator whose interval reaches 0 gives a ratio without an upper end: said, not dropped
        out.append(Figure(top.params, _divide(top.median, bottom.median), _divide(top.low, bottom.high),
                          _divide(top.high, bottom.low), f"{top.label} / {bottom.label}", f"{top.n} / {bottom.n}",
                          top.points + bottom.points, min(top.launches, bottom.launches)))
    return _best_of(claim, out) if claim.get("best_of") else out


def _best_of(claim, figures: list[Figure]) -> list[Figure]:
    """The best figure over the `best_of` parameters (the study's best design over its tuning): one per cell of
    the other parameters, by median, higher or lower as the metric's `better` says; its params name the pick."""
    measure = families.load(claim["family"]).measure.get(claim["metric"])
    lower = getattr(measure, "better", "higher") == "lower"
    cells: dict[tuple, list[Figure]] = {}
    for f in figures:
        rest = tuple(sorted((k, str(v)) for k, v in f.params.items() if k not in claim["best_of"]))
        cells.setdefault(rest, []).append(f)
    out = []
    for group in cells.values():
        best = (min if lower else max)(group, key=lambda f: f.median if math.isfinite(f.median) else -math.inf)
        picked = ", ".join(f"{k}={best.params[k]}" for k in claim["best_of"] if k in best.params)
        params = {k: v for k, v in best.params.items() if k not in claim["best_of"]}
        out.append(Figure({**params, "best": f"{picked} of {len(group)}"}, best.median, best.low, best.high,
                          best.label, best.n, best.points, best.launches))
    return out


def _divide(top: float, bottom: float) -> float:
    if bottom > 0:
        return top / bottom
    return math.inf if top > 0 else math.nan


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


def _cell(f: Figure) -> str:
    return _label(tuple(sorted((k, str(v)) for k, v in f.params.items())))


def fit_slope(points: list[tuple[float, Figure]]) -> tuple[float, float, float]:
    """Log-log slope with its 95% CI, each point weighted by its own interval: weighted least squares with
    weights 1 / se^2, se = the figure's log half-width / 1.96. With three or more points whose scatter about
    the line exceeds their intervals (chi^2 / (n - 2) > 1), the standard error grows by sqrt(chi^2 / (n - 2))
    and the quantile is t (df = n - 2). A figure whose interval reaches 0 has no weight; fewer than two
    weighted axis values give (-inf, inf)."""
    rows = []
    for x, f in points:
        if f.reaches_zero() or not f.median > 0:
            continue
        se = max((math.log(f.high) - math.log(f.low)) / (2 * Z95), 1e-9)  # launches that agree to the byte
        rows.append((math.log(x), math.log(f.median), 1 / se**2))
    if len({x for x, _, _ in rows}) < 2:
        return math.nan, -math.inf, math.inf
    sw = sum(w for _, _, w in rows)
    mx, my = sum(w * x for x, _, w in rows) / sw, sum(w * y for _, y, w in rows) / sw
    sxx = sum(w * (x - mx) ** 2 for x, _, w in rows)
    slope = sum(w * (x - mx) * (y - my) for x, y, w in rows) / sxx
    se, q = math.sqrt(1 / sxx), Z95
    if len(rows) > 2:
        chi2 = sum(w * (y - my - slope * (x - mx)) ** 2 for x, y, w in rows) / (len(rows) - 2)
        if chi2 > 1:
            se, q = se * math.sqrt(chi2), stats.t_quantile(0.975, len(rows) - 2)
    return slope, slope - q * se, slope + q * se


def _combine(verdicts: list[str]) -> str:
    """A claim over several series or points: reproduced when every one is, not reproduced when any is."""
    if verdicts and all(v == "reproduced" for v in verdicts):
        return "reproduced"
    return "not reproduced" if "not reproduced" in verdicts else "inconclusive"


# --- the four kinds ---


def _in_range(claim, x: float) -> bool:
    low, high = (claim.get("axis_range") or [None, None])
    return (low is None or x >= _number(low)) and (high is None or x <= _number(high))


def _claimed_slopes(claim) -> tuple[float, float]:
    """The slopes the claim accepts: its sign's side, narrowed to value +- within where it says "linear"."""
    lo, hi = {1: (0.0, math.inf), -1: (-math.inf, 0.0), 0: (-math.inf, math.inf)}[claim["sign"]]
    target = claim.get("slope")
    if target:
        lo, hi = max(lo, target["value"] - target["within"]), min(hi, target["value"] + target["within"])
    return lo, hi


def _trend(claim, figures):
    series = {k: [(x, f) for x, f in v if _in_range(claim, x)] for k, v in _series(figures, claim["axis"]).items()}
    series = {k: v for k, v in series.items() if len(v) >= 2}
    if not series:
        return "not measured", f"no series with two or more values of {claim['axis']}", 0
    lo, hi = _claimed_slopes(claim)
    claimed = (f"[{lo:g}, {hi:g}]" if math.isfinite(lo) and math.isfinite(hi)
               else "above 0" if claim["sign"] > 0 else "below 0")
    parts, verdicts = [], []
    for rest, points in series.items():
        slope, low, high = fit_slope(points)
        where = place(low, high, lo, hi) if math.isfinite(slope) else "overlaps"
        verdict = {"inside": "reproduced", "outside": "not reproduced", "overlaps": "inconclusive"}[where]
        verdicts.append(verdict)
        if verdict == "reproduced":
            why = ""
        elif verdict == "not reproduced":
            why = f" (its interval lies outside the claimed {claimed})"
        elif not math.isfinite(slope):
            why = " (inconclusive: fewer than two axis values have an interval above 0, so no slope is fitted)"
        else:
            edges = [e for e in (lo, hi) if math.isfinite(e)]
            distance = min(abs(slope - e) for e in edges) if edges else 0.0
            launches = min(f.launches for _, f in points)
            why = (f" (inconclusive: its interval reaches past the claimed {claimed}; "
                   f"{settle_words(launches, (high - low) / 2, distance)})")
        pts = "; ".join(f"{claim['axis']}={x:g}: {f.text()}" for x, f in points)
        fitted = f"slope {slope:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(slope) else "no slope"
        parts.append(f"[{_label(rest)}] {fitted} over {len(points)} values{why}: {pts}")
    good = verdicts.count("reproduced")
    return (_combine(verdicts), f"{good} of {len(series)} series as claimed (slope {claimed}); " + " | ".join(parts),
            sum(map(len, series.values())))


def _crossover(claim, figures):
    lo, hi = (_number(v) for v in claim["between"])
    series = _series(figures, claim["axis"])
    parts, verdicts, count = [], [], 0
    for rest, points in series.items():
        before = [(x, f) for x, f in points if x <= lo]
        after = [(x, f) for x, f in points if x >= hi]
        pts = "; ".join(f"{claim['axis']}={x:g}: {f.text('x')}" for x, f in points)
        count += len(points)
        if not before or not after:
            parts.append(f"[{_label(rest)}] no value at or below {lo:g} and at or above {hi:g}: {pts}")
            continue
        sides = [place(f.low, f.high, 0, 1) for _, f in before] + [place(f.low, f.high, 1, math.inf) for _, f in after]
        verdict = ("reproduced" if all(s == "inside" for s in sides)
                   else "not reproduced" if "outside" in sides else "inconclusive")
        verdicts.append(verdict)
        where = _crossing(points)
        near = (f"the medians cross 1 near {claim['axis']}={where:.3g}" if where is not None
                else "the medians never cross 1 upwards")
        said = {"reproduced": "as claimed",
                "not reproduced": f"not as claimed (a CI lies wholly on the wrong side of 1: claimed below 1 at "
                                  f"every {claim['axis']} <= {lo:g} and above 1 at every one >= {hi:g})",
                "inconclusive": "inconclusive (a CI holds 1)"}[verdict]
        parts.append(f"[{_label(rest)}] {said}; {near}: {pts}")
    if not verdicts:
        return "not measured", " | ".join(parts) or f"no point of {claim['axis']}", count
    good = verdicts.count("reproduced")
    return _combine(verdicts), f"{good} of {len(verdicts)} series as claimed; " + " | ".join(parts), count


def _crossing(points) -> float | None:
    """Where the ratio's medians first pass 1 upwards, log-interpolated between the two axis values around it."""
    for (x1, f1), (x2, f2) in zip(points, points[1:], strict=False):
        if 0 < f1.median < 1 <= f2.median < math.inf:
            a, b = math.log(f1.median), math.log(f2.median)
            return math.exp(math.log(x1) + (0 - a) / (b - a) * (math.log(x2) - math.log(x1)))
    return None


def _share(claim, figures):
    if not figures:
        return "not measured", "no cell where both variants ran", 0
    above = [f for f in figures if f.low > 1]
    below = [f for f in figures if f.high < 1]
    open_ = len(figures) - len(above) - len(below)
    share = len(above) / len(figures)
    if share >= claim["at_least"]:
        status = "reproduced"
    elif (len(above) + open_) / len(figures) < claim["at_least"]:
        status = "not reproduced"  # even if every unsettled cell came out above 1, too few would
    else:
        status = "inconclusive"
    cells = "; ".join(f"{_cell(f)}: {f.text('x')}" for f in figures)
    return status, (f"above 1 in {len(above)} of {len(figures)} cells ({share:.0%}; claim: at least "
                    f"{claim['at_least']:.0%}), below 1 in {len(below)}, CI holds 1 in {open_}: {cells}"), len(figures)


def _band(claim, figures):
    if not figures:
        return "not measured", "no matching point", 0
    low, high, unit = claim["low"], claim["high"], claim.get("unit", "")
    verdicts, pts = [], []
    for f in figures:
        where = place(f.low, f.high, low, high)
        verdicts.append({"inside": "reproduced", "outside": "not reproduced", "overlaps": "inconclusive"}[where])
        pts.append(f"{_cell(f)}: {f.text(unit)} {where}")
    inside, outside = verdicts.count("reproduced"), verdicts.count("not reproduced")
    status = _combine(verdicts)
    settle = ""
    if status == "inconclusive":
        # the open figure furthest from settling says what a rerun needs
        worst = [f for f, v in zip(figures, verdicts, strict=True) if v == "inconclusive"]
        f0, (half, distance) = max(((f, log_distance(f.median, f.low, f.high, (low, high))) for f in worst),
                                   key=lambda p: p[1][0] - p[1][1])
        settle = f"; {settle_words(f0.launches, half, distance)} at {_cell(f0)}"
    return status, (f"{inside} of {len(figures)} intervals wholly in [{low:g}, {high:g}]{unit}, {outside} wholly "
                    f"outside{settle}: " + "; ".join(pts)), len(figures)


KINDS = {"trend": _trend, "crossover": _crossover, "share": _share, "band": _band}


# --- what the points ran on ---


def ran_on(meta: dict) -> dict:
    """What a point ran on, from its flattened meta (a points-table row, `aggregate.flatten_meta`): `blob`
    (azurite or azure, blob points only), `filesystem` (posix and mpiio points), `hosts` (distinct hosts)."""
    import json

    def value(key):
        v = meta.get(key)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) or v == "" else v

    out = {}
    endpoint = value("storage.endpoint")
    if value("storage.backend") == "blob" and endpoint:
        emulated = any(s in str(endpoint) for s in ("devstoreaccount1", "127.0.0.1", "localhost"))
        out["blob"] = "azurite" if emulated else "azure"
    if value("storage.filesystem"):
        out["filesystem"] = str(value("storage.filesystem"))
    hosts = value("fingerprint.hosts") or value("hostnames")
    if isinstance(hosts, str):
        try:
            hosts = json.loads(hosts)
        except ValueError:
            hosts = [hosts]
    if hosts:
        out["hosts"] = len(set(hosts))
    return out


def _stand_ins(claim, figures, conditions: dict) -> list[str]:
    """Why the claim's figures ran on something it excludes (one line per kind of stand-in), empty when none."""
    if not claim.get("needs"):
        return []
    found: dict[str, set] = {}
    for f in figures:
        for path in f.points:
            seen = conditions.get((claim["family"], path))
            nodes = _number(f.params.get("nodes"))
            for need in claim["needs"]:
                if seen is None:
                    found.setdefault(need, set()).add("no meta says what it ran on")
                elif need == "azure-blob" and seen.get("blob", "azure") != "azure":
                    found.setdefault(need, set()).add(f"blob on {seen['blob']}")
                elif need == "lustre" and seen.get("filesystem", "lustre") != "lustre":
                    found.setdefault(need, set()).add(f"posix on {seen['filesystem']}")
                elif need == "host-per-node" and nodes and seen.get("hosts", 0) < nodes:
                    found.setdefault(need, set()).add(f"{nodes:g} nodes on {seen.get('hosts', 0)} host(s)")
    return [f"needs {NEEDS[need]}; ran with " + ", ".join(sorted(why)) for need, why in found.items()]


def conditions_of(results) -> dict[tuple[str, str], dict]:
    """(family, point) -> `ran_on` of its meta: from the points tables beside the records,
    else from the raw metas `compare.read_results` read."""
    import pandas as pd

    from movebench.engine.aggregate import flatten_meta

    out = {}
    for (family, point), meta in (results.metas or {}).items():
        out[(family, point)] = ran_on(flatten_meta(meta))
    layout = ResultsLayout(Path(results.path))
    for family in layout.tabled():
        file = layout.table(family, "points")
        if not file.exists():
            continue
        for row in pd.read_csv(file).to_dict("records"):
            if row.get("status", "ok") == "ok":
                out[(family, row["point"])] = ran_on(row)
    return out


def judge(records: pd.DataFrame, document: dict | None = None, studies=None,
          conditions: dict | None = None, links: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per claim (columns `COLUMNS`) of the given studies (all when None), judged on `records`;
    `conditions`: (family, point) -> `ran_on`, for the claims that need a system (`needs`); none known: every
    such claim is not comparable. `links`: `link_rates` of the campaign's config, for `per: link` claims."""
    import pandas as pd

    document = document if document is not None else load()
    records = counted(records) if len(records) else records
    rows = []
    for claim in document["claims"]:
        if studies is not None and claim["study"] not in studies:
            continue
        link = (links or {}).get(claim["family"])
        figures = _figures(records, claim, link)
        status, evidence, n = KINDS[claim["kind"]](claim, figures)
        if claim.get("per") == "link" and not link:
            evidence = (f"needs the rate of one node's link: state it as {claim['family']}.link_rate_gbit in the "
                        "campaign's config (Gbit/s)")
        stand_ins = _stand_ins(claim, figures, conditions or {}) if status != "not measured" else []
        if stand_ins:
            evidence = (f"not comparable: {'; '.join(stand_ins)}. On these points it would be {status}: "
                        + evidence)
            status = "not comparable"
        what = (f"{claim['ratio']['numerator']} / {claim['ratio']['denominator']}" if "ratio" in claim
                else claim["variant"]) + f" ({claim['metric']})"
        rows.append({"id": claim["id"], "study": claim["study"], "kind": claim["kind"], "family": claim["family"],
                     "what": what, "statement": claim["statement"], "status": status, "evidence": evidence,
                     "points": n, "quote": claim.get("quote"), "note": claim.get("note"),
                     "needs": ", ".join(claim.get("needs") or [])})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def check(results, document: dict | None = None, studies=None, also=(), links: dict | None = None) -> pd.DataFrame:
    """`judge` on a results folder (or `compare.Results`), with what its points ran on; `also`: more results
    folders whose points join them, for a study whose systems ran as campaigns of their own (the cloud study's
    Azure VMs and Cirrus' Lustre). A point in two of them is refused (ValueError naming it and both folders):
    which figure would be the study's is not the judge's to pick."""
    import pandas as pd

    from movebench.judging.compare import Results, read_results

    runs = [r if isinstance(r, Results) else read_results(r) for r in (results, *also)]
    conditions, owner = {}, {}
    for run in runs:
        for key in run.records[["family", "point"]].drop_duplicates().itertuples(index=False, name=None):
            if key in owner:
                raise ValueError(f"{key[0]} point {key[1]} is in both {owner[key]} and {run.path}: give each "
                                 "point in one results folder")
            owner[key] = run.path
        conditions.update(conditions_of(run))
    records = pd.concat([r.records for r in runs], ignore_index=True) if len(runs) > 1 else runs[0].records
    return judge(records, document, studies, conditions, links)
