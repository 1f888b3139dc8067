"""Expected results (a `references` YAML file) checked against a campaign's records.

A reference selects points (family, a variant or a ratio of two variants, parameters), names a
metric, and gives a value with ReFrame-style relative tolerances and a unit. `check` returns one
row per reference and matched point (a reference with no matching point gets one "not measured"
row): the published value and its accepted band, this campaign's figure with its 95% CI, and
the status:

- ratios of two variants' medians are judged on our ratio's 95% CI (`movebench.reportkit.ratio`: at the
  launch level, as the report's headlines): `pass` (reproduced) when the whole CI lies in the band,
  `fail` (not reproduced) when it lies wholly outside, `inconclusive` when it overlaps an edge, with
  `launches` (the fewest behind the figure) for what a rerun would need to settle it;
- absolute figures are `shown` ("published on <system>") with the median and its 95% CI beside them
  (`core.stats.launch_summary`: over launches; a point of one launch, over its repetitions), unless the
  reference says `judged: true` (a site's own baseline);
- `not measured` when the campaign has no matching point (or no denominator point for a ratio).

`ci_vs_band` says whether the whole CI lies inside the band, overlaps it, or lies outside: the judged
status follows it, so no word is stronger than the interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from movebench import families
from movebench.core import resources, stats
from movebench.core.problems import ConfigError, schema_problems, show
from movebench.core.sizes import SizeError, parse_size
from movebench.core.tables import counted

if TYPE_CHECKING:  # annotations only: the config checks a references file (load) without pandas; checking imports it
    import pandas as pd

#: `published`: the studies movebench reproduces (config/references/published.yaml in a checkout, else the
#: package's copy; movebench.core.resources.published_references)
DEFAULT_FILE = resources.published_references()

# unit -> (dimension, factor to the SI unit of the metric)
UNITS = {
    "x": ("ratio", 1.0), "1": ("ratio", 1.0), "%": ("ratio", 0.01),
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6),
    "B/s": ("bandwidth", 1.0), "kB/s": ("bandwidth", 1e3), "MB/s": ("bandwidth", 1e6), "GB/s": ("bandwidth", 1e9),
    "KiB/s": ("bandwidth", 2.0**10), "MiB/s": ("bandwidth", 2.0**20), "GiB/s": ("bandwidth", 2.0**30),
    "B": ("bytes", 1.0), "kB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9),
    "KiB": ("bytes", 2.0**10), "MiB": ("bytes", 2.0**20), "GiB": ("bytes", 2.0**30),
    "ops/s": ("rate", 1.0),
}
STATUSES = ("pass", "fail", "inconclusive", "shown", "not measured")
COLUMNS = ("id", "study", "system", "family", "kind", "what", "parameters", "metric", "point", "value", "unit",
           "low", "high", "judged", "n", "launches", "measured", "ci_low", "ci_high", "status", "ci_vs_band",
           "quote", "note", "title", "source")


class ReferencesError(ConfigError):
    """A bad references file: one line per problem (key path, value, what would be valid)."""

    def __init__(self, problems, path=None):
        self.path = path
        super().__init__(problems)

    def message(self) -> str:
        lines = [f"  {p} = {show(v)}: {hint}" for p, v, hint in self.problems]
        noun = "problem" if len(lines) == 1 else "problems"
        where = f" {self.path}" if getattr(self, "path", None) else ""
        return f"invalid references file{where} ({len(lines)} {noun}):\n" + "\n".join(lines)


def dimension(metric: str) -> str:
    """What a metric measures, from its name: bandwidth, rate, bytes, time, or a plain ratio."""
    if metric.endswith("_Bps"):
        return "bandwidth"
    if metric.endswith("_per_s"):
        return "rate"
    if metric.endswith("_bytes"):
        return "bytes"
    if metric.endswith("_s"):
        return "time"
    return "ratio"


def validate(document: dict, path=None) -> dict:
    """The references document with defaults filled in; raises ReferencesError listing every problem."""
    import copy

    document = copy.deepcopy(document if document is not None else {})
    schema = resources.schema_document("references")
    problems = schema_problems(document, schema)
    if not problems:
        problems = _cross_checks(document)
    if problems:
        raise ReferencesError(problems, path)
    return document


def _cross_checks(document: dict) -> list[tuple[str, object, str]]:
    problems = []
    known = families.names()
    studies = document.get("studies") or {}
    seen = set()
    for i, ref in enumerate(document["references"]):
        where = f"references[{i}]"
        if ref["id"] in seen:
            problems.append((f"{where}.id", ref["id"], "already used by an earlier reference: ids must be unique"))
        seen.add(ref["id"])
        if ref["study"] not in studies:
            problems.append((f"{where}.study", ref["study"], "not a key of `studies`: "
                             + (", ".join(sorted(studies)) if studies else "add the study under `studies`")))
        if ref["family"] not in known:
            problems.append((f"{where}.family", ref["family"], "must be one of " + ", ".join(known)))
        has_variant, has_ratio = "variant" in ref, "ratio" in ref
        if has_variant == has_ratio:
            problems.append((where, {k: ref[k] for k in ("variant", "ratio") if k in ref},
                             "give `variant` (a metric of one variant) or `ratio` (two variants' medians), "
                             + ("not both" if has_variant else "one of them")))
        unit_dim = UNITS[ref["unit"]][0]
        if has_variant == has_ratio:
            pass  # what the unit must be depends on the kind, reported above
        elif has_ratio and ref["unit"] != "x":
            problems.append((f"{where}.unit", ref["unit"], "a ratio of two variants is in x"))
        elif not has_ratio and unit_dim != dimension(ref["metric"]):
            fits = [u for u, (d, _) in UNITS.items() if d == dimension(ref["metric"]) and u != "x"]
            problems.append((f"{where}.unit", ref["unit"],
                             f"{ref['metric']} is a {dimension(ref['metric'])}: use " + ", ".join(fits)))
        for key, value in (ref.get("parameters") or {}).items():
            if key == "variant":
                problems.append((f"{where}.parameters.{key}", value, "put the variant in `variant` or `ratio`"))
    return problems


def load(path=None) -> dict:
    path = Path(path or DEFAULT_FILE)
    try:
        document = resources.load_yaml(path.read_text())
    except OSError as error:
        raise ReferencesError([("(file)", str(path), f"cannot be read: {error.strerror}")], path) from None
    except yaml.YAMLError as error:
        raise ReferencesError([("(file)", str(path), f"is not YAML: {error}".splitlines()[0])], path) from None
    return validate(document, path)


# --- checking ---


def _matches(want, have) -> bool:
    have = have.item() if hasattr(have, "item") else have  # numpy scalars from the records table
    if isinstance(have, bool) or isinstance(want, bool):
        return want == have
    if isinstance(have, (int, float)):
        if isinstance(want, str):
            try:
                want = parse_size(want)
            except SizeError:
                return False
        return isinstance(want, (int, float)) and math.isclose(float(want), float(have), rel_tol=1e-9)
    return str(want) == str(have)


def _selected(points: dict[str, pd.DataFrame], variant: str, parameters: dict) -> list[str]:
    import pandas as pd

    chosen = []
    for point, group in points.items():
        if group["variant"].iloc[0] != variant:
            continue
        first = group.iloc[0]
        params = {k: first[k] for k in parameters if k in group.columns and not pd.isna(first[k])}
        if all(k in params and _matches(v, params[k]) for k, v in parameters.items()):
            chosen.append(point)
    return sorted(chosen)


def _swap_variant(point: str, old: str, new: str) -> str | None:
    segments = point.split("/")
    hits = [i for i, s in enumerate(segments) if s.partition("~")[2] == old]
    if len(hits) != 1:
        return None
    key = segments[hits[0]].partition("~")[0]
    segments[hits[0]] = f"{key}~{new}"
    return "/".join(segments)


def _launches(group: pd.DataFrame) -> int:
    return int(group["launch"].nunique()) if "launch" in group.columns else 1


def place(low: float, high: float, lo_band: float, hi_band: float) -> str:
    """Where an interval [low, high] lies against a band: inside, outside, or overlaps an edge."""
    if lo_band <= low and high <= hi_band:
        return "inside"
    if high < lo_band or low > hi_band:
        return "outside"
    return "overlaps"


def launches_to_settle(launches: int, half: float, distance: float, most: int = 200) -> int | None:
    """The launches a rerun would need for an interval of half-width `half` (now, from `launches` launches) to
    shrink below `distance` (its estimate's distance to the nearest edge that decides), if the estimate and the
    launch-to-launch spread held: the half-width goes as t(L - 1) / sqrt(L). None: never (the estimate sits on
    an edge), or more than `most`, or one launch (no launch-level spread to scale)."""
    if launches < 2 or not distance > 0 or not math.isfinite(half) or half <= 0:
        return None
    now = stats.t_quantile(0.975, launches - 1) / math.sqrt(launches)
    for more in range(launches + 1, most + 1):
        if half * stats.t_quantile(0.975, more - 1) / math.sqrt(more) / now < distance:
            return more
    return None


def settle_words(launches: int, half: float, distance: float) -> str:
    """What a rerun would need to settle an open verdict, in words (`launches_to_settle`)."""
    need = launches_to_settle(launches, half, distance)
    if need is not None:
        return f"about {need} launches (now {launches}) would settle it if the estimate held"
    if launches < 2:
        return "a rerun with 3 or more launches would give a launch-level interval to scale"
    if not distance > 0:
        return "no number of launches settles it: the estimate sits at the edge"
    return f"more than 200 launches (now {launches}) would be needed"


def log_distance(estimate: float, low: float, high: float, edges) -> tuple[float, float]:
    """(log half-width of [low, high], log distance from the estimate to the nearest positive finite edge);
    an interval that reaches 0 or has no upper end: (inf, 0)."""
    if not (low > 0 and math.isfinite(high) and estimate > 0):
        return math.inf, 0.0
    half = (math.log(high) - math.log(low)) / 2
    near = [abs(math.log(estimate) - math.log(e)) for e in edges if e is not None and 0 < e < math.inf]
    return half, min(near) if near else math.inf


def _launch_values(group: pd.DataFrame, metric: str) -> list[list[float]]:
    """A point's values of `metric`, one list per launch (launches with no value left out)."""
    import pandas as pd

    if metric not in group.columns:
        return []
    values = pd.to_numeric(group[metric], errors="coerce")
    launch = group["launch"].fillna(0) if "launch" in group.columns else pd.Series(0, index=group.index)
    return [v for v in (part.dropna().tolist() for _, part in values.groupby(launch, sort=True)) if v]


def check(results, references: dict | None = None) -> pd.DataFrame:
    """One row per reference and matched point (columns `COLUMNS`); `results` is a folder or `Results`."""
    import pandas as pd

    from movebench.judging.compare import Results, read_results
    from movebench.reportkit import ratio

    results = results if isinstance(results, Results) else read_results(results)
    references = references if references is not None else load()
    records = counted(results.records)
    by_family = {fam: {p: g for p, g in part.groupby("point", sort=True)}
                 for fam, part in records.groupby("family", sort=True)} if len(records) else {}
    studies = references.get("studies") or {}
    rows = []
    for ref in references["references"]:
        study = studies.get(ref["study"], {})
        factor = UNITS[ref["unit"]][1]
        low = ref["value"] * (1 + ref["lower"]) if ref.get("lower") is not None else 0.0
        high = ref["value"] * (1 + ref["upper"]) if ref.get("upper") is not None else math.inf
        is_ratio = "ratio" in ref
        judged = ref.get("judged", is_ratio)
        base = {
            "id": ref["id"], "study": ref["study"], "system": study.get("system"), "family": ref["family"],
            "kind": "ratio" if is_ratio else "metric",
            "what": f"{ref['ratio']['numerator']} / {ref['ratio']['denominator']}" if is_ratio else ref["variant"],
            "parameters": ", ".join(f"{k}={v}" for k, v in (ref.get("parameters") or {}).items()),
            "metric": ref["metric"], "value": ref["value"], "unit": ref["unit"], "low": low, "high": high,
            "judged": judged, "quote": ref.get("quote"), "note": ref.get("note"),
            "title": study.get("title"), "source": study.get("source"),
        }
        points = by_family.get(ref["family"], {})
        found = []
        if is_ratio:
            num, den = ref["ratio"]["numerator"], ref["ratio"]["denominator"]
            for point in _selected(points, num, ref.get("parameters") or {}):
                partner = _swap_variant(point, num, den)
                if partner in points:
                    c = ratio(records[records["family"] == ref["family"]], point, partner, ref["metric"])
                    if c is not None:
                        found.append((point, f"{c.n_new} / {c.n_base}", c.ratio, c.ci_low, c.ci_high,
                                      min(_launches(points[point]), _launches(points[partner]))))
        else:
            for point in _selected(points, ref["variant"], ref.get("parameters") or {}):
                values = _launch_values(points[point], ref["metric"])
                if values:
                    s = stats.launch_summary(values)
                    found.append((point, str(s["n"]), s["median"] / factor, s["ci_low"] / factor,
                                  s["ci_high"] / factor, _launches(points[point])))
        if not found:
            rows.append({**base, "point": None, "n": None, "launches": None, "measured": None, "ci_low": None,
                         "ci_high": None, "status": "not measured", "ci_vs_band": None})
            continue
        for point, n, measured, ci_low, ci_high, launches in found:
            band = place(ci_low, ci_high, low, high)
            status = {"inside": "pass", "outside": "fail", "overlaps": "inconclusive"}[band] if judged else "shown"
            rows.append({**base, "point": point, "n": n, "launches": launches, "measured": measured,
                         "ci_low": ci_low, "ci_high": ci_high, "status": status, "ci_vs_band": band})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def summary_lines(frame: pd.DataFrame) -> list[str]:
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    lines = [", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)]
    missing = frame[frame["status"] == "not measured"]
    if len(missing):
        by_study = missing.groupby("study").size()
        lines.append("  not measured (no matching point; ids in check.csv): "
                     + ", ".join(f"{study} {n}" for study, n in by_study.items()))
    for r in frame.itertuples():
        if r.status == "not measured":
            continue
        ours = f"{r.measured:.4g} {r.unit} [{r.ci_low:.4g}, {r.ci_high:.4g}]"
        band = f"{r.low:.4g}..{r.high:.4g}" if math.isfinite(r.high) else f">= {r.low:.4g}"
        theirs = f"{r.value:.4g} {r.unit} ({band})" if r.judged else f"{r.value:.4g} {r.unit} published on {r.system}"
        lines.append(f"  {r.status.upper():12s} {r.id}: ours {ours} vs {theirs}  [{r.point}]")
    return lines
