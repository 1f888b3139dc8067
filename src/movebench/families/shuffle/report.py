"""shuffle's tables and figures: bandwidth per pattern, the window's effect, intra- vs inter-node, efficiency."""

from __future__ import annotations

import numpy as np

from movebench.core.sizes import format_size
from movebench.core.units import sig
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
    median_text,
    plotting,
    ratio,
    ratio_text,
    varying,
)

#: factors of a point besides its sizes and placement (movebench.spec): shown where a campaign varies them, and
#: always kept apart, so that a figure never averages a single-threaded MPI with a multi-threaded one
FACTORS = ("mpi_thread_level", "memory_mode", "stack", "env")


def placement_label(nodes, ranks, *factors) -> str:
    return ", ".join([f"{ranks} ranks, {nodes} node{'s' if nodes > 1 else ''}", *map(str, factors)])


def placement_labels(frame) -> list[str]:
    """Each row's ranks and nodes, and the factors the frame varies."""
    columns = [frame["nodes"], frame["ranks"]] + [frame[k] for k in varying(frame, FACTORS)]
    return [placement_label(*row) for row in zip(*columns, strict=True)]


def skews(frame) -> list[str]:
    """", skew 0.5" on each row of a frame that varies the skew, else "": a line holds one point per x, never an
    average of skews."""
    if "skew" not in frame or frame["skew"].nunique() < 2:
        return [""] * len(frame)
    return ["" if k != k else f", skew {k:g}" for k in frame["skew"]]


def line_labels(frame) -> list[str]:
    """`placement_labels` with `skews`."""
    return [label + skew for label, skew in zip(placement_labels(frame), skews(frame), strict=True)]


def best_window(bw):
    """One row per point but the window: the window with the highest median bandwidth."""
    keys = [k for k in ("pattern", "nodes", "ranks", "message_size", "skew", *FACTORS) if k in bw]
    return bw.sort_values("median").groupby(keys, dropna=False, as_index=False).last()


def intra_inter(bw):
    """Intra- and inter-node side by side: per pattern, ranks and message size (best window), the median bandwidth
    at each node count and its ratio to the 1-node figure. Empty unless the campaign ran more than one node count."""
    import pandas as pd

    if bw.empty or bw["nodes"].nunique() < 2:
        return pd.DataFrame()
    best = best_window(bw)
    keys = [k for k in ("pattern", "ranks", "message_size", "skew", *FACTORS) if k in best and best[k].notna().any()]
    wide = best.groupby(keys + ["nodes"], dropna=False)["median"].first().unstack("nodes")
    node_counts = sorted(wide.columns)
    out = pd.DataFrame(index=wide.index)
    for n in node_counts:
        out[f"GB/s, {n} node{'s' if n > 1 else ''}"] = wide[n] / 1e9
    if 1 in node_counts:
        for n in node_counts[1:]:
            out[f"{n} nodes / 1 node"] = wide[n] / wide[1]
    return out.dropna(how="all").reset_index()


def stacks_side_by_side(bw):
    """The communication stacks side by side (docs/stacks.md): per pattern, placement and message size (best
    window), each stack's median bandwidth and its share of the best stack's. Empty unless the campaign ran more
    than one stack."""
    import pandas as pd

    if bw.empty or "stack" not in bw or bw["stack"].nunique() < 2:
        return pd.DataFrame()
    best = best_window(bw)
    others = [k for k in FACTORS if k != "stack" and k in best and best[k].nunique(dropna=False) > 1]
    keys = [k for k in ("pattern", "nodes", "ranks", "message_size", "skew", *others)
            if k in best and best[k].notna().any()]
    wide = best.groupby(keys + ["stack"], dropna=False)["median"].first().unstack("stack")
    top = wide.max(axis=1)
    out = pd.DataFrame(index=wide.index)
    for stack in wide.columns:
        out[f"GB/s, {stack}"] = wide[stack] / 1e9
    for stack in wide.columns:
        out[f"{stack} / best"] = wide[stack] / top
    return out.dropna(how="all").reset_index()


class ShuffleReport(FamilyReport):
    """shuffle's report hooks (movebench.reportkit.FamilyReport)."""

    def derive(self, table):
        """efficiency = bandwidth / the best bidi median at the same nodes, ranks and message size."""
        table = table.copy()
        measured = counted(table)
        bidi = measured[measured["variant"] == "bidi"]
        keys = ["nodes", "ranks", "message_size"] + [k for k in FACTORS if k in measured]
        if bidi.empty:
            table["peak_bidi_Bps"] = np.nan
        else:
            medians = bidi.groupby(keys + ["window"], dropna=False)["bandwidth_Bps"].median()
            peaks = medians.groupby(level=keys, dropna=False).max().rename("peak_bidi_Bps").reset_index()
            table = table.drop(columns=["peak_bidi_Bps"], errors="ignore").merge(peaks, on=keys, how="left")
        table["efficiency"] = table["bandwidth_Bps"] / table["peak_bidi_Bps"]
        return table

    def context(self, table, summary, campaign):
        sns, plt = plotting()
        bw = median_of(summary, "bandwidth_Bps")
        bw["GB/s"] = bw["median"] / 1e9
        # ranks and nodes together: figures at 1 and 2 nodes with the same ranks are different experiments, never
        # one line (seaborn would average them)
        bw["ranks, nodes"] = line_labels(bw)
        ctx = {"figures": [], "shuffle_table": None, "intra_inter_table": None, "stacks_table": None}
        stacks = stacks_side_by_side(bw)
        if not stacks.empty:
            ctx["stacks_table"] = html_table(stacks)
        # errorbar=None: seaborn's bootstrap is not the launches' interval; each point's own CI is drawn instead
        grid = sns.relplot(data=bw, x="message_size", y="GB/s", hue="window", style="ranks, nodes", col="pattern",
                           kind="line", marker="o", palette="viridis", col_wrap=min(2, bw["pattern"].nunique()),
                           height=3.2, aspect=1.3, facet_kws={"sharey": False}, errorbar=None)
        grid.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bandwidth (GB/s, median)")
        for pattern, ax in grid.axes_dict.items():
            line_intervals(ax, bw[bw["pattern"] == pattern], "message_size", "GB/s", ["window", "ranks, nodes"], 1e9)
        bounded = [bound_line(ax, bw[bw["pattern"] == pattern], "message_size")
                   for pattern, ax in grid.axes_dict.items()]
        title = "Bandwidth vs message size, per pattern (log-log; hue: window; bars: 95% CI" + (
            "; dashed: the points' upper bound)" if any(bounded) else ")")
        ctx["figures"].append((title, figure_uri(grid.figure)))
        if bw["window"].nunique() > 1:
            grid = sns.relplot(data=bw, x="window", y="GB/s", hue="message_size", style="ranks, nodes", col="pattern",
                               kind="line", marker="o", palette="magma", col_wrap=min(2, bw["pattern"].nunique()),
                               height=3.2, aspect=1.3, facet_kws={"sharey": False}, errorbar=None)
            grid.set(xscale="log", yscale="log", xlabel="messages in flight (window)",
                     ylabel="bandwidth (GB/s, median)")
            for pattern, ax in grid.axes_dict.items():
                line_intervals(ax, bw[bw["pattern"] == pattern], "window", "GB/s", ["message_size", "ranks, nodes"],
                               1e9)
                # a summary without bounds (aggregate's, before the report page adds them) draws none
                part = bw[(bw["pattern"] == pattern)].dropna(subset=["bound_Bps"]) if "bound_Bps" in bw \
                    else bw.iloc[0:0].assign(bound_Bps=[])
                for size, bound in part.groupby("message_size")["bound_Bps"].max().items():
                    ax.axhline(bound / 1e9, color="black", lw=0.8, ls=":")
                    ax.annotate(f"bound at {format_size(int(size))}", (1, bound / 1e9),
                                xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize="x-small")
            ctx["figures"].append(("The window's effect (log-log; hue: message size; bars: 95% CI; dotted: the upper "
                                   "bound at each size)", figure_uri(grid.figure)))
        sides = intra_inter(bw)
        if not sides.empty:
            best = best_window(bw)
            best["placement"] = [f"{n} node{'s' if n > 1 else ''}" for n in best["nodes"]]
            factors = [best[k] for k in varying(best, FACTORS)]
            best["ranks (factors)"] = [", ".join([f"{r} ranks", *map(str, f)]) + k
                                       for r, k, *f in zip(best["ranks"], skews(best), *factors, strict=True)]
            grid = sns.relplot(data=best, x="message_size", y="GB/s", hue="placement", style="ranks (factors)",
                               col="pattern",
                               kind="line", marker="o", col_wrap=min(2, best["pattern"].nunique()), height=3.2,
                               aspect=1.3, facet_kws={"sharey": False}, errorbar=None)
            grid.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bandwidth (GB/s, median)")
            for pattern, ax in grid.axes_dict.items():
                line_intervals(ax, best[best["pattern"] == pattern], "message_size", "GB/s",
                               ["placement", "ranks (factors)"], 1e9)
            ctx["figures"].append(("Intra- vs inter-node: the same pattern and ranks on 1 node and across nodes "
                                   "(best window per point; bars: 95% CI)", figure_uri(grid.figure)))
            ctx["intra_inter_table"] = html_table(sides)
        eff = median_of(summary, "efficiency")
        if not eff.empty:
            keys = ["pattern", "nodes", "ranks", "message_size", *varying(eff, FACTORS)]
            best = eff.sort_values("median").groupby(keys, as_index=False).last()
            best["ranks, nodes"] = placement_labels(best)
            fig, ax = plt.subplots(figsize=(7, 3.6))
            sns.lineplot(data=best, x="message_size", y="median", hue="pattern", style="ranks, nodes", marker="o",
                         ax=ax, errorbar=None)
            line_intervals(ax, best, "message_size", "median", ["pattern", "ranks, nodes"])
            ax.set(xscale="log", xlabel="message size (bytes)", ylabel="share of peak bidi bandwidth")
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ctx["figures"].append(("Efficiency: bandwidth / peak bidi bandwidth at the same nodes, ranks and size "
                                   "(best window per point; bars: 95% CI)", figure_uri(fig)))
        shuf = counted(table)
        shuf = shuf[shuf["variant"] == "shuffle"] if len(shuf) else shuf
        if len(shuf):
            cols = ["nodes", "ranks", "message_size", "window", "skew", *varying(shuf, FACTORS)]
            ctx["shuffle_table"] = html_table(shuf.groupby(cols, as_index=False).agg(
                bandwidth=("bandwidth_Bps", "median"), partition=("partition_s", "median"),
                exchange=("exchange_s", "median"), imbalance=("imbalance", "median"), verified=("verified", "all")),
                units={"message_size": SIZE, "bandwidth": "B/s", "partition": "s", "exchange": "s"})
        return ctx

    def headlines(self, table, summary) -> list[tuple[str, str]]:
        """The window's effect on the streams, the best bidi bandwidth, and how close the shuffle gets to it."""
        out = []
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return out
        for pattern in ("uni", "bidi"):
            part = bw[bw["pattern"] == pattern]
            if part["window"].nunique() < 2:
                continue
            first = part.sort_values(["nodes", "ranks", "message_size"]).iloc[0]
            same = part[(part["nodes"] == first["nodes"]) & (part["ranks"] == first["ranks"])
                        & (part["message_size"] == first["message_size"])]
            low, high = same.loc[same["window"].idxmin()], same.loc[same["window"].idxmax()]
            result = ratio(table, high["point"], low["point"], "bandwidth_Bps")
            if result is not None:
                out.append((f"{pattern} at {format_size(int(first['message_size']))}, {int(first['ranks'])} ranks: "
                            f"window {int(high['window'])} moves {ratio_text(result)} the bandwidth of window "
                            f"{int(low['window'])}", "info"))
        bidi = bw[bw["pattern"] == "bidi"]
        if len(bidi):
            best = bidi.loc[bidi["median"].idxmax()]
            bound = ""
            if "pct_of_bound" in best and best["pct_of_bound"] == best["pct_of_bound"]:
                bound = f", {sig(best['pct_of_bound'])}% of its bound ({best['bound']})"
            out.append((f"best bidi bandwidth {median_text(best, 'B/s')} at {format_size(int(best['message_size']))}, "
                        f"window {int(best['window'])}, {int(best['nodes'])} node(s){bound}", "info"))
        eff = median_of(summary, "efficiency")
        eff = eff[eff["pattern"] == "shuffle"] if len(eff) else eff
        if len(eff):
            best = eff.loc[eff["median"].idxmax()]
            out.append((f"the data-dependent shuffle reaches {sig(100 * best['median'])}% "
                        f"[{sig(100 * best['ci_low'])}, {sig(100 * best['ci_high'])}] of the peak bidi bandwidth "
                        f"(at {format_size(int(best['message_size']))}, window {int(best['window'])}, "
                        f"skew {best['skew']:g})", "info"))
        return out

    def provide_bounds(self, summary, points) -> list[dict]:
        """Between nodes: the best median bidi bandwidth at each node count (OSU's osu_bibw is the network's peak)."""
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return []
        bidi = bw[(bw["pattern"] == "bidi") & (bw["nodes"] > 1)]
        rows = []
        for nodes, group in bidi.groupby("nodes"):
            best = group.loc[group["median"].idxmax()]
            rows.append({"kind": "network", "nodes": int(nodes), "bound_Bps": best["median"],
                         "bound_ci_high_Bps": best.get("ci_high"),
                         "label": f"best bidi at {int(nodes)} nodes ({int(best['ranks'])} ranks, "
                                  f"{format_size(int(best['message_size']))}, window {int(best['window'])})",
                         "source": f"shuffle/{best['point']}"})
        return rows

    def bound_request(self, row, meta):
        """One node: memcpy of as many processes as the point's ranks (at most the CPUs); between nodes: the best
        bidi."""
        if row["nodes"] > 1:
            return {"kind": "network", "exact": {"nodes": int(row["nodes"])}}
        return {"kind": "memcpy", "at_least": {"ranks": copiers(int(row["ranks"]), meta)},
                "nearest": {"size": int(row["message_size"])}}


REPORT = ShuffleReport()
