"""shuffle's tables and figures: bandwidth per pattern, the window's effect, efficiency."""

from __future__ import annotations

import numpy as np

from movebench.report import figure_uri, html_table, median_of, plotting


def derive(table):
    """efficiency = bandwidth / the best bidi median at the same nodes, ranks and message size."""
    table = table.copy()
    measured = table[~table["warmup"] & table["ok"].astype(bool)]
    bidi = measured[measured["variant"] == "bidi"]
    keys = ["nodes", "ranks", "message_size"]
    if bidi.empty:
        table["peak_bidi_Bps"] = np.nan
    else:
        medians = bidi.groupby(keys + ["window"])["bandwidth_Bps"].median()
        peaks = medians.groupby(level=keys).max().rename("peak_bidi_Bps").reset_index()
        table = table.drop(columns=["peak_bidi_Bps"], errors="ignore").merge(peaks, on=keys, how="left")
    table["efficiency"] = table["bandwidth_Bps"] / table["peak_bidi_Bps"]
    return table


def context(table, summary, campaign):
    sns, plt = plotting()
    bw = median_of(summary, "bandwidth_Bps")
    bw["GB/s"] = bw["median"] / 1e9
    bw["err_lo"], bw["err_hi"] = bw["GB/s"] - bw["ci_low"] / 1e9, bw["ci_high"] / 1e9 - bw["GB/s"]
    ctx = {"figures": [], "shuffle_table": None}
    grid = sns.relplot(data=bw, x="message_size", y="GB/s", hue="window", style="ranks", col="pattern",
                       kind="line", marker="o", palette="viridis", col_wrap=min(2, bw["pattern"].nunique()),
                       height=3.2, aspect=1.3, facet_kws={"sharey": False})
    grid.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bandwidth (GB/s, median)")
    title = "Bandwidth vs message size, per pattern (log-log; hue: window)"
    ctx["figures"].append((title, figure_uri(grid.figure)))
    if bw["window"].nunique() > 1:
        grid = sns.relplot(data=bw, x="window", y="GB/s", hue="message_size", style="ranks", col="pattern",
                           kind="line", marker="o", palette="magma", col_wrap=min(2, bw["pattern"].nunique()),
                           height=3.2, aspect=1.3, facet_kws={"sharey": False})
        grid.set(xscale="log", xlabel="messages in flight (window)", ylabel="bandwidth (GB/s, median)")
        ctx["figures"].append(("The window's effect (hue: message size)", figure_uri(grid.figure)))
    eff = median_of(summary, "efficiency")
    if not eff.empty:
        best = eff.sort_values("median").groupby(["pattern", "ranks", "message_size"], as_index=False).last()
        fig, ax = plt.subplots(figsize=(7, 3.6))
        sns.lineplot(data=best, x="message_size", y="median", hue="pattern", style="ranks", marker="o", ax=ax)
        ax.set(xscale="log", xlabel="message size (bytes)", ylabel="share of peak bidi bandwidth")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ctx["figures"].append(("Efficiency: bandwidth / peak bidi bandwidth at the same ranks and size "
                               "(best window per point)", figure_uri(fig)))
    shuf = table[(table["variant"] == "shuffle") & ~table["warmup"] & table["ok"]] if len(table) else table
    if len(shuf):
        cols = ["ranks", "message_size", "window", "skew"]
        ctx["shuffle_table"] = html_table(shuf.groupby(cols, as_index=False).agg(
            bandwidth_GBps=("bandwidth_Bps", lambda v: v.median() / 1e9),
            partition_s=("partition_s", "median"), exchange_s=("exchange_s", "median"),
            imbalance=("imbalance", "median"), verified=("verified", "all")))
    return ctx
