"""The findings a person reads first, generated from the data: what failed, what is above its bound, what
changed since the compared campaign, which published results did or did not reproduce, and each family's
headline figures with their confidence intervals.

Each finding is `{"level": "bad" | "warn" | "info", "text": str, "link": "#anchor"}`; the report lists
them in that order of levels, worst first.
"""

from __future__ import annotations

import pandas as pd

from movebench import families
from movebench.core.units import sig
from movebench.judging import bounds, compare

LEVELS = ("bad", "warn", "info")


def _failures(name: str, section: dict) -> list[dict]:
    out = []
    failed = section["failed"]
    limited = [f for f in failed if "timed out" in str(f.get("error") or "")]
    others = [f for f in failed if f not in limited]
    if limited:
        out.append({"level": "bad", "link": f"#{name}-failed",
                    "text": f"{name}: {len(limited)} point{'s' if len(limited) > 1 else ''} stopped on a limit "
                            f"({limited[0]['error']}), e.g. {limited[0]['point']}"})
    if others:
        out.append({"level": "bad", "link": f"#{name}-failed",
                    "text": f"{name}: {len(others)} point{'s' if len(others) > 1 else ''} failed, e.g. "
                            f"{others[0]['point']}: {others[0].get('error')}"})
    if section["missing"]:
        n = len(section["missing"])
        out.append({"level": "warn", "link": f"#{name}",
                    "text": f"{name}: {n} point{'s' if n > 1 else ''} without a result (not run yet, or killed "
                            "without a trace)"})
    return out


def _limited(name: str, section: dict) -> list[dict]:
    """Adaptive points that ran out of repetitions or seconds before their CI target."""
    hit = section.get("limited") or []
    if not hit:
        return []
    widths = [h for h in hit if h["ci_half_width_rel"] is not None]
    widest = max(widths, key=lambda h: h["ci_half_width_rel"]) if widths else hit[0]
    width = f" at ±{widest['ci_half_width_rel']:.1%} of the median" if widest["ci_half_width_rel"] is not None else ""
    n = len(hit)
    return [{"level": "warn", "link": f"#{name}-limited",
             "text": f"{name}: {n} point{'s' if n > 1 else ''} stopped on a limit before the CI target "
                     f"({', '.join(sorted({h['stop_reason'] for h in hit}))}), the widest {widest['point']}{width}"}]


def _fell_back(name: str, section: dict) -> list[dict]:
    """Points whose library ran another transport than the one their stack named: their figure is not the
    named stack's."""
    hit = section.get("fell_back") or []
    if not hit:
        return []
    n, whose = len(hit), "its" if len(hit) == 1 else "their"
    return [{"level": "bad", "link": f"#{name}",
             "text": f"{name}: {n} point{'s' if n > 1 else ''} ran on another transport than {whose} stack named "
                     f"(not that stack's figure), e.g. {hit[0]['point']}: {hit[0]['fell_back'][0]}"}]


def _above_bound(name: str, summary) -> list[dict]:
    above = bounds.above(summary)
    if above.empty:
        near = bounds.at_bound(summary)
        if near.empty:
            return []
        worst = near.sort_values("pct_of_bound", ascending=False).iloc[0]
        n = len(near)
        return [{"level": "info", "link": f"#{name}-summary",
                 "text": f"{name}: {n} point{'s' if n > 1 else ''} at {'their' if n > 1 else 'its'} upper bound "
                         f"(median above it, the 95% CIs overlapping: the two figures' noise), the highest "
                         f"{worst['point']} at {sig(worst['pct_of_bound'])}% of {worst['bound']}"}]
    worst = above.sort_values("pct_of_bound", ascending=False).iloc[0]
    n = len(above)
    return [{"level": "bad", "link": f"#{name}-bounds",
             "text": f"{name}: {n} point{'s' if n > 1 else ''} above 100% of {'their' if n > 1 else 'its'} "
                     f"upper bound, the highest {worst['point']} at {sig(worst['pct_of_bound'])}% of "
                     f"{worst['bound']}: distrust the figure, or the bound does not apply"}]


#: Above this between-launch share of a point's spread, figures from one launch would mislead.
BETWEEN_DOMINATES = 0.5
#: The measures whose detectable change the precision line quotes: what the families' tables lead with.
PRIMARY_MEASURES = ("bandwidth_Bps", "elapsed_s")


def launches_of(sections: dict) -> pd.DataFrame:
    """One row per launch of a point (a records file): family, point, launch, disturbed, other_cpus, retries."""
    frames = []
    for name, section in sections.items():
        table = section.get("table")
        if table is None or table.empty or "source" not in table.columns:
            continue
        columns = [c for c in ("point", "launch", "disturbed", "other_cpus", "disturbed_retries") if c in table]
        frames.append(table.groupby("source", sort=False)[columns].first().assign(family=name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def host_load(sections: dict) -> dict | None:
    """How quiet the host was while the launches measured: outside load per launch, launches disturbed, measured
    again, left out of the statistics. None when no launch recorded its load (results from before it did)."""
    launches = launches_of(sections)
    if launches.empty or "other_cpus" not in launches or launches["other_cpus"].isna().all():
        return None
    load = launches["other_cpus"].dropna()
    disturbed = launches[launches["disturbed"].fillna(False).astype(bool)] if "disturbed" in launches else launches[:0]
    left_out = sum(int(section["summary"].groupby("point")["launches_left_out"].max().fillna(0).sum())
                   for section in sections.values()
                   if "launches_left_out" in section["summary"].columns and len(section["summary"]))
    retried = int(launches["disturbed_retries"].fillna(0).gt(0).sum()) if "disturbed_retries" in launches else 0
    return {"launches": len(launches), "median": float(load.median()), "max": float(load.max()),
            "disturbed": len(disturbed), "left_out": left_out, "kept": len(disturbed) - left_out,
            "retried": retried, "quiet": len(disturbed) == 0 and retried == 0,
            "examples": [f"{r.family} {r.point}" + (f" launch {int(r.launch)}" if r.launch else "")
                         for r in disturbed.head(3).itertuples()]}


def _host_load(load: dict | None) -> list[dict]:
    if load is None:
        return []
    where = "#overview"
    if load["quiet"]:
        return [{"level": "info", "link": where,
                 "text": f"The host was quiet: other processes kept a median {load['median']:.2f} CPUs busy while a "
                         f"launch measured (at most {load['max']:.2f}); none of {load['launches']} point-launches was "
                         "disturbed"}]
    if not load["disturbed"]:
        return [{"level": "info", "link": where,
                 "text": f"The host was quiet but for moments: {load['retried']} of {load['launches']} point-launches "
                         "met outside load and were measured again, quiet the second time. Outside load per "
                         f"launch: median {load['median']:.2f} CPUs, at most {load['max']:.2f}"}]
    text = (f"The host was busy: {load['retried']} of {load['launches']} point-launches were measured beside outside "
            f"load and measured again")
    if load["disturbed"]:
        text += (f"; {load['disturbed']} stayed disturbed ({load['left_out']} left out of the statistics, "
                 f"{load['kept']} kept where their point had fewer than 2 quiet launches), e.g. "
                 + ", ".join(load["examples"]))
    text += f". Outside load per launch: median {load['median']:.2f} CPUs, at most {load['max']:.2f}"
    return [{"level": "warn" if load["disturbed"] else "info", "link": where, "text": text}]


def precision(sections: dict) -> dict:
    """Per family, what this campaign can resolve: the median over its points' bandwidth and time of the change a
    comparison with a rerun finds (`mdc` of the summary); the points that miss the campaign's mdc_target, and why;
    how many points' spread lies mostly between launches."""
    out = {"families": {}, "between": 0, "points": 0}
    for name, section in sections.items():
        summary = section["summary"]
        if summary.empty or "mdc" not in summary.columns:
            continue
        primary = summary[summary["measure"].isin(PRIMARY_MEASURES) & summary["mdc"].notna()]
        if primary.empty:
            continue
        per_point = primary.groupby("point").agg(mdc=("mdc", "max"), launches=("launches", "max"))
        target = _target(section)
        missed = per_point[per_point["mdc"] > target] if target is not None else per_point[:0]
        why = {}
        for point in missed.index:
            why.setdefault(_why_missed(summary, point, section, target), []).append(point)
        out["families"][name] = {"mdc": float(per_point["mdc"].median()), "points": len(per_point),
                                 "launches": int(per_point["launches"].median()), "target": target,
                                 "missed": {reason: len(points) for reason, points in why.items()}}
        launched = summary[summary["launches"].fillna(1) >= 2]
        out["between"] += launched[launched["between_share"] > BETWEEN_DOMINATES]["point"].nunique()
        out["points"] += launched["point"].nunique()
    return out


def _target(section) -> float | None:
    points = section.get("points_table")
    if points is None or "launches.mdc_target" not in points.columns:
        return None
    values = points["launches.mdc_target"].dropna()
    return float(values.iloc[0]) if len(values) else None


def _why_missed(summary, point: str, section, target: float) -> str:
    rows = summary[summary["point"] == point]
    if "launches_left_out" in rows.columns and rows["launches_left_out"].fillna(0).max() > 0:
        return "disturbed launches left out"
    if "launches_disturbed" in rows.columns and rows["launches_disturbed"].fillna(0).max() > 0:
        return "disturbed launches kept"
    points = section.get("points_table")
    top = None
    if points is not None and "launches.max" in points.columns:
        values = points["launches.max"].dropna()
        top = int(values.iloc[0]) if len(values) else None
    if top is not None and rows["launches"].max() >= top:
        return f"between-launch spread (all {top} launches ran: the budget)"
    # it skipped a launch at the target, judged on the family's launches so far; the run's whole prior says more
    return "stopped at the target by the launches then measured"


def _precision(found: dict) -> list[dict]:
    if not found["families"]:
        return []
    parts = []
    for name, f in found["families"].items():
        part = f"{name} {100 * f['mdc']:.0f}%"
        if f["target"] is not None and f["missed"]:
            part += (f" ({sum(f['missed'].values())} of {f['points']} points above the {100 * f['target']:.0f}% "
                     "target: " + ", ".join(f"{n} {reason}" for reason, n in f["missed"].items()) + ")")
        parts.append(part)
    launches = sorted({f["launches"] for f in found["families"].values()})
    text = ("Detectable change: against a rerun of this campaign, a change of bandwidth or time this large would be "
            "found (median over each family's points, 80% of the time at the verdicts' 1% level, with "
            + "/".join(map(str, launches)) + " launches a point): " + "; ".join(parts))
    if found["between"]:
        text += (f". In {found['between']} of {found['points']} points most of the spread lies between launches: "
                 "the intervals and verdicts are over launches, figures from one launch would mislead")
    return [{"level": "info", "link": "#overview", "text": text}]


def _comparison(comparison: dict | None) -> list[dict]:
    if not comparison:
        return []
    counts = comparison["counts"]
    main = ", ".join(f"{counts[v]} {v}" for v in ("regressed", "improved", "unchanged", "inconclusive"))
    extra = [f"{counts[v]} {v}" for v in (compare.NOT_COMPARABLE, compare.ONLY_BASE, compare.ONLY_NEW) if counts[v]]
    level = "bad" if counts["regressed"] else "info"
    out = [{"level": level, "link": "#compared",
            "text": f"Compared with {comparison['folder']}: {main}" + (f"; {', '.join(extra)}" if extra else "")
                    + " (point-measures)"}]
    worst = compare.worst(comparison["frame"], "regressed", 3)
    for r in worst.itertuples():
        out.append({"level": "bad", "link": "#compare-changes",
                    "text": f"regressed: {r.family} {r.point} {r.measure} x{r.ratio:.3g} "
                            f"[{r.ci_low:.3g}, {r.ci_high:.3g}] ({r.better} is better)"})
    for warning in comparison["warnings"]:
        out.append({"level": "warn", "link": "#compared", "text": warning})
    return out


def _references(published: dict) -> list[dict]:
    out = []
    totals = {"pass": 0, "fail": 0, "inconclusive": 0, "shown": 0, "not measured": 0}
    for name, part in published.items():
        for status, n in part["counts"].items():
            totals[status] += n
        for r in part["rows"]:
            if r["status"] == "fail":
                out.append({"level": "bad", "link": f"#{name}-published", "text": f"{r['id']}: {r['words']}"})
    if any(totals.values()):
        out.append({"level": "info", "link": "#" + (next(iter(published)) + "-published" if published else "top"),
                    "text": f"Published vs measured here: {totals['pass']} reproduced, {totals['fail']} not "
                            f"reproduced, {totals['inconclusive']} inconclusive (the interval overlaps the band), "
                            f"{totals['shown']} absolute figure{'' if totals['shown'] == 1 else 's'} "
                            f"shown beside ours, {totals['not measured']} not measured by this campaign's points"})
    return out


def _studies(studies) -> list[dict]:
    """One line per study the campaign carries: its claims' verdicts, counted (the study view has the evidence)."""
    out = []
    for st in studies or []:
        c = st["counts"]
        out.append({"level": "info", "link": f"#study-{st['key']}-claims",
                    "text": f"Study {st['key']}: {c['reproduced']} claim{'' if c['reproduced'] == 1 else 's'} "
                            f"reproduced, {c['not reproduced']} not reproduced, {c['inconclusive']} inconclusive, "
                            f"{c['not comparable']} not comparable (a stand-in), {c['not measured']} not measured "
                            "by this campaign's points"})
    return out


def build(sections: dict, comparison: dict | None, published: dict, studies=None) -> list[dict]:
    """Every finding, worst first."""
    # how quiet the host was and what the campaign can resolve come first, whatever their level: every other
    # finding is read in their light
    first = _host_load(host_load(sections)) + _precision(precision(sections))
    items = _studies(studies)
    for name, section in sections.items():
        items += _failures(name, section)
        items += _limited(name, section)
        items += _fell_back(name, section)
        items += _above_bound(name, section["summary"])
    items += _comparison(comparison)
    items += _references(published)
    for name, section in sections.items():
        if section["summary"].empty:
            continue
        for text, level in families.report(name).headlines(section["table"], section["summary"]):
            items.append({"level": level, "link": f"#{name}", "text": f"{name}: {text}"})
    return first + sorted(items, key=lambda item: LEVELS.index(item["level"]))
