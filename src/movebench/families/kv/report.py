"""kv's tables and figures: bandwidth per operation, the study's speed-ups, Dragon's start-up costs."""

from __future__ import annotations

from movebench.core.sizes import format_size
from movebench.reportkit import (
    SIZE,
    FamilyReport,
    bound_line,
    copiers,
    counted,
    figure_uri,
    html_table,
    line_intervals,
    median_of,
    plotting,
    ratio,
    ratio_text,
    varying,
)

OPERATIONS = ("put", "batch_put", "get", "frozen_get")

RATIOS = {"batch_put / put": ("batch_put", "put"), "frozen_get / get": ("frozen_get", "get")}
#: what makes a kv case besides its operation (aggregate.load gives records older than data_format its default)
CASE = ["nodes", "clients_per_node", "managers_per_node", "value_size", "data_format"]


def speedups(bw):
    """Median bandwidth ratios at equal nodes, clients, managers, value size and data format, as the study reports
    them."""
    import pandas as pd

    wide = bw.pivot_table(index=CASE, columns="variant", values="median", aggfunc="first").reset_index()
    out = wide[CASE].copy()
    for label, (num, den) in RATIOS.items():
        if num in wide and den in wide:
            out[label] = wide[num] / wide[den]
    if len(out.columns) == len(CASE):
        return pd.DataFrame()
    return out


def line_style(frame, keys, default):
    """(frame, column) for a figure's line style: the one of `keys` the frame varies, a label of several, or
    `default`; every factor that varies is named, so that no line averages two cases."""
    keys = varying(frame, keys)
    if not keys:
        return frame, default
    if len(keys) == 1:
        return frame, keys[0]
    label = ", ".join(keys)
    return frame.assign(**{label: [", ".join(map(str, v)) for v in zip(*(frame[k] for k in keys), strict=True)]}), label


def passes_per_round(table) -> str | None:
    """How many passes over the keys the counted rounds timed ("4", or "1, 4" where points differ)."""
    if not len(table) or "iterations" not in table:
        return None
    passes = counted(table)["iterations"].dropna()
    return ", ".join(str(int(n)) for n in sorted(set(passes))) or None


def data_note(formats: list[str]) -> str | None:
    """What the data that ran mean for setting a figure beside gups_ddict's or the DDict study's."""
    if formats == ["numpy"]:
        return ("Data: numpy, gups_ddict's own keys and values: these figures may be set beside gups_ddict's and the "
                "DDict study's.")
    if formats == ["bytes"]:
        return ("Data: bytes (movebench's keys and values, one distinct value per key), not gups_ddict's numpy "
                "arrays: the data alone moved figures by 0.37-1.4x between the two, so set these beside gups_ddict's "
                "or the DDict study's only after a run with data_format: numpy (docs/notes/kernels.md, section 7).")
    if formats:
        return ("Data: " + " and ".join(formats) + " (the line style tells them apart); only numpy's figures may be "
                "set beside gups_ddict's and the DDict study's.")
    return None


class KvReport(FamilyReport):
    """kv's report hooks (movebench.reportkit.FamilyReport)."""

    def context(self, table, summary, campaign):
        sns, plt = plotting()
        formats = sorted(set(table["data_format"])) if len(table) else []
        ctx = {"figures": [], "ratios": None, "startup": None, "passes": passes_per_round(table),
               "formats": ", ".join(formats) or None, "data_note": data_note(formats)}
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return ctx
        bw["GB/s"] = bw["median"] / 1e9
        lines, style = line_style(bw, ["data_format", "clients_per_node", "managers_per_node"], "clients_per_node")
        # errorbar=None: seaborn's bootstrap is not the launches' interval; each point's own CI is drawn instead
        grid = sns.relplot(data=lines, x="value_size", y="GB/s", hue="variant", style=style,
                           col="nodes", kind="line", marker="o", height=3.4, aspect=1.3,
                           hue_order=[o for o in OPERATIONS if o in set(bw["variant"])],
                           facet_kws={"sharey": False}, errorbar=None)
        grid.set(xscale="log", yscale="log", xlabel="value size (bytes)",
                 ylabel="aggregate bandwidth (GB/s, median)")
        grid.set_titles("{col_name} node(s)")
        for nodes, ax in grid.axes_dict.items():
            line_intervals(ax, lines[lines["nodes"] == nodes], "value_size", "GB/s", ["variant", style], 1e9)
        bounded = [bound_line(ax, bw[bw["nodes"] == nodes], "value_size") for nodes, ax in grid.axes_dict.items()]
        ctx["figures"].append(("Aggregate bandwidth vs value size, per operation (log-log; one panel per node "
                               "count; bars: 95% CI" + ("; dashed: the points' upper bound)" if any(bounded) else ")"),
                               figure_uri(grid.figure)))
        ratios = speedups(bw)
        if not ratios.empty:
            fig, ax = plt.subplots(figsize=(7, 3.6))
            long = ratios.melt(id_vars=CASE, value_vars=[c for c in RATIOS if c in ratios],
                               var_name="ratio", value_name="x")
            long, style = line_style(long, ["data_format", "nodes", "clients_per_node", "managers_per_node"], "nodes")
            # a ratio of two medians has no interval in the tables (the headlines' is the launch-level ratio's, of
            # another estimate: reportkit.ratio): none drawn, and none of seaborn's
            sns.lineplot(data=long.dropna(subset=["x"]), x="value_size", y="x", hue="ratio", style=style, marker="o",
                         ax=ax, errorbar=None)
            ax.set(xscale="log", yscale="log", xlabel="value size (bytes)",
                   ylabel="speed-up (ratio of median bandwidths)")
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ctx["figures"].append(("Batched vs unbatched puts and frozen vs unfrozen gets", figure_uri(fig)))
            ctx["ratios"] = html_table(ratios, units={"value_size": SIZE})
        measured = counted(table)
        cols = [c for c in ("dragon_startup_s", "ddict_create_s", "clients_start_s") if c in measured]
        if cols:
            start = measured.groupby(["variant", *CASE], as_index=False)[cols].median()
            ctx["startup"] = html_table(start, units={c: "s" for c in cols} | {"value_size": SIZE})
        return ctx

    def headlines(self, table, summary) -> list[tuple[str, str]]:
        """The study's two speed-ups at each value size: batched over plain puts, frozen over plain gets."""
        bw = median_of(summary, "bandwidth_Bps")
        out = []
        if bw.empty:
            return out
        several = bool(varying(bw, ["data_format"]))
        for label, (num, den) in RATIOS.items():
            figures = []
            for values, group in bw.groupby(CASE, sort=True):
                points = dict(zip(group["variant"], group["point"], strict=True))
                if num in points and den in points:
                    result = ratio(table, points[num], points[den], "bandwidth_Bps")
                    if result is not None:
                        data = f", {values[4]} data" if several else ""
                        figures.append(f"{format_size(int(values[3]))} ({int(values[0])} node(s){data}): "
                                       f"{ratio_text(result)}")
            if figures:
                out.append((f"{label} (aggregate bandwidth): " + "; ".join(figures), "info"))
        return out

    def bound_request(self, row, meta):
        """One node: memcpy of its clients and managers together (at most the CPUs) at the value size; between nodes:
        the best bidi stream."""
        if row["nodes"] > 1:
            return {"kind": "network", "exact": {"nodes": int(row["nodes"])}}
        processes = int(row["clients_per_node"]) + int(row["managers_per_node"])
        return {"kind": "memcpy", "at_least": {"ranks": copiers(processes, meta)},
                "nearest": {"size": int(row["value_size"])}}


REPORT = KvReport()
