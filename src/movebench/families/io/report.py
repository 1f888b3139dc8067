"""io's tables and figures: the study's tables per pattern, latency and bandwidth vs size per process."""

from __future__ import annotations

from movebench.core import units
from movebench.core.sizes import format_size
from movebench.families.io import PATTERNS, MiB, object_size
from movebench.reportkit import FamilyReport, bound_line, figure_uri, html_table, median_text, plotting

BACKEND_LABELS = {"posix": "POSIX", "mpiio": "MPI-IO", "blob": "Blob", "fileshare": "File"}
BACKEND_COLORS = {"posix": "tab:green", "mpiio": "tab:orange", "blob": "tab:blue", "fileshare": "tab:purple"}


def _medians(summary):
    """(pattern, backend, nodes, ranks, size_per_proc) -> latency and bandwidth medians with their CIs."""
    keys = ["pattern", "backend", "nodes", "ranks", "size_per_proc"]
    frames = []
    for measure, name in (("elapsed_s", "latency"), ("bandwidth_Bps", "bandwidth")):
        part = summary[summary["measure"] == measure][keys + ["n", "median", "ci_low", "ci_high"]]
        frames.append(
            part.rename(columns={"median": name, "ci_low": f"{name}_low", "ci_high": f"{name}_high"})
            .set_index(keys + (["n"] if measure == "elapsed_s" else []))
            .drop(columns=[] if measure == "elapsed_s" else ["n"])
        )
    medians = frames[0].join(frames[1]).reset_index()
    bw = summary[summary["measure"] == "bandwidth_Bps"]
    if "bound_Bps" in bw:
        medians = medians.merge(bw[keys + ["bound_Bps", "pct_of_bound"]], on=keys, how="left")
    return medians


def study_table(medians, pattern):
    """One pattern's table as the study prints it: file size, size per process, then latency and bandwidth
    (MiB/s) per backend; one row per nodes x ranks x size per process."""
    import pandas as pd

    part = medians[medians["pattern"] == pattern]
    rows = []
    for (nodes, ranks, size), group in part.groupby(["nodes", "ranks", "size_per_proc"], sort=True):
        row = {
            "nodes": nodes,
            "ranks": ranks,
            "file size": format_size(object_size(pattern, size, ranks)),
            "size per process": format_size(size),
        }
        for backend in [b for b in BACKEND_LABELS if b in set(part["backend"])]:
            hit = group[group["backend"] == backend]
            label = BACKEND_LABELS[backend]
            row[f"{label} latency"] = hit["latency"].iloc[0] if len(hit) else None
            row[f"{label} bandwidth"] = hit["bandwidth"].iloc[0] if len(hit) else None
            if "pct_of_bound" in part and part.loc[part["backend"] == backend, "pct_of_bound"].notna().any():
                row[f"{label} % of fio"] = hit["pct_of_bound"].iloc[0] if len(hit) else None
        rows.append(row)
    return pd.DataFrame(rows)


def study_units(frame) -> dict:
    """Latency in the unit that suits it, bandwidth in MiB/s as the study prints it."""
    return {c: "s" if c.endswith(" latency") else "MiB/s" for c in frame.columns
            if c.endswith((" latency", " bandwidth"))}


def size_figure(medians, plt):
    """Latency (top) and bandwidth (bottom) vs size per process, one column per pattern, a line per backend."""
    from matplotlib.ticker import FuncFormatter

    patterns = [p for p in PATTERNS if p in set(medians["pattern"])]
    fig, axes = plt.subplots(2, len(patterns), figsize=(4.6 * len(patterns), 7.2), squeeze=False, sharex=True)
    for col, pattern in enumerate(patterns):
        part = medians[medians["pattern"] == pattern]
        for (backend, ranks, nodes), line in part.groupby(["backend", "ranks", "nodes"], sort=True):
            line = line.sort_values("size_per_proc")
            x = line["size_per_proc"] / MiB
            label = f"{BACKEND_LABELS.get(backend, backend)} ({ranks} ranks" + (
                f", {nodes} nodes)" if nodes > 1 else ")"
            )
            for row, (name, scale) in enumerate((("latency", 1.0), ("bandwidth", 1.0 / MiB))):
                y = line[name] * scale
                err = [(line[name] - line[f"{name}_low"]) * scale, (line[f"{name}_high"] - line[name]) * scale]
                style = "-" if ranks == min(part["ranks"]) else "--"
                axes[row][col].errorbar(
                    x,
                    y,
                    yerr=err,
                    marker="o",
                    capsize=3,
                    label=label,
                    linestyle=style,
                    color=BACKEND_COLORS.get(backend),
                )
        posix = part[part["backend"] == "posix"]
        if "bound_Bps" in posix and posix["bound_Bps"].notna().any():
            bound_line(axes[1][col], posix.assign(x=posix["size_per_proc"] / MiB), "x", scale=MiB,
                              label="fio (posix's upper bound)")
        axes[0][col].set_title(pattern)
        axes[1][col].set_xlabel("size per process")
        for row in range(2):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_yscale("log")
            axes[row][col].xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(round(v * MiB)))))
    axes[0][0].set_ylabel("latency (s)")
    axes[1][0].set_ylabel("bandwidth (MiB/s)")
    axes[0][-1].legend(fontsize="small")
    fig.tight_layout()
    return fig


class IoReport(FamilyReport):
    """io's report hooks (movebench.reportkit.FamilyReport)."""

    def context(self, table, summary, campaign):
        _, plt = plotting()
        medians = _medians(summary)
        measured = table[~table["warmup"].astype(bool)]
        retried = measured[measured.get("retries", 0) > 0] if "retries" in measured else measured.iloc[0:0]
        retries = None
        if len(retried):
            retries = html_table(
                retried.groupby(["pattern", "backend", "ranks", "size_per_proc"], as_index=False).agg(
                    repetitions=("rep", "size"), retries=("retries", "sum"), retries_write=("retries_write", "sum")
                )
            )
        backends = [b for b in BACKEND_LABELS if b in set(medians["backend"])]
        return {
            "tables": [
                (p, html_table(table_, units=study_units(table_)))
                for p in PATTERNS
                if p in set(medians["pattern"])
                for table_ in [study_table(medians, p)]
            ],
            "figure": figure_uri(size_figure(medians, plt)),
            "backends": [BACKEND_LABELS[b] for b in backends],
            "emulated_blob": "blob" in backends,
            "retries": retries,
        }

    def headlines(self, table, summary) -> list[tuple[str, str]]:
        """Per backend, its best median bandwidth, with the share of fio's for posix."""
        medians = _medians(summary)
        out = []
        for backend in [b for b in BACKEND_LABELS if b in set(medians["backend"])]:
            part = medians[medians["backend"] == backend]
            best = part.loc[part["bandwidth"].idxmax()]
            row = {"median": best["bandwidth"], "ci_low": best["bandwidth_low"], "ci_high": best["bandwidth_high"]}
            bound = ""
            if "pct_of_bound" in best and best["pct_of_bound"] == best["pct_of_bound"]:
                bound = f", {units.sig(best['pct_of_bound'])}% of fio's"
            emulated = " (on Azurite, the emulator: not Azure's figure)" if backend == "blob" else ""
            out.append((f"{BACKEND_LABELS[backend]} best {median_text(row, 'MiB/s')} ({best['pattern']}, "
                        f"{format_size(int(best['size_per_proc']))} per process, {int(best['ranks'])} ranks){bound}"
                        f"{emulated}", "info"))
        return out

    def bound_request(self, row, meta):
        """posix on one node: fio writing the same pattern with as many jobs as ranks, in the same folder, at the
        nearest size. Other backends have no bound measured here (a storage service's limit is not ours to probe)."""
        if row["backend"] != "posix" or row["nodes"] > 1:
            return None
        return {"kind": "fio", "exact": {"pattern": row["pattern"], "ranks": int(row["ranks"]),
                                         "path": meta.get("settings.path")},
                "nearest": {"size_per_proc": int(row["size_per_proc"])}}


REPORT = IoReport()
