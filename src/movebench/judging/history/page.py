"""history.html: per family, the series that changed, plotted over the runs with their intervals and change points,
a table of every change point, and how the newest run's figures sit in their history. Self-contained like the
report: inline PNG figures, no script, no external URL."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import os
from pathlib import Path

import jinja2
import pandas as pd

from movebench.core import records, resources
from movebench.judging.history import analysis, detect, store

#: the series a family's section plots at most (the table lists every change point)
MAX_PLOTS = 24


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def plot(result: analysis.SeriesResult) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = result.frame
    x = list(range(len(frame)))
    est = frame["estimate"].to_numpy(float)
    low = frame["ci_low"].fillna(frame["estimate"]).to_numpy(float)
    high = frame["ci_high"].fillna(frame["estimate"]).to_numpy(float)
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.errorbar(x, est, yerr=[est - low, high - est], fmt="o", ms=3, color="#335", ecolor="#99a", capsize=2)
    bounds = [0] + [f.change.index for f in result.found] + [len(frame)]
    levels = [result.found[0].change.before] + [f.change.after for f in result.found] if result.found else []
    for (a, b), level in zip(zip(bounds, bounds[1:], strict=False), levels, strict=False):
        ax.hlines(level, a - 0.4, b - 0.6, color="#1b7f3b", lw=1.5)
    for f in result.found:
        colour = "#b00020" if f.worse else "#1b7f3b"
        ax.axvspan(f.change.low - 0.5, f.change.high - 0.5, color=colour, alpha=0.12, lw=0)
        ax.axvline(f.change.index - 0.5, color=colour, lw=1.2, ls="--")
        ax.annotate(_size(f.change, result.log), (f.change.index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", color=colour, fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels([pd.Timestamp(t).strftime("%m-%d %H:%M") for t in frame["started"]], rotation=60,
                       fontsize=6, ha="right")
    ax.set_ylabel(result.unit)
    ax.set_title(result.label, fontsize=9, loc="left")
    ax.grid(alpha=0.3)
    return _png(fig)


def _size(change: detect.Change, log: bool) -> str:
    if log:
        return f"x{change.size:.3g} [{change.size_low:.3g}, {change.size_high:.3g}]"
    return f"{change.size:+.3g} [{change.size_low:+.3g}, {change.size_high:+.3g}]"


def newest_run(runs: pd.DataFrame, results: list[analysis.SeriesResult]) -> dict | None:
    """How the newest run's figures sit in their history: its series in line with their current level, those whose
    level moved within the newest runs (worse, better)."""
    if runs.empty:
        return None
    last = runs.iloc[-1]
    mine = [r for r in results if r.frame["run_id"].iloc[-1] == last["run_id"]]
    moved = [(r, r.found[-1]) for r in mine if r.found and r.found[-1].recent]
    return {"run_id": last["run_id"], "campaign": last["campaign"], "started": last["started"],
            "results": last["results"], "series": len(mine), "in_line": len(mine) - len(moved),
            "worse": [(r.label, _size(f.change, r.log)) for r, f in moved if f.worse],
            "better": [(r.label, _size(f.change, r.log)) for r, f in moved if not f.worse]}


def _fields(fingerprint) -> str:
    """A run's fingerprint as `field: value` pairs, the package list left to the store (one SQL query away)."""
    fields = json.loads(fingerprint) if isinstance(fingerprint, str) else {}
    return "; ".join(f"{k}: {v}" for k, v in fields.items() if k != "packages")


def link(campaign: dict) -> dict | None:
    """The report's link to the history page of campaign.history's store, relative to the results folder."""
    if not campaign.get("history"):
        return None
    store_path = Path(campaign["history"]).absolute()
    href = os.path.relpath(store.default_page(store_path), Path(campaign["results_dir"]).absolute())
    return {"store": str(store_path), "href": Path(href).as_posix()}


def render(store_path, out_path=None, alpha: float = detect.ALPHA) -> Path:
    runs, estimates = store.load(store_path)
    results = analysis.analyse(estimates, alpha=alpha)
    families: dict[str, list] = {}
    for result in results:
        if result.found:
            families.setdefault(result.key[1], []).append(result)
    sections = {}
    for family, changed in sorted(families.items()):
        changed.sort(key=lambda r: (not any(f.worse for f in r.found), r.label))
        sections[family] = {"plots": [(r.label, plot(r)) for r in changed[:MAX_PLOTS]],
                            "more": max(0, len(changed) - MAX_PLOTS),
                            "series": sum(1 for r in results if r.key[1] == family)}
    rows = analysis.change_rows(results)
    for row in rows:
        row["size_text"] = (f"x{row['size']:.3g} [{row['size_low']:.3g}, {row['size_high']:.3g}]"
                            if row["scale"] == "ratio" else
                            f"{row['size']:+.3g} [{row['size_low']:+.3g}, {row['size_high']:+.3g}]")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.templates())),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    env.filters["when"] = lambda t: pd.Timestamp(t).strftime("%Y-%m-%d %H:%M")
    runs = runs.assign(fingerprint=[_fields(f) for f in runs["fingerprint"]])
    html = env.get_template("history.html.j2").render(
        store=str(Path(store_path).resolve()), generated=dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        runs=runs.to_dict("records"), campaigns=sorted(runs["campaign"].unique()) if len(runs) else [],
        series=len(results), sections=sections, rows=rows, alpha=alpha, min_size=detect.MIN_SIZE,
        recent=analysis.RECENT, newest=newest_run(runs, results))
    out = Path(out_path) if out_path else store.default_page(store_path)
    records.write_text(out, html)
    return out
