"""The self-contained HTML report: an overview, then one section per family.

Everything is inline (plots as PNG data URIs, CSS in the page), so the file can be mailed or
archived alone. Each family's section comes from its template (`families/<name>/report.html.j2`)
and the context its `FamilyReport` builds (`movebench.reportkit`, the kit families write it with);
the page's own templates are package data (`movebench/templates/`, found by `movebench.core.resources`).
The engine adds the per-point summary, the failed and missing points, and where every number came
from (the raw records file and its meta). The report
reads the tables `aggregate` wrote and nothing else; after a failed run `render_partial` builds
`report.partial.html` from the raw records instead.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path

import jinja2
import pandas as pd

from movebench import families
from movebench.core import records, resources
from movebench.core import units as units_
from movebench.core.layout import ResultsLayout
from movebench.core.sizes import expand_sizes
from movebench.core.task import launch_path, planned_launches
from movebench.engine import aggregate
from movebench.judging import bounds, findings, report_verdicts
from movebench.judging.history import page as history_page
from movebench.reportkit import key_cell, median_of

PARTIAL = "report.partial.html"


# --- collecting what a report shows ---


def _layout(config) -> ResultsLayout:
    return ResultsLayout.of(config)


def overlaps(points: pd.DataFrame) -> list[dict]:
    """Points whose run overlapped another movebench point on the machine (meta `overlapped_with`)."""
    if "overlapped_with" not in points:
        return []
    found = []
    for _, row in points[points["status"] == "ok"].iterrows():
        text = row["overlapped_with"]
        others = json.loads(text) if isinstance(text, str) and text.startswith("[") else []
        if others:  # metas written before the entry's key was `running` name it `point_path`
            found.append({"point": row["point"], "with": "; ".join(
                f"{o.get('campaign')}: {o.get('family')} {o.get('running', o.get('point_path'))} (pid {o.get('pid')})"
                for o in others)})
    return found


def limited(table: pd.DataFrame, points: pd.DataFrame) -> list[dict]:
    """Points whose adaptive repetitions stopped on a limit (max repetitions or seconds) before their median's
    95% CI was as narrow as asked: point, reason, counted repetitions, the CI half-width reached and the target."""
    from movebench.core.adaptive import LIMITS

    if table.empty or "stop_reason" not in table.columns:
        return []
    hit = table[table["stop_reason"].isin(LIMITS)].drop_duplicates("point").sort_values("point")
    targets = {}
    if len(points) and "repetitions.ci_target" in points.columns:
        targets = dict(zip(points["point"], points["repetitions.ci_target"], strict=True))
    out = []
    for r in hit.itertuples():
        width, target = r.ci_half_width_rel, targets.get(r.point)
        out.append({"point": r.point, "stop_reason": r.stop_reason, "repetitions_run": int(r.repetitions_run),
                    "ci_half_width_rel": None if pd.isna(width) else float(width),
                    "ci_target": None if target is None or pd.isna(target) else float(target)})
    return out


def fell_back(points: pd.DataFrame) -> list[dict]:
    """Points whose library ran another transport than their stack or tuning variables named (the first launch's
    meta, `transport_check`; docs/stacks.md)."""
    if not len(points) or "transport_check.fell_back" not in points.columns:
        return []
    out = []
    for point, text in zip(points["point"], points["transport_check.fell_back"], strict=True):
        lines = json.loads(text) if isinstance(text, str) and text.startswith("[") else []
        if lines:
            out.append({"point": point, "fell_back": lines})
    return out


def _section(points: pd.DataFrame, table: pd.DataFrame, summary: pd.DataFrame) -> dict:
    status = points["status"] if len(points) else pd.Series(dtype=str)
    failed = points[status == "failed"]
    return {
        "limited": limited(table, points),
        "fell_back": fell_back(points),
        "overlapped": overlaps(points) if len(points) else [],
        "points": points["point"].tolist() if len(points) else [],
        "ok": points.loc[status == "ok", "point"].tolist() if len(points) else [],
        "failed": failed.to_dict("records"),
        "missing": points.loc[status == "missing", "point"].tolist() if len(points) else [],
        "points_table": points,
        "table": table,
        "summary": summary,
    }


def collect(config: dict, names) -> dict:
    """Per family, from the tables aggregate wrote: records, summary, points (status and meta)."""
    layout = _layout(config)
    sections = {}
    for name in names:
        table = pd.read_parquet(layout.table(name))
        summary_path = layout.table(name, "summary")
        summary = pd.read_csv(summary_path) if summary_path.stat().st_size > 1 else pd.DataFrame()
        points = pd.read_csv(layout.table(name, "points"))
        sections[name] = _section(points, table, summary)
    return sections


def collect_raw(config: dict, grid: dict) -> dict:
    """Per family, straight from the raw records (after a failed run, when some tables are missing)."""
    layout = _layout(config)
    sections = {}
    for name, point_dicts in grid.items():
        launches = planned_launches(config[name].get("launches", 1))
        present = [layout.records(name, launch_path(families.point_path(p), k)) for p in point_dicts
                   for k in range(launches)]
        table = aggregate.load(name, [p for p in present if p.exists()], layout.raw)
        summary = aggregate.summarize(name, table)
        points = aggregate.points_table(name, point_dicts, layout, launches)
        sections[name] = _section(points, table, summary)
    return sections


def overview(config: dict, sections: dict) -> dict:
    metas = pd.concat([s["points_table"] for s in sections.values() if len(s["points_table"])], ignore_index=True) \
        if any(len(s["points_table"]) for s in sections.values()) else pd.DataFrame()
    ok = metas[metas["status"] == "ok"] if len(metas) else metas

    def distinct(column):
        if column not in ok:
            return []
        return sorted({str(v) for v in ok[column].dropna()})

    def first(column):
        values = distinct(column)
        return values[0] if values else None

    hosts = set()
    for column in ("hostnames", "hostname"):
        for value in ok.get(column, pd.Series(dtype=object)).dropna():
            hosts.update(json.loads(value) if str(value).startswith("[") else [str(value)])
    packages = {c.removeprefix("packages."): first(c) for c in ok.columns if c.startswith("packages.")}
    return {
        "campaign": config["campaign"]["name"],
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "hosts": sorted(hosts),
        "cpu_model": first("cpu_model"),
        "cpu_count": first("cpu_count"),
        "python": first("python"),
        "platform": first("platform"),
        "mpi_library": distinct("mpi_library"),
        "mpi_thread_level": distinct("mpi_thread_level"),
        "launchers": distinct("launcher"),
        "git_commits": distinct("git_commit"),
        "config_hashes": distinct("config_hash"),
        "slurm_jobs": distinct("slurm_job_id"),
        "packages": {k: v for k, v in packages.items() if v and v != "nan"},
        "counts": {name: {"points": len(s["points"]), "ok": len(s["ok"]), "failed": len(s["failed"]),
                          "missing": len(s["missing"])} for name, s in sections.items()},
        "overlapped": sum(len(s["overlapped"]) for s in sections.values()),
        "config_yaml": _yaml(config),
    }


def _yaml(config) -> str:
    import yaml

    return yaml.safe_dump(config, sort_keys=False)


#: Measures whose CI the per-point table shows beside the median.
WITH_CI = ("bandwidth_Bps", "elapsed_s")


def _short(measure: str) -> str:
    return {"bandwidth_Bps": "bandwidth", "elapsed_s": "time"}.get(
        measure, measure.removesuffix("_Bps").removesuffix("_bytes").removesuffix("_s"))


def summary_table(name: str, section: dict) -> dict | None:
    """The engine's per-point table: medians in human units, the 95% CI of bandwidth and time, the share of the
    point's upper bound, and the records file each row comes from. Raw SI values stay in the tables on disk."""
    summary = section["summary"]
    if summary.empty:
        return None
    fam = families.load(name)
    keys = [k for k in fam.point_keys if k in summary.columns]
    first = summary.drop_duplicates("point").set_index("point")
    points = list(first.index)
    columns = [*keys, "n", "launches"]
    sizes = {axis.name for axis in fam.axes if axis.expand is expand_sizes}
    cells = {p: [key_cell(first.at[p, k], k in sizes) for k in keys] + [str(int(first.at[p, "n"])),
                                                                         str(_launches(first.loc[p]))]
             for p in points}
    for measure in (m for m in fam.measures if m.summarize):
        part = median_of(summary, measure.name)
        if part.empty:
            continue
        part = part.set_index("point")
        label, factor = units_.choose(measure.unit, part["median"].dropna().tolist())
        suffix = f" ({label})" if label not in ("1", "") else ""
        columns.append(f"{_short(measure.name)}{suffix}")
        if measure.name in WITH_CI:
            columns += [f"{_short(measure.name)} 95% CI", f"{_short(measure.name)} a rerun lands in",
                        f"{_short(measure.name)} between launches"]
        for p in points:
            if p not in part.index:
                cells[p] += [""] * (4 if measure.name in WITH_CI else 1)
                continue
            row = part.loc[p]
            cells[p].append(units_.sig(row["median"] / factor))
            if measure.name in WITH_CI:
                cells[p].append(f"{units_.sig(row['ci_low'] / factor)} – {units_.sig(row['ci_high'] / factor)}")
                cells[p].append(rerun_cell(row, factor))
                cells[p].append(between_cell(row))
    bw = median_of(summary, "bandwidth_Bps")
    with_bounds = not bw.empty and bw["bound"].notna().any() if "bound" in bw else False
    above = set()
    if with_bounds:
        bw = bw.set_index("point")
        columns += ["% of bound", "bound"]
        for p in points:
            if p not in bw.index or pd.isna(bw.at[p, "pct_of_bound"]):
                note = bw.at[p, "bound_note"] if p in bw.index and isinstance(bw.at[p, "bound_note"], str) else ""
                cells[p] += ["", note]
                continue
            pct = bw.at[p, "pct_of_bound"]
            if pct > 100:
                above.add(p)
            note = bw.at[p, "bound_note"]
            cells[p] += [units_.sig(pct), bw.at[p, "bound"] + (f" ({note})" if isinstance(note, str) and note else "")]
    columns.append("records")
    where = ResultsLayout(Path())
    rows = [{"cells": cells[p] + [where.named(where.records(name, p))], "above": p in above} for p in points]
    return {"columns": columns, "rows": rows, "above": len(above), "bounds": with_bounds}


def _launches(row) -> int:
    """How many launches stand behind a summary row: its `launches`, 1 for summaries written before launches."""
    value = row.get("launches") if hasattr(row, "get") else None
    return 1 if value is None or pd.isna(value) else int(value)


def rerun_cell(row, factor: float) -> str:
    """Where a rerun of the point with as many launches lands, 95% of the time (core.stats.rerun_interval): wider
    than the CI, which is for the mean; "one launch" when no second launch tells it."""
    low, high = row.get("rerun_low"), row.get("rerun_high")
    if _launches(row) < 2:
        return "one launch"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"{units_.sig(low / factor)} – {units_.sig(high / factor)}"


def between_cell(row) -> str:
    """The between-launch share of a summary row's spread, as the per-point table shows it ("one launch" when
    there is no second launch to tell it)."""
    if _launches(row) < 2:
        return "one launch"
    share = row.get("between_share")
    return "" if share is None or pd.isna(share) else f"{100 * share:.0f}%"


def _environment() -> jinja2.Environment:
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(resources.templates())),
                                  jinja2.PrefixLoader({name: jinja2.FileSystemLoader(str(families.folder(name)))
                                                       for name in families.names()})])
    env = jinja2.Environment(loader=loader, autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined)
    env.filters["gbps"] = lambda v: "" if v is None or pd.isna(v) else f"{v / 1e9:.3g}"
    return env


def _context(name: str, table: pd.DataFrame, summary: pd.DataFrame, campaign: dict) -> dict:
    return families.report(name).context(table, summary, campaign) if not summary.empty else {}


def family_contexts(config: dict, sections: dict, workers: int | None = None) -> dict:
    """Each family's template context: its tables and figures. Drawing the figures is most of the report's time
    (docs/notes/kernels.md, section 12), so with more than one CPU the families draw in forked processes side by side
    (`workers`: at most 4, or the CPUs this process may use); a family's context is the same either way."""
    import os

    # The largest tables first: their figures take longest to draw, and a long one started last would leave the
    # other worker idle meanwhile (alphabetical order ran shuffle's last).
    order = sorted(sections, key=lambda name: -len(sections[name]["table"]))
    jobs = {name: (name, sections[name]["table"], sections[name]["summary"], config["campaign"]) for name in order}
    if workers is None:
        workers = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    workers = min(workers, len(jobs))
    if workers < 2:
        return {name: _context(*jobs[name]) for name in sections}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from movebench.reportkit import plotting

    plotting()  # imported once, here, rather than in each worker

    # fork: the workers inherit what this process imported and read; they draw, they do not start threads
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {name: pool.submit(_context, *args) for name, args in jobs.items()}
        return {name: futures[name].result() for name in sections}


def render_html(config: dict, sections: dict, partial: bool = False) -> str:
    env = _environment()
    provided = bounds.provided(sections)
    for name, section in sections.items():
        section["summary"] = bounds.attach(name, section["summary"], section["points_table"], provided)
    results = report_verdicts.results_of(config, sections)
    comparison = report_verdicts.comparison(config, results)
    stacks = report_verdicts.stack_comparisons(config, results)
    published_frame = report_verdicts.published(config, results)
    published = report_verdicts.by_family(published_frame)
    studies = report_verdicts.study_views(config, results, published_frame)
    contexts = family_contexts(config, sections)
    family_html = {}
    for name, section in sections.items():
        ctx = contexts[name]
        body = env.get_template(f"{name}/report.html.j2").render(ctx=ctx, section=section) if ctx else ""
        family_html[name] = {
            "body": body,
            "summary": summary_table(name, section),
            "above": bounds.above(section["summary"]).to_dict("records"),
            "published": published.get(name),
            "failed": section["failed"],
            "missing": section["missing"],
            "overlapped": section["overlapped"],
            "limited": section["limited"],
        }
    return env.get_template("report.html.j2").render(
        overview=overview(config, sections), families=family_html, partial=partial, escape=html.escape,
        findings=findings.build(sections, comparison, published, studies), comparison=comparison, studies=studies,
        stacks=stacks, history=history_page.link(config["campaign"]),
        references_file=str(report_verdicts.references_file(config["campaign"]) or ""))


def render(config: dict, names, out_path) -> Path:
    """results/report.html from the tables; a partial report left by an earlier failed run goes."""
    out = Path(out_path)
    records.write_text(out, render_html(config, collect(config, names)))
    (out.parent / PARTIAL).unlink(missing_ok=True)
    return out


def render_partial(config: dict, grid: dict) -> Path:
    """After a failed run: results/report.partial.html from whatever records exist, failures listed.

    report.html is left as it was (the last complete report, if any); the next successful run
    replaces it and removes the partial one.
    """
    results = _layout(config).root
    out = results / PARTIAL
    records.write_text(out, render_html(config, collect_raw(config, grid), partial=True))
    return out
