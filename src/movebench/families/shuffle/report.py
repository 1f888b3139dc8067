"""shuffle's tables and figures: bandwidth per pattern, the window's effect, intra- vs inter-node, efficiency."""

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


def placement_label(nodes, ranks) -> str:
    return f"{ranks} ranks, {nodes} node{'s' if nodes > 1 else ''}"


def best_window(bw):
    """One row per point but the window: the window with the highest median bandwidth."""
    keys = [k for k in ("pattern", "nodes", "ranks", "message_size", "skew") if k in bw]
    return bw.sort_values("median").groupby(keys, dropna=False, as_index=False).last()


def intra_inter(bw):
    """Intra- and inter-node side by side: per pattern, ranks and message size (best window), the median bandwidth
    at each node count and its ratio to the 1-node figure. Empty unless the campaign ran more than one node count."""
    import pandas as pd

    if bw.empty or bw["nodes"].nunique() < 2:
        return pd.DataFrame()
    best = best_window(bw)
    keys = [k for k in ("pattern", "ranks", "message_size", "skew") if k in best and best[k].notna().any()]
    wide = best.groupby(keys + ["nodes"], dropna=False)["median"].first().unstack("nodes")
    node_counts = sorted(wide.columns)
    out = pd.DataFrame(index=wide.index)
    for n in node_counts:
        out[f"GB/s, {n} node{'s' if n > 1 else ''}"] = wide[n] / 1e9
    if 1 in node_counts:
        for n in node_counts[1:]:
            out[f"{n} nodes / 1 node"] = wide[n] / wide[1]
    return out.dropna(how="all").reset_index()


def context(table, summary, campaign):
    sns, plt = plotting()
    bw = median_of(summary, "bandwidth_Bps")
    bw["GB/s"] = bw["median"] / 1e9
    # ranks and nodes together: figures at 1 and 2 nodes with the same ranks are different experiments, never
    # one line (seaborn would average them)
    bw["ranks, nodes"] = [placement_label(n, r) for n, r in zip(bw["nodes"], bw["ranks"], strict=True)]
    bw["err_lo"], bw["err_hi"] = bw["GB/s"] - bw["ci_low"] / 1e9, bw["ci_high"] / 1e9 - bw["GB/s"]
    ctx = {"figures": [], "shuffle_table": None, "intra_inter_table": None}
    grid = sns.relplot(data=bw, x="message_size", y="GB/s", hue="window", style="ranks, nodes", col="pattern",
                       kind="line", marker="o", palette="viridis", col_wrap=min(2, bw["pattern"].nunique()),
                       height=3.2, aspect=1.3, facet_kws={"sharey": False})
    grid.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bandwidth (GB/s, median)")
    title = "Bandwidth vs message size, per pattern (log-log; hue: window)"
    ctx["figures"].append((title, figure_uri(grid.figure)))
    if bw["window"].nunique() > 1:
        grid = sns.relplot(data=bw, x="window", y="GB/s", hue="message_size", style="ranks, nodes", col="pattern",
                           kind="line", marker="o", palette="magma", col_wrap=min(2, bw["pattern"].nunique()),
                           height=3.2, aspect=1.3, facet_kws={"sharey": False})
        grid.set(xscale="log", xlabel="messages in flight (window)", ylabel="bandwidth (GB/s, median)")
        ctx["figures"].append(("The window's effect (hue: message size)", figure_uri(grid.figure)))
    sides = intra_inter(bw)
    if not sides.empty:
        best = best_window(bw)
        best["placement"] = [f"{n} node{'s' if n > 1 else ''}" for n in best["nodes"]]
        grid = sns.relplot(data=best, x="message_size", y="GB/s", hue="placement", style="ranks", col="pattern",
                           kind="line", marker="o", col_wrap=min(2, best["pattern"].nunique()), height=3.2,
                           aspect=1.3, facet_kws={"sharey": False})
        grid.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bandwidth (GB/s, median)")
        ctx["figures"].append(("Intra- vs inter-node: the same pattern and ranks on 1 node and across nodes "
                               "(best window per point)", figure_uri(grid.figure)))
        ctx["intra_inter_table"] = html_table(sides)
    eff = median_of(summary, "efficiency")
    if not eff.empty:
        best = eff.sort_values("median").groupby(["pattern", "nodes", "ranks", "message_size"], as_index=False).last()
        best["ranks, nodes"] = [placement_label(n, r) for n, r in zip(best["nodes"], best["ranks"], strict=True)]
        fig, ax = plt.subplots(figsize=(7, 3.6))
        sns.lineplot(data=best, x="message_size", y="median", hue="pattern", style="ranks, nodes", marker="o", ax=ax)
        ax.set(xscale="log", xlabel="message size (bytes)", ylabel="share of peak bidi bandwidth")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ctx["figures"].append(("Efficiency: bandwidth / peak bidi bandwidth at the same nodes, ranks and size "
                               "(best window per point)", figure_uri(fig)))
    shuf = table[(table["variant"] == "shuffle") & ~table["warmup"] & table["ok"]] if len(table) else table
    if len(shuf):
        cols = ["nodes", "ranks", "message_size", "window", "skew"]
        ctx["shuffle_table"] = html_table(shuf.groupby(cols, as_index=False).agg(
            bandwidth_GBps=("bandwidth_Bps", lambda v: v.median() / 1e9),
            partition_s=("partition_s", "median"), exchange_s=("exchange_s", "median"),
            imbalance=("imbalance", "median"), verified=("verified", "all")))
    return ctx
