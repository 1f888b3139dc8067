"""A finished campaign's results folder as one run of the history: its launch-level estimates and fingerprint.

It reads what the report reads (the tables `aggregate` wrote and `campaign_run.json`), never the raw records.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from movebench.core import stats
from movebench.core.layout import ResultsLayout
from movebench.judging.compare import WORK_KEYS

#: fingerprint field -> the points table's column(s) it comes from, first present wins: what ran, so that a change
#: point can name what changed with it
FINGERPRINT = {
    "commit": ("git_commit",),
    "config_hash": ("config_hash",),
    "mpi_library": ("fingerprint.mpi_library", "mpi_vendor"),
    "mpi_library_version": ("fingerprint.mpi_library_version",),
    "stack": ("stack.name", "stack"),
    "transport": ("transport.netmod",),
    "transport_lanes": ("transport.ucx",),
    "hosts": ("fingerprint.hosts", "hostnames"),
    "cpu_model": ("fingerprint.cpu_model", "cpu_model"),
    "kernel": ("platform",),
    "python": ("python",),
}
#: the fingerprint field of a point's work (point_work): what separates series of a time measure
WORK = "work"
#: the points table's package versions, gathered into one fingerprint field
PACKAGES_PREFIX = "packages."


class RunError(Exception):
    """A folder that is not a finished campaign's results."""


@dataclass
class Run:
    run_id: str
    campaign: str
    started: float
    ended: float
    wall_s: float
    ok: bool
    results: str
    fingerprint: dict
    estimates: pd.DataFrame


def _clean(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def point_fingerprint(row: pd.Series) -> dict:
    out = {}
    for field, columns in FINGERPRINT.items():
        for column in columns:
            if column in row.index and _clean(row[column]) not in (None, ""):
                out[field] = str(_clean(row[column]))
                break
    packages = {k.removeprefix(PACKAGES_PREFIX): str(_clean(v)) for k, v in row.items()
                if k.startswith(PACKAGES_PREFIX) and _clean(v) is not None}
    if packages:
        out["packages"] = json.dumps(packages, sort_keys=True)
    return out


def point_work(records: pd.DataFrame) -> dict[str, str]:
    """point -> how much work its repetitions did (compare.WORK_KEYS' values, e.g. "iterations=120"): a time of
    other work is not the same series (shuffle's `iterations: auto` sets a loop count per run)."""
    keys = [k for k in WORK_KEYS if k in records.columns]
    if not keys or "point" not in records.columns:
        return {}
    out = {}
    for point, group in records.groupby("point", sort=False):
        said = [f"{k}={','.join(str(_clean(v)) for v in sorted(group[k].dropna().unique()))}" for k in keys
                if group[k].notna().any()]
        if said:
            out[point] = " ".join(said)
    return out


def standard_error(row) -> tuple[float | None, float | None]:
    """(on the log scale, on the value's own scale) of a summary row's estimate, from its 95% interval: the
    t-interval of its launches (df = L - 1) when it has several, else the repetitions' interval read as normal."""
    low, high, ci_level, launches = row.get("ci_low"), row.get("ci_high"), row.get("ci_level"), row.get("launches")
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None, None
    q = (stats.t_quantile(0.975, int(launches) - 1) if ci_level == "launches" and launches and launches >= 2
         else 1.959963984540054)
    raw = (float(high) - float(low)) / (2 * q)
    log = (math.log(high) - math.log(low)) / (2 * q) if low > 0 and high > 0 else None
    return log, raw


def read(results) -> Run:
    """The run a results folder holds. Raises RunError naming what is missing."""
    folder = Path(results)
    layout = ResultsLayout(folder)
    run_file = layout.run_record
    if not run_file.is_file():
        raise RunError(f"{folder}: no campaign_run.json (written when a campaign ends): name the results_dir of a "
                       "finished campaign")
    raw = run_file.read_bytes()
    try:
        info = json.loads(raw)
    except ValueError as exc:
        raise RunError(f"{run_file}: not JSON ({exc})") from None
    summaries = {family: layout.table(family, "summary") for family in layout.tabled()}
    summaries = {family: path for family, path in summaries.items() if path.exists()}
    if not summaries:
        raise RunError(f"{folder}: no tables/<family>_summary.csv: the campaign made no tables")
    frames, fingerprints, campaigns = [], {}, []
    for family, path in summaries.items():
        summary = pd.read_csv(path)
        points_file = layout.table(family, "points")
        points = pd.read_csv(points_file) if points_file.exists() else pd.DataFrame(columns=["point"])
        if "campaign" in points.columns:
            campaigns += [c for c in points["campaign"].dropna().astype(str)]
        prints = {row["point"]: point_fingerprint(row) for _, row in points.iterrows()}
        records_file = layout.table(family)
        if records_file.exists():
            for point, work in point_work(pd.read_parquet(records_file)).items():
                prints.setdefault(point, {})[WORK] = work
        fingerprints.update({(family, p): f for p, f in prints.items()})
        if summary.empty:
            continue
        rows = []
        for _, row in summary.iterrows():
            se_log, se = standard_error(row)
            rows.append({
                "family": family, "point": row["point"], "measure": row["measure"], "unit": row.get("unit"),
                "better": row.get("better"), "estimate": _clean(row.get("median")), "ci_low": _clean(row.get("ci_low")),
                "ci_high": _clean(row.get("ci_high")), "ci_level": _clean(row.get("ci_level")), "se_log": se_log,
                "se": se, "launches": _clean(row.get("launches")), "n": _clean(row.get("n")),
                "between_share": _clean(row.get("between_share")),
                "sd_between_log": _clean(row.get("sd_between_log")), "sd_within_log": _clean(row.get("sd_within_log")),
                "rerun_low": _clean(row.get("rerun_low")), "rerun_high": _clean(row.get("rerun_high")),
                "fingerprint": json.dumps(prints.get(row["point"], {}), sort_keys=True),
            })
        frames.append(pd.DataFrame(rows))
    estimates = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    common = _common([f for f in fingerprints.values()])
    campaign = max(set(campaigns), key=campaigns.count) if campaigns else folder.resolve().name
    # The run is the campaign_run.json its end wrote: the same folder added twice, or copied elsewhere, is one run.
    run_id = hashlib.sha256(raw).hexdigest()[:16]
    return Run(run_id=run_id, campaign=campaign, started=float(info.get("start", 0.0)),
               ended=float(info.get("end", 0.0)), wall_s=float(info.get("wall_s", 0.0)), ok=bool(info.get("ok", True)),
               results=str(folder.resolve()), fingerprint=common, estimates=estimates)


def _common(prints: list[dict]) -> dict:
    """The fields every point agrees on (the run's fingerprint); fields that differ between points are the points'."""
    if not prints:
        return {}
    keys = set().union(*prints)
    return {k: prints[0][k] for k in sorted(keys) if all(p.get(k) == prints[0].get(k) for p in prints)}
