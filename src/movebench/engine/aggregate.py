"""Records -> tables: every record of a family, a summary per point and measure, and one row per point.

Warm-ups stay in the records table (flagged) and out of the summary. Each row names its `point`
(the parameter path) and `source` (the raw file it came from), so every number in the report leads
back to its records. The points table has one row per point of the grid: its status (ok, failed,
missing), its failure (error, log tail) and its meta flattened (hosts, MPI library and thread
level, package versions, commit, config hash, fingerprint), so that the report reads tables only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from movebench import families
from movebench.core import records, stats, verdict
from movebench.core.layout import ResultsLayout
from movebench.core.tables import LAUNCH_JOB, counted, disturbed_launches
from movebench.core.task import LAUNCH, launch_path, point_path_of

#: Why a point stopped measuring (core.adaptive): the same in every record of a point, kept per point in the summary.
STOP_COLUMNS = ("stop_reason", "ci_half_width_rel", "repetitions_run")
#: Meta entries that are per-client or per-manager detail: left in the raw meta, not flattened.
BULKY_META = ("environment", "task", "point")


def point_of(record: dict, path: Path, family: str, raw: Path | None = None) -> str:
    """The point a records file measured, named from the parameters its record carries, wherever the results
    folder is; for a record that lacks one (not a movebench record), from the file's place under `raw`."""
    fam = families.load(family)
    point = fam.point_of_record(record)
    if point is not None:
        return fam.path(point)
    if raw is None:
        raise ValueError(f"{path}: its records do not say which {family} point they measured (axes "
                         f"{', '.join(fam.point_keys)})")
    return point_path_of(ResultsLayout(Path(raw).parent).launch_of(Path(path))[1])


def load(family: str, paths, raw: Path | None = None) -> pd.DataFrame:
    """The records of `paths` (files under `raw`, a results folder's raw/) as one table."""
    frames = []
    for path in paths:
        recs = records.read_jsonl(path)
        if recs:
            frame = pd.DataFrame.from_records(recs)
            frame["point"] = point_of(recs[0], Path(path), family, raw)
            frame["source"] = str(path)
            meta = launch_meta(Path(path))
            frame["disturbed"], frame["other_cpus"], frame["disturbed_retries"] = launch_load(meta)
            frame[LAUNCH_JOB] = launch_job(meta)
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["family", "variant", "point", "rep", "warmup", "ok", "bandwidth_Bps",
                                     "elapsed_s"])
    table = pd.concat(frames, ignore_index=True)
    table["warmup"] = table["warmup"].astype(bool)
    table["ok"] = table["ok"].astype(bool)
    return tidy(family, table)


def launch_meta(path: Path) -> dict:
    """The meta beside a records file; {} when it is missing or unreadable."""
    try:
        return json.loads(ResultsLayout.meta_of(path).read_text())
    except (OSError, ValueError):
        return {}


def launch_load(info: dict) -> tuple[bool, float | None, int]:
    """(whether the launch of a records file was disturbed, the CPUs other processes kept busy meanwhile, the
    disturbed attempts measured again before it), from its meta; (False, None, 0) for a meta from before launches
    measured their load."""
    return (bool(info.get("disturbed")), (info.get("host_load") or {}).get("other_cpus"),
            len(info.get("disturbed_attempts") or []))


def launch_job(info: dict) -> str | None:
    """The job a launch group's launch ran in, from a member's meta: its group's name and the job's start, which
    the members measured in one job share (a member measured again on its own, after a failure or a disturbed
    attempt, has a start of its own); None for a point launched on its own."""
    group = info.get("launch_group")
    if not group:
        return None
    return f"{group['name']}@{info.get('launch_start')!r}"


def tidy(family: str, table: pd.DataFrame) -> pd.DataFrame:
    """Records as tables and reports read them: every axis present, and the family's derived columns."""
    # Records written before their family gained an axis ran at the axis's implicit default (their path says so);
    # records written before launches existed are each point's one launch, launch 0.
    for key, value in {**families.load(family).implicit, LAUNCH: 0}.items():
        table[key] = table[key].fillna(value) if key in table else value
    table[LAUNCH] = table[LAUNCH].astype(int)
    return families.report(family).derive(table)


def summarize(family: str, table: pd.DataFrame) -> pd.DataFrame:
    """One row per point and measure: its launches, n, median, mean, std, min, max, p5, p95, its 95% CI, the
    between-launch share of the spread (core.stats.launch_summary: over launches when there are several, over
    repetitions for one launch), and why the point stopped measuring (STOP_COLUMNS, of its first launch;
    ci_half_width_rel is that of elapsed_s, the value the rule watched)."""
    fam = families.load(family)
    measures = [m.name for m in fam.measures if m.summarize and m.name in table.columns]
    rows = []
    launch_values = {}  # row index -> the point's values per launch, for the detectable change
    disturbed: dict[str, list[bool]] = {}  # point -> whether each of its disturbed launches was left out
    for (_, point, _), info in disturbed_launches(table).items():
        disturbed.setdefault(point, []).append(info["left_out"])
    for point, group in counted(table).groupby("point", sort=True):
        first = group.iloc[0]
        ident = {"family": family, "variant": first["variant"], "point": point}
        if point in disturbed:
            ident.update(launches_disturbed=len(disturbed[point]), launches_left_out=sum(disturbed[point]))
        ident.update({k: first[k] for k in fam.point_keys if k in group.columns})
        ident.update({k: first[k] for k in STOP_COLUMNS if k in group.columns})
        for measure in measures:
            values = pd.to_numeric(group[measure], errors="coerce")
            per_launch = [v.dropna().tolist() for _, v in values.groupby(group[LAUNCH], sort=True)]
            per_launch = [v for v in per_launch if v]
            if not per_launch:
                continue
            unit = fam.measure[measure]
            launch_values[len(rows)] = per_launch
            rows.append({**ident, "measure": measure, "unit": unit.unit, "better": unit.better,
                         **stats.launch_summary(per_launch)})
    return pd.DataFrame(_with_detectable_change(rows, launch_values))


def _with_detectable_change(rows: list[dict], launch_values: dict) -> list[dict]:
    """Each row's `mdc`: the change a comparison of the point with a rerun of as many launches finds 80% of the
    time at the verdicts' level, its variance moderated toward its family-measure's prior, as compare does
    (core.verdict); None for a point of one launch."""
    by_measure: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_measure.setdefault(row["measure"], []).append(i)
    for indices in by_measure.values():
        prior = verdict.launch_variance_prior([(launch_values[i],) for i in indices])
        for i in indices:
            values = launch_values[i]
            rows[i]["mdc"] = verdict.compare_launches(values, values, prior=prior).mdc if len(values) >= 2 else None
    return rows


def flatten_meta(meta: dict, bulky=()) -> dict:
    """One level of a point's meta: nested dicts as `a.b`, lists as JSON text, bulky detail (the engine's and the
    family's `bulky`) left out."""
    flat = {}
    for key, value in meta.items():
        if key in BULKY_META or key in bulky:
            continue
        if isinstance(value, dict):
            for sub, inner in value.items():
                flat[f"{key}.{sub}"] = json.dumps(inner) if isinstance(inner, (list, dict)) else inner
        elif isinstance(value, list):
            flat[key] = json.dumps(value)
        else:
            flat[key] = value
    return flat


def points_table(family: str, points: list[dict], layout: ResultsLayout, launches: int = 1) -> pd.DataFrame:
    """One row per point of the grid: status (ok when every planned launch has records, failed when one failed,
    else missing), failure, records file and the flattened meta of its first launch; with several launches,
    how many are done."""
    fam = families.load(family)
    rows = []
    for point in points:
        path = families.point_path(point)
        row = {"family": family, "variant": point[fam.variant], "point": path, **point, "status": "missing",
               "records": layout.named(layout.records(family, path))}
        launch_paths = [launch_path(path, k) for k in range(launches)]
        done = [p for p in launch_paths if layout.records(family, p).exists()]
        failures = [layout.failure(family, p) for p in launch_paths if layout.failure(family, p).exists()]
        meta_file = layout.meta(family, path)
        if meta_file.exists():
            row.update(flatten_meta(json.loads(meta_file.read_text()), fam.bulky_meta))
        if len(done) == launches:
            row["status"] = "ok"
        elif failures:
            failure = json.loads(failures[0].read_text())
            row.update(status="failed", error=failure.get("error"), returncode=failure.get("returncode"),
                       log_tail="\n".join(failure.get("log_tail") or []), failure_file=str(failures[0]))
        if launches > 1:
            row["launches_done"] = len(done)
        rows.append(row)
    return pd.DataFrame(rows)


def write_tables(family: str, paths, output, grid_points: list[dict], results, launches: int = 1) -> None:
    """The family's tables from the records `paths` of the results folder `results`."""
    layout = ResultsLayout(results)
    table = load(family, paths, layout.raw)
    summary = summarize(family, table)
    points = points_table(family, grid_points, layout, launches)
    for path in (output.records, output.parquet, output.summary, output.points):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    _atomic(output.records, lambda p: table.to_csv(p, index=False))
    _atomic(output.parquet, lambda p: table.to_parquet(p, index=False))
    _atomic(output.summary, lambda p: summary.to_csv(p, index=False))
    _atomic(output.points, lambda p: points.to_csv(p, index=False))
    print(f"{family}: {len(table)} records, {summary['point'].nunique() if len(summary) else 0} points summarised, "
          f"{len(points)} in the grid ({(points['status'] == 'ok').sum() if len(points) else 0} ok)")


def _atomic(path, write) -> None:
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half table behind
        raise
