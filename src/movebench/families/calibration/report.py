"""calibration's tables and figures, and the bounds it provides to the other families' bandwidths."""

from __future__ import annotations

from movebench.core import units
from movebench.core.sizes import format_size
from movebench.reportkit import (
    SIZE,
    FamilyReport,
    figure_uri,
    html_table,
    line_intervals,
    median_of,
    median_text,
    plotting,
)


def skipped(table) -> list[dict]:
    """Probes that could not run here (fio not installed), with the reason their records give."""
    if "measured" not in table or not len(table):
        return []
    not_run = table[table["measured"].eq(False)]
    return [{"point": point, "why": group["skipped"].dropna().iloc[0] if group["skipped"].notna().any() else ""}
            for point, group in not_run.groupby("point", sort=True)]


class CalibrationReport(FamilyReport):
    """calibration's report hooks (movebench.reportkit.FamilyReport)."""

    def context(self, table, summary, campaign):
        sns, plt = plotting()
        ctx = {"figures": [], "memcpy": None, "fio": None, "skipped": skipped(table)}
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return ctx
        memcpy = bw[bw["probe"] == "memcpy"]
        if len(memcpy):
            data = memcpy.assign(**{"GB/s": memcpy["median"] / 1e9, "processes": memcpy["ranks"].astype(int)})
            fig, ax = plt.subplots(figsize=(7, 3.6))
            # errorbar=None: the interval drawn is the table's (the launches'), not seaborn's bootstrap
            sns.lineplot(data=data, x="size", y="GB/s", hue="processes", marker="o", ax=ax, palette="crest",
                         errorbar=None)
            line_intervals(ax, data, "size", "GB/s", ["processes"], 1e9)
            ax.set(xscale="log", xlabel="bytes per copy", ylabel="aggregate copy bandwidth (GB/s, median)")
            ctx["figures"].append(("memcpy: aggregate copy bandwidth of concurrent processes (the intra-node bound; "
                                   "bars: 95% CI)", figure_uri(fig)))
            ctx["memcpy"] = html_table(
                memcpy[["ranks", "size", "n", "median", "ci_low", "ci_high"]].rename(columns={
                    "ranks": "processes", "size": "bytes per copy", "median": "bandwidth", "ci_low": "CI low",
                    "ci_high": "CI high"}),
                units={**dict.fromkeys(("bandwidth", "CI low", "CI high"), units.choose("B/s", memcpy["median"])[0]),
                       "bytes per copy": SIZE})
        fio = bw[bw["probe"] == "fio"]
        if len(fio):
            ctx["fio"] = html_table(
                fio[["pattern", "ranks", "size_per_proc", "n", "median", "ci_low", "ci_high"]].rename(columns={
                    "ranks": "jobs", "size_per_proc": "size per job", "median": "bandwidth", "ci_low": "CI low",
                    "ci_high": "CI high"}),
                units={**dict.fromkeys(("bandwidth", "CI low", "CI high"), "MiB/s"), "size per job": SIZE})
        return ctx

    def headlines(self, table, summary) -> list[tuple[str, str]]:
        """The largest memcpy figure (the bound most bandwidths meet), fio's per pattern, and probes that could not
        run."""
        out = [(f"{s['point']} not measured: {s['why']}", "warn") for s in skipped(table)]
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return out
        memcpy = bw[bw["probe"] == "memcpy"]
        if len(memcpy):
            top = memcpy[memcpy["ranks"] == memcpy["ranks"].max()]
            row = top.loc[top["size"].idxmax()]
            out.append((f"memcpy: {int(row['ranks'])} processes copy {median_text(row, 'B/s')} at "
                        f"{format_size(int(row['size']))}", "info"))
        fio = bw[bw["probe"] == "fio"]
        for pattern, part in (fio.groupby("pattern", sort=True) if len(fio) else ()):
            row = part.loc[part["size_per_proc"].idxmax()]
            out.append((f"fio {pattern}: {int(row['ranks'])} jobs write {median_text(row, 'MiB/s')} at "
                        f"{format_size(int(row['size_per_proc']))} per job", "info"))
        return out

    def provide_bounds(self, summary, points) -> list[dict]:
        """memcpy: (ranks, size) -> the aggregate copy bandwidth; fio: (pattern, ranks, size, path) -> write
        bandwidth."""
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return []
        paths = {}
        if len(points) and "settings.fio_path" in points:
            paths = dict(zip(points["point"], points["settings.fio_path"], strict=True))
        rows = []
        for r in bw.itertuples():
            if r.probe == "memcpy":
                rows.append({"kind": "memcpy", "ranks": int(r.ranks), "size": int(r.size), "bound_Bps": r.median,
                             "bound_ci_high_Bps": getattr(r, "ci_high", None),
                             "label": f"memcpy, {int(r.ranks)} process{'es' if r.ranks > 1 else ''} at "
                                      f"{format_size(int(r.size))}", "source": f"calibration/{r.point}"})
            elif r.probe == "fio":
                rows.append({"kind": "fio", "pattern": r.pattern, "ranks": int(r.ranks),
                             "size_per_proc": int(r.size_per_proc), "path": paths.get(r.point), "bound_Bps": r.median,
                             "bound_ci_high_Bps": getattr(r, "ci_high", None),
                             "label": f"fio {r.pattern}, {int(r.ranks)} jobs at {format_size(int(r.size_per_proc))}",
                             "source": f"calibration/{r.point}"})
        return rows


REPORT = CalibrationReport()
