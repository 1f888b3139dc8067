"""The findings a person reads first, generated from the data: what failed, what is above its bound, what
changed since the compared campaign, which published results did or did not reproduce, and each family's
headline figures with their confidence intervals.

Each finding is `{"level": "bad" | "warn" | "info", "text": str, "link": "#anchor"}`; the report lists
them in that order of levels, worst first.
"""

from __future__ import annotations

from movebench import bounds, compare, families
from movebench.core.units import sig

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


def _between_launches(name: str, summary) -> list[dict]:
    """Points measured in 2 launches or more whose spread is mostly between launches (any measure)."""
    if summary.empty or "between_share" not in summary.columns or "launches" not in summary.columns:
        return []
    rows = summary[(summary["launches"].fillna(1) >= 2) & (summary["between_share"] > BETWEEN_DOMINATES)]
    if rows.empty:
        return []
    worst = rows.sort_values("between_share", ascending=False).iloc[0]
    n = rows["point"].nunique()
    # info, not a warning: the campaign measured several launches, so its intervals and verdicts already carry
    # that spread; what the line tells is how the machine behaves, not that a figure is wrong
    return [{"level": "info", "link": f"#{name}-summary",
             "text": f"{name}: {n} point{'s' if n > 1 else ''}: most of {'their' if n > 1 else 'its'} spread is "
                     f"between launches: figures from one launch would mislead (the most {worst['point']}, "
                     f"{100 * worst['between_share']:.0f}% of its {worst['measure']} spread)"}]


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
    totals = {"pass": 0, "fail": 0, "shown": 0, "not measured": 0}
    for name, part in published.items():
        for status, n in part["counts"].items():
            totals[status] += n
        for r in part["rows"]:
            if r["status"] == "fail":
                out.append({"level": "bad", "link": f"#{name}-published", "text": f"{r['id']}: {r['words']}"})
    if any(totals.values()):
        out.append({"level": "info", "link": "#" + (next(iter(published)) + "-published" if published else "top"),
                    "text": f"Published vs measured here: {totals['pass']} reproduced, {totals['fail']} not "
                            f"reproduced, {totals['shown']} absolute figure{'' if totals['shown'] == 1 else 's'} "
                            f"shown beside ours, {totals['not measured']} not measured by this campaign's points"})
    return out


def _studies(studies) -> list[dict]:
    """One line per study the campaign carries: its claims' verdicts, counted (the study view has the evidence)."""
    out = []
    for st in studies or []:
        c = st["counts"]
        out.append({"level": "info", "link": f"#study-{st['key']}-claims",
                    "text": f"Study {st['key']}: {c['reproduced']} claim{'' if c['reproduced'] == 1 else 's'} "
                            f"reproduced, {c['not reproduced']} not reproduced, {c['not measured']} not measured "
                            "by this campaign's points"})
    return out


def build(sections: dict, comparison: dict | None, published: dict, studies=None) -> list[dict]:
    """Every finding, worst first."""
    items = _studies(studies)
    for name, section in sections.items():
        items += _failures(name, section)
        items += _limited(name, section)
        items += _fell_back(name, section)
        items += _above_bound(name, section["summary"])
        items += _between_launches(name, section["summary"])
    items += _comparison(comparison)
    items += _references(published)
    for name, section in sections.items():
        if section["summary"].empty:
            continue
        for text, level in families.report(name).headlines(section["table"], section["summary"]):
            items.append({"level": level, "link": f"#{name}", "text": f"{name}: {text}"})
    return sorted(items, key=lambda item: LEVELS.index(item["level"]))
