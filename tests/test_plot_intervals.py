"""The report's figures draw each median's 95% CI, the summary's (launch-level), in the plotted unit, and never
seaborn's bootstrap: shuffle, bcast, kv and calibration."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.container import ErrorbarContainer

from movebench.engine import aggregate
from movebench.families.bcast import report as bcast_report
from movebench.families.calibration import report as calibration_report
from movebench.families.kv import report as kv_report
from movebench.families.shuffle import report as shuffle_report

KiB, MiB = 1 << 10, 1 << 20
LAUNCHES, REPS = 3, 3


def records(points, measures):
    """LAUNCHES x REPS counted records and one warm-up per launch of each point; `measures(point, launch, rep)`
    gives its measured fields. Launches differ, so the summary's CI is the launches' t-interval."""
    rows = []
    for name, point in points.items():
        for launch in range(LAUNCHES):
            for rep in range(-1, REPS):
                rows.append({"point": name, "launch": launch, "rep": max(rep, 0), "warmup": rep < 0, "ok": True,
                             **point, **measures(point, launch, max(rep, 0))})
    return pd.DataFrame(rows)


def figures(monkeypatch, module, report, table, summary):
    """REPORT.context with its figures kept open: {title: figure}."""
    kept = []
    monkeypatch.setattr(module, "figure_uri", lambda fig: kept.append(fig) or len(kept) - 1)
    ctx = report.context(table, summary, {})
    return {title: kept[index] for title, index in ctx["figures"]}


def bars_of(container) -> list[tuple[float, float, float]]:
    """(position, low, high) of each bar of an ErrorbarContainer, vertical or horizontal."""
    return [(x0, y0, y1) if x0 == x1 else (y0, x0, x1)
            for collection in container.lines[2] for (x0, y0), (x1, y1) in collection.get_segments()]


def intervals(ax) -> list[tuple[float, float, float]]:
    """`bars_of` every error bar on `ax`."""
    return [bar for c in ax.containers if isinstance(c, ErrorbarContainer) for bar in bars_of(c)]


def has(drawn, at, low, high) -> bool:
    return any(math.isclose(p, at, rel_tol=1e-6) and math.isclose(lo, low, rel_tol=1e-6)
               and math.isclose(hi, high, rel_tol=1e-6) for p, lo, hi in drawn)


def panel(fig, title):
    return next(ax for ax in fig.axes if ax.get_title() == title)


def no_bootstrap(fig):
    """seaborn's intervals are bands (PolyCollection) on lines; none may be drawn."""
    assert not [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]


def one(frame, **keys) -> pd.Series:
    for key, value in keys.items():
        frame = frame[frame[key] == value]
    assert len(frame) == 1
    return frame.iloc[0]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_shuffle_figures_carry_each_points_launch_interval(monkeypatch):
    points = {}
    for nodes in (1, 2):
        for size in (64 * KiB, MiB):
            for window in (8, 64):
                for pattern in ("uni", "bidi"):
                    points[f"{pattern}/{nodes}/{size}/{window}"] = {
                        "variant": pattern, "pattern": pattern, "nodes": nodes, "ranks": 2, "message_size": size,
                        "window": window, "skew": float("nan")}
                # two skews at one x: seaborn would have averaged them into one line with a bootstrap band
                for skew in (0.0, 0.5):
                    points[f"shuffle/{nodes}/{size}/{window}/{skew}"] = {
                        "variant": "shuffle", "pattern": "shuffle", "nodes": nodes, "ranks": 2,
                        "message_size": size, "window": window, "skew": skew}

    def measures(point, launch, rep):
        base = {"uni": 4e9, "bidi": 8e9, "shuffle": 3e9}[point["pattern"]] / point["nodes"]
        skew = point["skew"] if point["pattern"] == "shuffle" else 0.0
        base *= (1 + point["window"] / 64) * (1 + point["message_size"] / MiB) * (1 - 0.2 * skew)
        bw = base * (1 + 0.05 * launch) * (1 + 0.01 * rep)
        extra = {"partition_s": 0.1, "exchange_s": 0.2, "imbalance": 1.1, "verified": True} \
            if point["pattern"] == "shuffle" else {}
        return {"family": "shuffle", "bandwidth_Bps": bw, "elapsed_s": point["message_size"] / bw, **extra}

    table = shuffle_report.REPORT.derive(records(points, measures))
    summary = aggregate.summarize("shuffle", table)
    bw = summary[summary["measure"] == "bandwidth_Bps"]
    assert set(bw["ci_level"]) == {"launches"}
    figs = figures(monkeypatch, shuffle_report, shuffle_report.REPORT, table, summary)
    assert len(figs) == 4
    size_fig, window_fig, sides_fig, eff_fig = figs.values()
    for fig in figs.values():
        no_bootstrap(fig)

    # bandwidth vs message size: every point's bar, in GB/s, in its pattern's panel
    assert sum(len(intervals(ax)) for ax in size_fig.axes) == len(bw)
    row = one(bw, pattern="bidi", nodes=2, message_size=MiB, window=64)
    assert row["ci_low"] < row["median"] < row["ci_high"]
    ax = panel(size_fig, "pattern = bidi")
    assert has(intervals(ax), MiB, row["ci_low"] / 1e9, row["ci_high"] / 1e9)
    # the bar is in the colour of the line through the point's median, and the line is the summary's median
    line = next(line for line in ax.get_lines() if any(
        math.isclose(x, MiB) and math.isclose(y, row["median"] / 1e9) for x, y in line.get_xydata()))
    bar = next(c for c in ax.containers if isinstance(c, ErrorbarContainer)
               and has(bars_of(c), MiB, row["ci_low"] / 1e9, row["ci_high"] / 1e9))
    assert tuple(bar.lines[2][0].get_colors()[0][:3]) == pytest.approx(to_rgb(line.get_color()))
    skewed = one(bw, pattern="shuffle", nodes=1, message_size=64 * KiB, window=8, skew=0.5)
    assert has(intervals(panel(size_fig, "pattern = shuffle")), 64 * KiB, skewed["ci_low"] / 1e9,
               skewed["ci_high"] / 1e9)

    # the window's effect: x is the window
    row = one(bw, pattern="uni", nodes=1, message_size=64 * KiB, window=8)
    assert has(intervals(panel(window_fig, "pattern = uni")), 8, row["ci_low"] / 1e9, row["ci_high"] / 1e9)

    # intra- vs inter-node: the best window's point (window 64 here) and its interval
    row = one(bw, pattern="uni", nodes=2, message_size=MiB, window=64)
    drawn = intervals(panel(sides_fig, "pattern = uni"))
    assert has(drawn, MiB, row["ci_low"] / 1e9, row["ci_high"] / 1e9) and len(drawn) == 4

    # efficiency: a share, the efficiency measure's own interval
    eff = summary[summary["measure"] == "efficiency"]
    row = one(eff, pattern="uni", nodes=1, message_size=MiB, window=64)
    assert row["ci_high"] > row["ci_low"]
    assert has(intervals(eff_fig.axes[0]), MiB, row["ci_low"], row["ci_high"])


def test_bcast_bars_and_lines_carry_the_summarys_time_and_memory_intervals(monkeypatch):
    points = {}
    for method in ("pickle", "buffer"):
        for dtype in ("float64", "float32"):
            points[f"dense/{method}/{dtype}"] = {"variant": method, "kind": "dense", "method": method, "nodes": 1,
                                                 "ranks": 2, "shape": "1024x1024", "density": float("nan"),
                                                 "dtype": dtype}
        for density in (0.01, 0.1):
            points[f"sparse/{method}/{density}"] = {"variant": method, "kind": "sparse", "method": method,
                                                    "nodes": 1, "ranks": 2, "shape": "200x200", "density": density,
                                                    "dtype": "float64"}

    def measures(point, launch, rep):
        payload = 1024 * 1024 * (8 if point["dtype"] == "float64" else 4) if point["kind"] == "dense" \
            else int(200 * 200 * point["density"] * 12)
        slow = 3.0 if point["method"] == "pickle" else 1.0
        time = 1e-3 * slow * (1 + payload / MiB) * (1 + 0.07 * launch) * (1 + 0.01 * rep)
        rss = payload * (2 if point["method"] == "pickle" else 1) * (1 + 0.03 * launch) + 4096 * rep
        return {"family": "bcast", "elapsed_s": time, "bandwidth_Bps": payload / time, "payload_bytes": payload,
                "rss_hwm_delta_bytes": rss, "tracemalloc_peak_bytes": payload, "root_rss_hwm_delta_bytes": 0,
                "root_tracemalloc_peak_bytes": 0, "buffers_reused": point["method"] == "buffer"}

    table = records(points, measures)
    summary = aggregate.summarize("bcast", table)
    time = summary[summary["measure"] == "elapsed_s"]
    assert set(time["ci_level"]) == {"launches"}
    figs = figures(monkeypatch, bcast_report, bcast_report.REPORT, table, summary)
    dense_fig, sparse_fig, memory_fig = figs.values()
    no_bootstrap(sparse_fig)

    # dense: one bar per point (the dtypes name the bars apart), each with its time's interval in seconds
    ax = dense_fig.axes[0]
    drawn = intervals(ax)
    assert len(drawn) == 4
    row = one(time, point="dense/buffer/float32")
    # the bar is the summary's median; its error bar stands at its centre
    (bar,) = [b for c in ax.containers if not isinstance(c, ErrorbarContainer) for b in c
              if math.isclose(b.get_height(), row["median"])]
    assert has(drawn, bar.get_x() + bar.get_width() / 2, row["ci_low"], row["ci_high"])

    # sparse: time against density, the point's interval at its density
    row = one(time, point="sparse/pickle/0.1")
    drawn = intervals(sparse_fig.axes[0])
    assert len(drawn) == 4 and has(drawn, 0.1, row["ci_low"], row["ci_high"])

    # memory in payloads: the receiver's RSS interval divided by the payload
    rss = one(summary[summary["measure"] == "rss_hwm_delta_bytes"], point="dense/pickle/float64")
    payload = 1024 * 1024 * 8
    drawn = intervals(memory_fig.axes[0])
    assert len(drawn) == 4
    assert any(math.isclose(lo, rss["ci_low"] / payload) and math.isclose(hi, rss["ci_high"] / payload)
               for _, lo, hi in drawn)


def test_kv_bandwidth_carries_its_interval_and_the_ratio_figure_none(monkeypatch):
    points = {}
    for operation in ("put", "batch_put", "get"):
        for size in (4 * KiB, 64 * KiB):
            for clients in (2, 4):
                points[f"{operation}/{size}/{clients}"] = {
                    "variant": operation, "operation": operation, "nodes": 1, "clients_per_node": clients,
                    "managers_per_node": 1, "value_size": size, "data_format": "bytes"}

    def measures(point, launch, rep):
        bw = 1e8 * point["clients_per_node"] * (2 if point["operation"] == "batch_put" else 1) \
            * (1 + point["value_size"] / (64 * KiB)) * (1 + 0.06 * launch) * (1 + 0.01 * rep)
        return {"family": "kv", "bandwidth_Bps": bw, "elapsed_s": 1.0}

    table = records(points, measures)
    summary = aggregate.summarize("kv", table)
    bw = summary[summary["measure"] == "bandwidth_Bps"]
    figs = figures(monkeypatch, kv_report, kv_report.REPORT, table, summary)
    bandwidth_fig, ratio_fig = figs.values()
    no_bootstrap(bandwidth_fig)
    drawn = intervals(bandwidth_fig.axes[0])
    assert len(drawn) == len(bw)
    row = one(bw, variant="batch_put", value_size=64 * KiB, clients_per_node=4)
    assert has(drawn, 64 * KiB, row["ci_low"] / 1e9, row["ci_high"] / 1e9)
    # a ratio of two medians: no interval in the tables, none drawn, and none of seaborn's
    assert not intervals(ratio_fig.axes[0])
    no_bootstrap(ratio_fig)


def test_calibration_memcpy_carries_its_interval(monkeypatch):
    points = {f"memcpy/{ranks}/{size}": {"variant": "memcpy", "probe": "memcpy", "ranks": ranks, "size": size}
              for ranks in (1, 4) for size in (64 * KiB, MiB, 16 * MiB)}

    def measures(point, launch, rep):
        bw = 5e9 * point["ranks"] * (1 + 0.08 * launch) * (1 + 0.01 * rep)
        return {"family": "calibration", "bandwidth_Bps": bw, "elapsed_s": point["size"] / bw}

    table = records(points, measures)
    summary = aggregate.summarize("calibration", table)
    bw = summary[summary["measure"] == "bandwidth_Bps"]
    (fig,) = figures(monkeypatch, calibration_report, calibration_report.REPORT, table, summary).values()
    no_bootstrap(fig)
    drawn = intervals(fig.axes[0])
    assert len(drawn) == len(bw)
    row = one(bw, ranks=4, size=MiB)
    assert has(drawn, MiB, row["ci_low"] / 1e9, row["ci_high"] / 1e9)
