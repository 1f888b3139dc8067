"""The self-contained HTML report: an overview, then one section per family.

Everything is inline (plots as PNG data URIs, CSS in the page), so the file can be mailed or
archived alone. Each family's section comes from its template (`families/<name>/report.html.j2`)
and the context its `report.py` builds; the engine adds the per-point summary, the failed and
missing points, and where every number came from (the raw records file and its meta). The report
reads the tables `aggregate` wrote and nothing else; after a failed run `render_partial` builds
`report.partial.html` from the raw records instead.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
from pathlib import Path

import jinja2
import pandas as pd

from movebench import aggregate, families
from movebench.core import records

TEMPLATES = Path(__file__).resolve().parents[2] / "report"
PARTIAL = "report.partial.html"


# --- helpers for the families' sections ---


def figure_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def html_table(frame: pd.DataFrame, float_format="{:.4g}", classes="data") -> str:
    """A DataFrame as an HTML table with compact numbers and sortable-looking headers."""
    formatters = {c: (lambda v: "" if pd.isna(v) else float_format.format(v))
                  for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}
    return frame.to_html(index=False, classes=classes, border=0, formatters=formatters, na_rep="", escape=True)


def plotting():
    """seaborn and pyplot with the non-interactive backend, themed once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid")
    return sns, plt


def median_of(summary: pd.DataFrame, measure: str) -> pd.DataFrame:
    """The summary rows of one measure, with `median`, `ci_low`, `ci_high` as columns."""
    if summary.empty or "measure" not in summary:
        return pd.DataFrame()
    return summary[summary["measure"] == measure].copy()


# --- collecting what a report shows ---


def _paths(config):
    results = Path(config["campaign"]["results_dir"])
    return results, results / "raw", results / "failed", results / "tables"


def overlaps(points: pd.DataFrame) -> list[dict]:
    """Points whose run overlapped another movebench point on the machine (meta `overlapped_with`)."""
    if "overlapped_with" not in points:
        return []
    found = []
    for _, row in points[points["status"] == "ok"].iterrows():
        text = row["overlapped_with"]
        others = json.loads(text) if isinstance(text, str) and text.startswith("[") else []
        if others:
            found.append({"point": row["point"], "with": "; ".join(
                f"{o.get('campaign')}: {o.get('family')} {o.get('point')} (pid {o.get('pid')})" for o in others)})
    return found


def _section(points: pd.DataFrame, table: pd.DataFrame, summary: pd.DataFrame) -> dict:
    status = points["status"] if len(points) else pd.Series(dtype=str)
    failed = points[status == "failed"]
    return {
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
    _, _, _, tables = _paths(config)
    sections = {}
    for name in names:
        table = pd.read_parquet(tables / f"{name}.parquet")
        summary_path = tables / f"{name}_summary.csv"
        summary = pd.read_csv(summary_path) if summary_path.stat().st_size > 1 else pd.DataFrame()
        points = pd.read_csv(tables / f"{name}_points.csv")
        sections[name] = _section(points, table, summary)
    return sections


def collect_raw(config: dict, grid: dict) -> dict:
    """Per family, straight from the raw records (after a failed run, when some tables are missing)."""
    _, raw, failed, _ = _paths(config)
    sections = {}
    for name, point_dicts in grid.items():
        present = [raw / name / f"{families.point_path(p)}.jsonl" for p in point_dicts]
        table = aggregate.load(name, [p for p in present if p.exists()])
        summary = aggregate.summarize(name, table)
        points = aggregate.points_table(name, point_dicts, raw, failed)
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


def summary_table(name: str, section: dict) -> str:
    """The engine's per-point table: the counted repetitions' median bandwidth and time with their CIs."""
    summary = section["summary"]
    if summary.empty:
        return "<p>No finished point.</p>"
    fam = families.load(name)
    keys = [k for k in ("variant", *fam.point_keys) if k in summary.columns]
    wide = None
    for measure in (m.name for m in fam.measures if m.summarize):
        part = median_of(summary, measure)
        if part.empty:
            continue
        part = part[["point", *keys, "n", "median", "ci_low", "ci_high"]].rename(columns={
            "median": f"{measure} median", "ci_low": f"{measure} CI low", "ci_high": f"{measure} CI high"})
        if wide is None:
            wide = part
        else:
            wide = wide.merge(part.drop(columns=[*keys, "n"]), on="point", how="left")
    wide = wide.drop(columns=[c for c in wide.columns if c.endswith(("CI low", "CI high"))
                              and not c.startswith(("bandwidth_Bps", "elapsed_s"))])
    wide["records"] = [f"raw/{name}/{p}.jsonl" for p in wide["point"]]
    return html_table(wide.drop(columns=["point"]), classes="data summary")


def _environment() -> jinja2.Environment:
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(TEMPLATES)),
                                  jinja2.PrefixLoader({name: jinja2.FileSystemLoader(str(families.folder(name)))
                                                       for name in families.names()})])
    env = jinja2.Environment(loader=loader, autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined)
    env.filters["gbps"] = lambda v: "" if v is None or pd.isna(v) else f"{v / 1e9:.3g}"
    return env


def render_html(config: dict, sections: dict, partial: bool = False) -> str:
    env = _environment()
    family_html = {}
    for name, section in sections.items():
        ctx = families.report_module(name).context(section["table"], section["summary"], config["campaign"]) \
            if not section["summary"].empty else {}
        body = env.get_template(f"{name}/report.html.j2").render(ctx=ctx, section=section) if ctx else ""
        family_html[name] = {
            "body": body,
            "summary": summary_table(name, section),
            "failed": section["failed"],
            "missing": section["missing"],
            "overlapped": section["overlapped"],
        }
    return env.get_template("report.html.j2").render(
        overview=overview(config, sections), families=family_html, partial=partial, escape=html.escape)


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
    results, *_ = _paths(config)
    out = results / PARTIAL
    records.write_text(out, render_html(config, collect_raw(config, grid), partial=True))
    return out
