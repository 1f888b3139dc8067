"""The self-contained HTML report: an overview, then one section per family.

Everything is inline (plots as PNG data URIs, CSS in the page), so the file can
be mailed or archived alone. Each family's section comes from its template
`report/<family>.html.j2` and the context its `report_context` builds; the
engine adds the per-point summary, the failed and missing points, and where
every number came from (the raw records file and its meta).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import os
from pathlib import Path

import jinja2
import pandas as pd

from movebench import aggregate
from movebench import family as families
from movebench.core import records

TEMPLATES = Path(__file__).resolve().parents[2] / "report"


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


def failures(config, family: str, points: list[str]) -> list[dict]:
    _, _, failed_dir, _ = _paths(config)
    found = []
    for point in points:
        path = failed_dir / family / f"{point}.json"
        if path.exists():
            rec = json.loads(path.read_text())
            rec["failure_file"] = str(path)
            found.append(rec)
    return found


def collect(config: dict, grid: dict, from_raw: bool = False) -> dict:
    """Per family: records table, summary, failed and missing points, metas."""
    _, raw, _, tables = _paths(config)
    sections = {}
    for name, point_dicts in grid.items():
        points = [families.point_path(p) for p in point_dicts]
        present = [p for p in points if (raw / name / f"{p}.jsonl").exists()]
        if from_raw:
            table = aggregate.load(name, [raw / name / f"{p}.jsonl" for p in present])
            summary = aggregate.summarize(name, table)
        else:
            table = pd.read_parquet(tables / f"{name}.parquet")
            summary_path = tables / f"{name}_summary.csv"
            summary = pd.read_csv(summary_path) if summary_path.stat().st_size > 1 else pd.DataFrame()
        failed = failures(config, name, points)
        failed_points = {f["point"] for f in failed}
        metas = {}
        for p in present:
            meta_path = raw / name / f"{p}.meta.json"
            if meta_path.exists():
                metas[p] = json.loads(meta_path.read_text())
        sections[name] = {
            "points": points,
            "ok": present,
            "failed": failed,
            "missing": [p for p in points if p not in present and p not in failed_points],
            "table": table,
            "summary": summary,
            "metas": metas,
        }
    return sections


def overview(config: dict, sections: dict) -> dict:
    metas = [m for s in sections.values() for m in s["metas"].values()]
    first = metas[0] if metas else {}

    def distinct(key):
        return sorted({str(m.get(key)) for m in metas if m.get(key) is not None})

    return {
        "campaign": config["campaign"]["name"],
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "hosts": sorted({h for m in metas for h in (m.get("hostnames") or [m.get("hostname")]) if h}),
        "cpu_model": first.get("cpu_model"),
        "cpu_count": first.get("cpu_count"),
        "python": first.get("python"),
        "platform": first.get("platform"),
        "mpi_library": distinct("mpi_library"),
        "mpi_thread_level": distinct("mpi_thread_level"),
        "launchers": distinct("launcher"),
        "git_commits": distinct("git_commit"),
        "config_hashes": distinct("config_hash"),
        "slurm_jobs": distinct("slurm_job_id"),
        "packages": {k: v for k, v in (first.get("packages") or {}).items() if v},
        "counts": {name: {"points": len(s["points"]), "ok": len(s["ok"]), "failed": len(s["failed"]),
                          "missing": len(s["missing"])} for name, s in sections.items()},
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
    for measure in ("bandwidth_Bps", "elapsed_s", *fam.summary_measures):
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


def render_html(config: dict, sections: dict, partial: bool = False) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined)
    env.filters["gbps"] = lambda v: "" if v is None or pd.isna(v) else f"{v / 1e9:.3g}"
    family_html = {}
    for name, section in sections.items():
        ctx = families.load(name).report_context(section["table"], section["summary"], config["campaign"]) \
            if not section["summary"].empty else {}
        body = env.get_template(f"{name}.html.j2").render(ctx=ctx, section=section) if ctx else ""
        family_html[name] = {
            "body": body,
            "summary": summary_table(name, section),
            "failed": section["failed"],
            "missing": section["missing"],
        }
    return env.get_template("report.html.j2").render(
        overview=overview(config, sections), families=family_html, partial=partial, escape=html.escape)


def render(config: dict, grid: dict, out_path) -> Path:
    text = render_html(config, collect(config, grid))
    out = Path(out_path)
    records.write_text(out, text)
    return out


def render_partial(config: dict, grid: dict) -> Path:
    """After a failed run: the report from whatever records exist, failures listed.

    It is dated to the epoch: older than every record, it stays out of date for
    Snakemake, so the next run still redoes the missing points and renders it anew.
    """
    results, *_ = _paths(config)
    out = results / "report.html"
    records.write_text(out, render_html(config, collect(config, grid, from_raw=True), partial=True))
    os.utime(out, (0, 0))
    return out
