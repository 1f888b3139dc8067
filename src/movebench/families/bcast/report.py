"""bcast's tables and figures: the study's speed-up table, the in-place crossover, the pure transfer (osu) beside
buffer, memory per method."""

from __future__ import annotations

from movebench.core import units
from movebench.families.bcast import FAMILY
from movebench.reportkit import (
    FamilyReport,
    bar_intervals,
    copiers,
    counted,
    figure_uri,
    html_table,
    line_intervals,
    median_of,
    plotting,
    ratio,
    ratio_text,
    ratios,
    varying,
)

METHODS = ("pickle", "buffer", "pkl5", "p2p", "rma", "osu")
# The study's methods, timed alike (one broadcast, slowest rank, from a barrier); osu is timed as osu_bcast
# (mean of back-to-back calls), so it stands beside buffer in a table of its own, not in the speed-ups.
STUDY = ("pickle", "buffer", "pkl5", "p2p", "rma")
IN_PLACE = ("buffer", "p2p", "rma")
CASE = ["kind", "shape", "density", "dtype", "nodes", "ranks", "mpi_thread_level", "memory_mode", "stack", "env"]
#: what sets cases apart besides what a figure's panels, axes and hues show (kind, shape, density, ranks, nodes)
FACTORS = ("dtype", "mpi_thread_level", "memory_mode", "stack", "env")
_MiB = 2**20
MEMORY_PLOT_MIN_BYTES = 4 * _MiB


def method_medians(table):
    """One row per case and method: medians of the counted repetitions, and the cold (first warm-up) time."""
    import pandas as pd

    table = table.assign(density=table["density"] if "density" in table else float("nan"),
                         memory_mode=table["memory_mode"] if "memory_mode" in table else "4k",
                         mpi_thread_level=table["mpi_thread_level"] if "mpi_thread_level" in table else "multiple",
                         stack=table["stack"] if "stack" in table else "default",
                         env=table["env"].fillna("") if "env" in table else "")
    measured = counted(table)
    medians = (
        measured.groupby(CASE + ["method"], dropna=False, sort=True)
        .agg(
            n=("elapsed_s", "size"),
            point=("point", "first"),
            time_s=("elapsed_s", "median"),
            bandwidth_Bps=("bandwidth_Bps", "median"),
            payload_bytes=("payload_bytes", "first"),
            rss_hwm_delta_bytes=("rss_hwm_delta_bytes", "median"),
            tracemalloc_peak_bytes=("tracemalloc_peak_bytes", "median"),
            root_rss_hwm_delta_bytes=("root_rss_hwm_delta_bytes", "median"),
            buffers_reused=("buffers_reused", "first"),
        )
        .reset_index()
    )
    cold = table[table["warmup"] & (table["rep"] == 0)].groupby(CASE + ["method"], dropna=False)["elapsed_s"]
    medians = medians.merge(cold.first().rename("cold_s").reset_index(), on=CASE + ["method"], how="left")
    pickle = medians[medians["method"] == "pickle"][CASE + ["time_s", "point"]].rename(
        columns={"time_s": "pickle_s", "point": "pickle_point"}
    )
    medians = medians.merge(pickle, on=CASE, how="left")
    medians["speedup_vs_pickle"] = medians["pickle_s"] / medians["time_s"]
    # A difference the noise cannot explain: the launch-level 95% CI of the time ratio pickle / method (reportkit.ratio)
    # excludes 1.
    partnered = medians["pickle_point"].notna() & (medians["method"] != "pickle")
    pairs = list(zip(medians.loc[partnered, "pickle_point"], medians.loc[partnered, "point"], strict=True))
    medians["clear_vs_pickle"] = False
    if pairs:  # a campaign without pickle has no partner to compare with
        medians.loc[partnered, "clear_vs_pickle"] = [
            result is not None and (result.ci_low > 1 or result.ci_high < 1)
            for result in ratios(table, pairs, "elapsed_s")]
    medians["receiver_extra_per_payload"] = medians["rss_hwm_delta_bytes"] / medians["payload_bytes"]
    medians["method"] = pd.Categorical(medians["method"], [m for m in METHODS if m in set(medians["method"])])
    return medians.sort_values(CASE + ["method"]).reset_index(drop=True)


def _case_label(row) -> str:
    density = "" if row["kind"] == "dense" else f" d={row['density']:g}"
    pages = "" if row.get("memory_mode", "4k") == "4k" else f", {row['memory_mode']} pages"
    level = row.get("mpi_thread_level", "multiple")
    threads = "" if level == "multiple" else f", thread level {level}"
    # every factor of CASE that can vary shows, or two cases would share a label (and a table row)
    nodes = row.get("nodes", 1)
    spread = "" if _missing(nodes) or int(nodes) == 1 else f" on {int(nodes)} nodes"
    stack = row.get("stack", "default")
    on_stack = "" if _missing(stack) or stack == "default" else f", {stack}"
    env = row.get("env", "")
    tuned = "" if not env or _missing(env) else f", {env}"
    return f"{row['kind']} {row['shape']}{density} {row['dtype']}, {row['ranks']} ranks{spread}{pages}{threads}" \
        f"{on_stack}{tuned}"


def _missing(value) -> bool:
    """None or NaN: a factor the table's rows from before it existed do not have."""
    return value is None or (isinstance(value, float) and value != value)


def transfer_rows(medians) -> list[dict]:
    """Per case with both: buffer's median time, osu's (the pure transfer), their difference and ratio.

    The difference is what buffer pays beyond the transfer: the metadata broadcast, the receiver's
    object, and being one call timed from a barrier to the slowest rank rather than osu_bcast's mean
    over back-to-back calls and ranks.
    """
    rows = []
    shown = medians.assign(case=medians.apply(_case_label, axis=1), method=medians["method"].astype(str))
    for case, group in shown.groupby("case", sort=False):
        times = dict(zip(group["method"], group["time_s"], strict=True))
        if {"buffer", "osu"} <= set(times):
            osu = group[group["method"] == "osu"].iloc[0]
            rows.append({"case": case, "payload": osu["payload_bytes"], "buffer": times["buffer"], "osu": times["osu"],
                         "buffer - osu": times["buffer"] - times["osu"], "buffer / osu": times["buffer"] / times["osu"],
                         "osu bandwidth": osu["bandwidth_Bps"]})
    return rows


def _memory_cell(row) -> str:
    """MiB, and in payloads where the payload is large enough for the ratio to mean something."""
    text = f"{row['rss_hwm_delta_bytes'] / _MiB:.1f} MiB"
    if row["payload_bytes"] >= MEMORY_PLOT_MIN_BYTES:
        text += f" ({row['receiver_extra_per_payload']:.2f}x)"
    return text


def crossover_rows(medians) -> list[dict]:
    """Per sparse shape, dtype, ranks and in-place method: the lowest density from which it beats pickle.

    A speed-up marked * is clear: the launch-level 95% CI of its ratio excludes 1.
    """
    rows = []
    sparse = medians[(medians["kind"] == "sparse") & medians["pickle_s"].notna()]
    for (shape, dtype, nodes, ranks, method), group in sparse.groupby(
        ["shape", "dtype", "nodes", "ranks", "method"], observed=True, sort=True
    ):
        if method not in IN_PLACE:
            continue
        group = group.sort_values("density")
        wins = (group["speedup_vs_pickle"] > 1).tolist()
        first = next((i for i in range(len(wins)) if all(wins[i:])), None)
        verdict = (
            "loses at every density measured"
            if first is None
            else "wins at every density measured"
            if first == 0
            else f"wins from density {group['density'].iloc[first]:g}"
        )
        rows.append(
            {
                "shape": shape,
                "dtype": dtype,
                "nodes": nodes,
                "ranks": ranks,
                "method": method,
                "in place vs pickle": verdict,
                "speed-up by density": ", ".join(
                    f"{d:g}: {x:.2f}x{'*' if clear else ''}"
                    for d, x, clear in zip(
                        group["density"], group["speedup_vs_pickle"], group["clear_vs_pickle"], strict=True
                    )
                ),
            }
        )
    return rows


def plotted(medians, summary):
    """The figures' rows: each point's time and receiver memory (in payloads) as the summary has them, median and
    95% CI (`time_low`/`time_high`, `memory_low`/`memory_high`), the engine's per-point table's figures; a point the
    summary lacks keeps `method_medians`' median and has no interval."""
    data = medians.assign(method=medians["method"].astype(str))
    for measure, value, name, per in (("elapsed_s", "time_s", "time", None),
                                      ("rss_hwm_delta_bytes", "receiver_extra_per_payload", "memory", "payload_bytes")):
        part = median_of(summary, measure)
        scale = data[per] if per else 1.0
        data[f"{name}_low"] = data[f"{name}_high"] = float("nan")
        if part.empty:
            continue
        rows = part.drop_duplicates("point").set_index("point")
        median = data["point"].map(rows["median"]).astype(float) / scale
        data[value] = median.where(median.notna(), data[value])
        data[f"{name}_low"] = data["point"].map(rows["ci_low"]).astype(float) / scale
        data[f"{name}_high"] = data["point"].map(rows["ci_high"]).astype(float) / scale
    return data


def _figures(medians, summary) -> list[tuple[str, str]]:
    sns, plt = plotting()
    figures = []
    data = plotted(medians, summary)
    data["ranks_label"] = [
        f"{r} ranks" if medians["nodes"].nunique() < 2 else f"{r} ranks, {n} node{'s' if n > 1 else ''}"
        for r, n in zip(medians["ranks"], medians["nodes"], strict=True)]
    # errorbar=None throughout: seaborn's bootstrap is not the launches' interval; each point's own CI is drawn
    dense = data[data["kind"] == "dense"]
    if not dense.empty:
        # the factors that vary name the bar, so that a bar is one point and never an average of cases
        factors = varying(dense, FACTORS)
        dense = dense.assign(array=[" ".join([shape, *map(str, f)])
                                    for shape, *f in zip(dense["shape"], *(dense[k] for k in factors), strict=True)])
        order = list(dict.fromkeys(dense["array"]))
        hue_order = [m for m in METHODS if m in set(dense["method"])]
        grid = sns.catplot(
            data=dense,
            x="array",
            y="time_s",
            hue="method",
            col="ranks_label",
            kind="bar",
            height=3.6,
            aspect=1.2,
            order=order,
            hue_order=hue_order,
            errorbar=None,
        )
        grid.set(yscale="log", ylabel="median time (s)", xlabel=", ".join(["shape", *factors]))
        grid.set_titles("{col_name}")
        for label, ax in grid.axes_dict.items():
            bar_intervals(ax, dense[dense["ranks_label"] == label], "array", order, "time_s", "method", hue_order,
                          low="time_low", high="time_high")
        figures.append(("Dense arrays: median time per method (log scale; bars: 95% CI)", figure_uri(grid.figure)))
    sparse = data[data["kind"] == "sparse"]
    if not sparse.empty:
        factors = varying(sparse, FACTORS)
        style = ", ".join(factors) if factors else "method"
        if factors:
            sparse = sparse.assign(**{style: [", ".join(map(str, f))
                                              for f in zip(*(sparse[k] for k in factors), strict=True)]})
        grid = sns.relplot(
            data=sparse,
            x="density",
            y="time_s",
            hue="method",
            style=style,
            col="shape",
            row="ranks_label",
            kind="line",
            markers=True,
            height=3.6,
            aspect=1.2,
            hue_order=[m for m in METHODS if m in set(sparse["method"])],
            errorbar=None,
        )
        grid.set(xscale="log", yscale="log", ylabel="median time (s)")
        grid.set_titles("{row_name}, {col_name}")
        for (label, shape), ax in grid.axes_dict.items():
            line_intervals(ax, sparse[(sparse["ranks_label"] == label) & (sparse["shape"] == shape)], "density",
                           "time_s", list(dict.fromkeys(["method", style])), low="time_low", high="time_high")
        figures.append(("Sparse CSR: median time against density (log-log; bars: 95% CI)", figure_uri(grid.figure)))
    # Below a few MiB, page and heap granularity (~1 MiB) swamps the ratio.
    large = data[data["payload_bytes"] >= MEMORY_PLOT_MIN_BYTES]
    if not large.empty:
        large = large.assign(case=large.apply(_case_label, axis=1))
        order = list(dict.fromkeys(large["case"]))
        hue_order = [m for m in METHODS if m in set(large["method"])]
        fig, ax = plt.subplots(figsize=(9, 1.5 + 0.6 * len(order)))
        sns.barplot(
            data=large,
            y="case",
            x="receiver_extra_per_payload",
            hue="method",
            ax=ax,
            order=order,
            hue_order=hue_order,
            errorbar=None,
        )
        bar_intervals(ax, large, "case", order, "receiver_extra_per_payload", "method", hue_order,
                      low="memory_low", high="memory_high", horizontal=True)
        ax.set(xlabel="receiver peak extra RSS / payload", ylabel="")
        ax.legend(title="method", bbox_to_anchor=(1.01, 1), loc="upper left")
        figures.append(
            (
                f"Peak extra memory of a receiver, in payloads (payloads of at least "
                f"{MEMORY_PLOT_MIN_BYTES // _MiB} MiB; bars: 95% CI)",
                figure_uri(fig),
            )
        )
    return figures


class BcastReport(FamilyReport):
    """bcast's report hooks (movebench.reportkit.FamilyReport)."""

    def context(self, table, summary, campaign) -> dict:
        import pandas as pd

        medians = method_medians(table)
        if medians.empty:
            return {}
        shown = medians.assign(case=medians.apply(_case_label, axis=1))
        bounds = median_of(summary, "bandwidth_Bps")
        pct = dict(zip(bounds["point"], bounds["pct_of_bound"], strict=True)) if "pct_of_bound" in bounds else {}
        per_method = pd.DataFrame(
            {
                "case": shown["case"],
                "method": shown["method"].astype(str),
                "n": shown["n"],
                "median time": shown["time_s"],
                "cold first rep": shown["cold_s"],
                "bandwidth": shown["bandwidth_Bps"],
                "% of bound": shown["point"].map(pct).astype(float),
                "payload": shown["payload_bytes"],
                "receiver peak extra RSS": shown["rss_hwm_delta_bytes"],
                "receiver extra / payload": shown["receiver_extra_per_payload"],
                "receiver allocated in rep (tracemalloc)": shown["tracemalloc_peak_bytes"],
                "root peak extra RSS": shown["root_rss_hwm_delta_bytes"],
                "buffers reused": shown["buffers_reused"].astype(bool),
            }
        )
        per_method_units = {"median time": "s", "cold first rep": "s", "bandwidth": "B/s", "payload": "MiB",
                            "receiver peak extra RSS": "MiB", "receiver allocated in rep (tracemalloc)": "MiB",
                            "root peak extra RSS": "MiB"}
        study_rows = shown[shown["method"].astype(str).isin(STUDY)]
        speedups = study_rows.pivot_table(index="case", columns="method", values="speedup_vs_pickle", observed=True,
                                          sort=False)
        times = study_rows.pivot_table(index="case", columns="method", values="time_s", observed=True, sort=False)
        clear = study_rows.pivot(index="case", columns="method", values="clear_vs_pickle").reindex(times.index)
        study = pd.DataFrame(index=times.index)
        time_label, time_factor = units.choose("s", times.stack().dropna().tolist())
        for method in times.columns:
            study[f"{method} ({time_label})"] = times[method] / time_factor
            if method != "pickle" and "pickle" in times.columns:
                marks = clear[method].map(lambda c: "*" if c is True else "")
                study[f"{method} vs pickle"] = speedups[method].map(lambda x: "" if pd.isna(x) else f"{x:.2f}x") + marks
        memory = shown.assign(cell=shown.apply(_memory_cell, axis=1)).pivot(index="case", columns="method",
                                                                            values="cell")
        memory = memory.reindex(shown["case"].unique())
        memory.columns = [str(m) for m in memory.columns]
        transfer = pd.DataFrame(transfer_rows(medians))
        return {
            "figures": _figures(medians, summary),
            "per_method": html_table(per_method, units=per_method_units),
            "speedups": html_table(study.reset_index()) if len(study.columns) else "",
            "transfer": html_table(transfer, units={"payload": "B", "buffer": "s", "osu": "s", "buffer - osu": "s",
                                                           "osu bandwidth": "B/s"}) if len(transfer) else "",
            "memory": html_table(memory.reset_index()),
            "crossover": html_table(pd.DataFrame(crossover_rows(medians)))
            if (medians["kind"] == "sparse").any()
            else "",
        }

    def headlines(self, table, summary) -> list[tuple[str, str]]:
        """In place against pickle: the largest dense array, and the largest sparse one at each density."""
        medians = method_medians(table)
        out = []
        if medians.empty:
            return out
        for kind in ("dense", "sparse"):
            part = medians[(medians["kind"] == kind) & (medians["method"].astype(str).isin(["pickle", "buffer"]))]
            if part.empty:
                continue
            largest = part.loc[part["payload_bytes"].idxmax()]
            case = part[(part["shape"] == largest["shape"]) & (part["ranks"] == part["ranks"].min())
                        & (part["dtype"] == largest["dtype"]) & (part["nodes"] == largest["nodes"])]
            figures = []
            for density, group in case.groupby("density", dropna=False, sort=True):
                points = {str(m): pt for m, pt in zip(group["method"], group["point"], strict=True)}
                if {"pickle", "buffer"} <= set(points):
                    result = ratio(table, points["pickle"], points["buffer"], "elapsed_s")
                    if result is not None:
                        at = "" if kind == "dense" else f"density {density:g}: "
                        figures.append(f"{at}{ratio_text(result)}")
            if figures:
                out.append((f"{kind} {largest['shape']} {largest['dtype']}, {int(case['ranks'].iloc[0])} ranks: pickle "
                            f"(out of place) takes " + "; ".join(figures) + " the time of buffer (in place)", "info"))
        # buffer against the pure transfer where metadata weighs most: each kind's smallest payload with both
        both = medians[medians["method"].astype(str).isin(["buffer", "osu"])]
        for _kind, part in both.groupby("kind", sort=True):
            pairs = []
            for _, group in part.groupby(CASE, dropna=False, sort=True):
                points = dict(zip(group["method"].astype(str), group["point"], strict=True))
                if len(points) == 2:
                    pairs.append((group["payload_bytes"].iloc[0], group.iloc[0], points))
            if not pairs:
                continue
            _, row, points = min(pairs, key=lambda pair: pair[0])
            result = ratio(table, points["buffer"], points["osu"], "elapsed_s")
            if result is not None:
                out.append((f"{_case_label(row)}: buffer (metadata, object, one call from a barrier) takes "
                            f"{ratio_text(result)} the time of osu (the pure transfer, timed as osu_bcast)", "info"))
        return out

    def bound_request(self, row, meta):
        """One node: memcpy of as many processes as ranks (at most the CPUs) at the payload's size; between nodes: the
        best bidi stream."""
        import pandas as pd

        if row["nodes"] > 1:
            return {"kind": "network", "exact": {"nodes": int(row["nodes"])}}
        density = row.get("density")
        point = {"kind": row["kind"], "shape": row["shape"], "dtype": row["dtype"],
                 "density": None if density is None or pd.isna(density) else float(density)}
        return {"kind": "memcpy", "at_least": {"ranks": copiers(int(row["ranks"]), meta)},
                "nearest": {"size": FAMILY.payload(point)}}


REPORT = BcastReport()
