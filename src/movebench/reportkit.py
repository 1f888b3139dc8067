"""What a family's report is made of: the hooks the engine calls (`FamilyReport`) and the kit they are written with.

A family's `report.py` defines `class XReport(FamilyReport)`, overrides the hooks it needs and ends with
`REPORT = XReport()`; `movebench.families.report(name)` returns that object. The engine calls the hooks at two
stages: `aggregate` calls `derive` on every records table it writes; the report page (`movebench.judging.report`) asks
for the bounds (`provide_bounds`, `bound_request`: `movebench.judging.bounds`), then `context` for the family's
section template and `headlines` for the findings. Every hook has a default that adds nothing, so a family
overrides only what it shows.

The kit: tables as HTML (`html_table`, `SIZE`), figures as data URIs (`plotting`, `figure_uri`, `bound_line`),
the summary's 95% CIs on a figure's medians (`line_intervals`, `bar_intervals`), summary rows (`median_of`,
`median_text`), the counted repetitions (`counted`) and ratios of two points with their launch-level confidence
interval (`ratio`, `ratios`, `ratio_text`), what a figure must name (`varying`), and how many processes can copy at
once (`copiers`, for bound requests).

This module sits just above `movebench.core` and `movebench.spec` and imports nothing else from movebench:
families import it, and the report page, bounds, findings and aggregate call what families build with it.
"""

from __future__ import annotations

import base64
import io
import math

import pandas as pd

from movebench.core import units as units_
from movebench.core.sizes import format_size
from movebench.core.tables import LAUNCH_JOB, counted

__all__ = ["BOUND_STYLE", "SIZE", "FamilyReport", "bar_intervals", "bound_line", "copiers", "counted", "figure_uri",
           "html_table", "key_cell", "line_intervals", "median_of", "median_text", "plotting", "ratio", "ratio_text",
           "ratios", "varying"]


class FamilyReport:
    """A family's report hooks, with the defaults a family that overrides nothing gets.

    Arguments the hooks receive: `table`, the family's records (one row per repetition, warm-ups and failures
    flagged: `counted(table)` keeps the measured ones); `summary`, one row per point and measure (`n`, `median`,
    `ci_low`, `ci_high`, ...; on the report page also `bound_Bps`, `bound`, `bound_note`, `pct_of_bound` on
    bandwidth rows); `points`, one row per point of the grid (status and flattened meta); `campaign`, the
    config's campaign section.
    """

    def derive(self, table: pd.DataFrame) -> pd.DataFrame:
        """Columns computed from the records (e.g. shuffle's efficiency), added before the summary is made and
        kept in the tables on disk. Default: the table unchanged."""
        return table

    def context(self, table: pd.DataFrame, summary: pd.DataFrame, campaign: dict) -> dict:
        """What the family's section template (`families/<name>/report.html.j2`) renders, as `ctx`: figures,
        HTML tables, notes. Called only when the summary has rows. Default: {} (the section shows the engine's
        per-point table and nothing of the family's own)."""
        return {}

    def headlines(self, table: pd.DataFrame, summary: pd.DataFrame) -> list[tuple[str, str]]:
        """The family's headline figures for the findings at the top of the page, as (text, level) with level
        "bad", "warn" or "info"; figures with their 95% CI. Default: none."""
        return []

    def provide_bounds(self, summary: pd.DataFrame, points: pd.DataFrame) -> list[dict]:
        """Upper bounds this family measured for the others' bandwidths, one dict each: `kind` ("memcpy",
        "network", "fio", ...), the keys a request picks by, `bound_Bps`, `label`, `source` (movebench.judging.bounds).
        Default: none."""
        return []

    def bound_request(self, row: pd.Series, meta: dict) -> dict | None:
        """Which provided bound applies to one bandwidth point (`row`: its bandwidth summary row, `meta`: its row
        of the points table): {"kind": ..., "exact": {...}, "at_least": {...}, "nearest": {...}}
        (movebench.judging.bounds). Default: None, the point has no bound."""
        return None


def copiers(processes: int, meta: dict | None) -> int:
    """Processes of a point that can copy at once on one node: at most its CPUs."""
    cpus = (meta or {}).get("cpu_count")
    try:
        cpus = int(cpus)
    except (TypeError, ValueError):
        return int(processes)
    return max(1, min(int(processes), cpus))


def figure_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


#: `html_table`'s unit for byte counts that name a point (a message or value size): shown as 4KiB, 1MiB.
SIZE = "size"


def html_table(frame: pd.DataFrame, float_format=None, classes="data", units: dict | None = None) -> str:
    """A DataFrame as an HTML table: three significant digits, no exponents.

    `units` maps a column of SI values to its unit ("B/s", "s", "B", or a display unit such as
    "MiB/s"): the column is shown in the unit that suits its values, named in its header
    ("bandwidth (GB/s)"); `SIZE` shows byte counts as sizes (4KiB). The tables on disk keep the
    SI values.
    """
    frame = frame.copy()
    renames = {}
    for column, unit in (units or {}).items():
        if column not in frame:
            continue
        if unit == SIZE:
            frame[column] = [key_cell(v, size=True) for v in frame[column]]
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        label, factor = units_.choose(unit, values.dropna().tolist())
        frame[column] = values / factor
        renames[column] = f"{column} ({label})" if label not in ("1", "") else column

    def fmt(v):
        if pd.isna(v):
            return ""
        return float_format.format(v) if float_format else units_.sig(v)

    formatters = {c: fmt for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}
    frame = frame.rename(columns=renames)
    formatters = {renames.get(c, c): f for c, f in formatters.items()}
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


BOUND_STYLE = {"ls": "--", "color": "black", "lw": 1.1, "marker": "_", "markersize": 10}


def bound_line(ax, data: pd.DataFrame, x: str, scale: float = 1e9, label: str = "upper bound") -> bool:
    """The upper bound of the points in `data` (bandwidth summary rows with `bound_Bps`: the bound a point's
    `FamilyReport.bound_request` found, movebench.judging.bounds) drawn on `ax` against `x` as a dashed black line, in
    the plot's unit (`scale` bytes/s per unit)."""
    if "bound_Bps" not in data:
        return False
    part = data.dropna(subset=["bound_Bps"])
    if part.empty:
        return False
    line = part.groupby(x)["bound_Bps"].max().sort_index()
    (handle,) = ax.plot(line.index, line.to_numpy() / scale, label=label, **BOUND_STYLE)
    ax.legend(handles=[handle], loc="lower right", fontsize="small", frameon=True)
    return True


#: How a figure draws a median's 95% CI: thin bars with caps, as io's figure does.
INTERVAL_STYLE = {"fmt": "none", "elinewidth": 1.1, "capsize": 3, "zorder": 3}


def _interval(ax, at, low, high, color, horizontal: bool = False):
    """Error bars that span exactly [low, high] at positions `at`, whichever side of them the median lies."""
    import numpy as np

    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    mid, half = (low + high) / 2, (high - low) / 2
    if horizontal:
        return ax.errorbar(mid, at, xerr=half, ecolor=color, **INTERVAL_STYLE)
    return ax.errorbar(at, mid, yerr=half, ecolor=color, **INTERVAL_STYLE)


def line_intervals(ax, data: pd.DataFrame, x: str, y: str, by=(), scale: float = 1.0, low: str = "ci_low",
                   high: str = "ci_high") -> int:
    """Each row's CI (`low`, `high` divided by `scale`: the plot's unit) as an error bar at its `x`, in the colour of
    the line seaborn drew through its group (the rows equal on `by`); rows without a CI get none. Call it with
    seaborn's own intervals off (`errorbar=None`). Returns how many bars it drew."""
    import numpy as np

    rows = data.dropna(subset=[x, y])
    lines = [line for line in ax.get_lines() if len(line.get_xdata())]
    taken: set[int] = set()
    drawn = 0
    for _, group in (rows.groupby(list(by), dropna=False, sort=False) if by else [((), rows)]):
        group = group.sort_values([x, y])
        xs, ys = group[x].to_numpy(dtype=float), group[y].to_numpy(dtype=float)
        color = "0.3"
        for i, line in enumerate(lines):
            lx, ly = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
            if i not in taken and lx.shape == xs.shape and np.allclose(lx, xs, rtol=1e-6) \
                    and np.allclose(ly, ys, rtol=1e-6):
                taken.add(i)
                color = line.get_color()
                break
        known = group.dropna(subset=[low, high])
        if len(known):
            _interval(ax, known[x].to_numpy(dtype=float), known[low] / scale, known[high] / scale, color)
            drawn += len(known)
    return drawn


def bar_intervals(ax, data: pd.DataFrame, category: str, order, value: str, hue: str, hue_order, scale: float = 1.0,
                  low: str = "ci_low", high: str = "ci_high", horizontal: bool = False) -> int:
    """Each bar's CI (`low`, `high` divided by `scale`) on a seaborn bar plot of `value` by `category` (in `order`)
    and `hue` (in `hue_order`), drawn with `errorbar=None`: the bar is found by its position and hue, and must be one
    row of `data` (its length that row's `value`). Returns how many bars it drew."""
    from matplotlib.container import BarContainer

    containers = [c for c in ax.containers if isinstance(c, BarContainer)]
    order, hue_order = list(order), list(hue_order)
    if len(containers) != len(hue_order):  # seaborn draws one container per hue level, empty ones too
        return 0
    drawn = 0
    for level, container in zip(hue_order, containers, strict=True):
        for bar in container:
            centre = bar.get_y() + bar.get_height() / 2 if horizontal else bar.get_x() + bar.get_width() / 2
            length = bar.get_width() if horizontal else bar.get_height()
            index = int(round(centre))
            if not 0 <= index < len(order):
                continue
            row = data[(data[category] == order[index]) & (data[hue] == level)].dropna(subset=[low, high])
            if len(row) != 1 or not math.isclose(row[value].iloc[0], length, rel_tol=1e-6):
                continue
            _interval(ax, [centre], row[low] / scale, row[high] / scale, "0.2", horizontal)
            drawn += 1
    return drawn


def varying(frame: pd.DataFrame, keys) -> list[str]:
    """Those of `keys` whose column holds more than one value: what a figure or label must name."""
    return [k for k in keys if k in frame and frame[k].nunique() > 1]


def ratio(table: pd.DataFrame, numerator: str, denominator: str, measure: str):
    """The ratio numerator / denominator of two points of one campaign's `measure`, with its 95% CI, at the level the
    campaign replicated, the launch (`movebench.core.verdict.Comparison`: `ratio`, `ci_low`, `ci_high`; `unit` says
    what was counted as one observation, `paired` whether the launches were shared); None when a side has no value.

    Each point's launches are reduced to their medians and compared on the log scale, with compare's statistics:
    Student's t with the variance moderated toward the family's (empirical Bayes, `core.verdict`):
    - points measured in the same launches (a launch group's members: the same `LAUNCH_JOB` in 2 launches or more)
      are paired: the t-interval of the per-launch log ratios (`compare_paired_launches`), their variance moderated
      toward that of the family's other pairs measured together (`paired_variance_prior`). A launch's effect on
      its members is shared, by an amount nothing in the records names; an unpaired test would count it on both
      sides as if independent (too wide when the members move together: 98-100% coverage instead of 95% in
      bench/report_intervals.py), while each launch's ratio is free of it, whatever its amount. Launches of
      either point measured apart from the other's (a member measured again on its own) are left out of a
      paired ratio: their partner's launch effect is not in them.
    - points launched apart: the t-test on the two points' log launch medians, their variance moderated toward the
      family's (`compare_launches` with `launch_variance_prior` over this table's points of `measure`).
    - a point of one launch: the Hodges-Lehmann interval of the two points' repetitions (`unit` "repetitions"); it
      knows nothing of how a relaunch moves the figures (`ratio_text` says so).
    """
    return ratios(table, [(numerator, denominator)], measure)[0]


def ratios(table: pd.DataFrame, pairs, measure: str) -> list:
    """`ratio` of each (numerator, denominator) in `pairs`, the table read once."""
    from movebench.core.verdict import (
        compare_launches,
        compare_paired_launches,
        launch_variance_prior,
        paired_variance_prior,
    )

    launches = _launch_values(counted(table), measure)
    together = _measured_together(launches)
    priors = {}  # the family's, fitted once, when a ratio first needs it
    out = []
    for numerator, denominator in pairs:
        top, bottom = launches.get(numerator), launches.get(denominator)
        if not top or not bottom:
            out.append(None)
            continue
        # a launch of its own is keyed by its index (an int) and pairs with nothing
        shared = sorted(job for job in set(top) & set(bottom) if isinstance(job, str))
        if len(shared) >= 2:
            # the prior leaves out the pairs holding either point: a family's groups hold few pairs, and the pair's
            # own variance counted in the prior too would be counted twice (coverage 92.5% instead of 95% with 3
            # pairs of 3 launches, bench/report_intervals.py)
            others = [(b, n) for a, z, b, n in together if not {a, z} & {numerator, denominator}]
            out.append(compare_paired_launches([bottom[j] for j in shared], [top[j] for j in shared],
                                               prior=paired_variance_prior(others)))
            continue
        if "apart" not in priors:
            priors["apart"] = launch_variance_prior([(list(point.values()),) for point in launches.values()])
        out.append(compare_launches(list(bottom.values()), list(top.values()), prior=priors["apart"]))
    return out


def _measured_together(launches: dict[str, dict]) -> list[tuple[str, str, list, list]]:
    """(point, point, its launches, the other's) of points measured in the same launches (the same launch jobs, 2 or
    more), for the prior of a paired ratio's variance: each such group's points in order, two at a time, so that
    no point counts twice (every pair of a group would give the prior far more df than the group's launches hold)."""
    groups: dict[tuple, list[str]] = {}
    for point in sorted(launches):
        jobs = tuple(sorted(k for k in launches[point] if isinstance(k, str)))
        if len(jobs) >= 2:
            groups.setdefault(jobs, []).append(point)
    return [(a, b, [launches[a][j] for j in jobs], [launches[b][j] for j in jobs])
            for jobs, points in groups.items() for a, b in zip(points[0::2], points[1::2], strict=False)]


def _launch_values(rows: pd.DataFrame, measure: str) -> dict[str, dict]:
    """Point -> its values of `measure` per launch, keyed by the launch's `LAUNCH_JOB` when it ran in a launch group's
    job, else by its launch index; launches with no value left out."""
    if measure not in rows.columns or rows.empty:
        return {}
    frame = pd.DataFrame({
        "point": rows["point"].to_numpy(),
        "launch": pd.to_numeric(rows["launch"], errors="coerce").fillna(0).astype(int).to_numpy()
        if "launch" in rows else 0,
        "job": rows[LAUNCH_JOB].to_numpy(dtype=object) if LAUNCH_JOB in rows else None,
        "value": pd.to_numeric(rows[measure], errors="coerce").to_numpy(dtype=float)}).dropna(subset=["value"])
    out: dict[str, dict] = {}
    for (point, k), part in frame.groupby(["point", "launch"], sort=True):
        jobs = part["job"].dropna().unique()
        out.setdefault(point, {})[str(jobs[0]) if len(jobs) == 1 else int(k)] = part["value"].tolist()
    return out


def ratio_text(result) -> str:
    """"2.10x [1.90, 2.31]": a ratio with its 95% CI; a CI of one launch's repetitions says so."""
    text = f"{units_.sig(result.ratio)}x [{units_.sig(result.ci_low)}, {units_.sig(result.ci_high)}]"
    if result.unit != "launches":
        text += " (one launch: the CI spans its repetitions, not a relaunch)"
    return text


def median_text(row, unit: str) -> str:
    """A summary row's median with its 95% CI, in the unit that suits the median: "9.12 GB/s [8.80, 9.31]"."""
    label, factor = units_.choose(unit, [row["median"]])
    return (f"{units_.sig(row['median'] / factor)} {label} [{units_.sig(row['ci_low'] / factor)}, "
            f"{units_.sig(row['ci_high'] / factor)}]")


def key_cell(value, size: bool = False) -> str:
    """A point's key value as a table cell: integers without ".0", sizes as 4KiB where `size`."""
    value = value.item() if hasattr(value, "item") else value  # numpy scalars from the summary
    if isinstance(value, float):
        if pd.isna(value):
            return ""
        if not value.is_integer():
            return f"{value:g}"
        value = int(value)
    if size and isinstance(value, int):
        return format_size(value)
    return str(value)
