"""Records -> tables: every record of a family, and a summary per point.

Warm-ups stay in the records table (flagged) and out of the summary. Each row
names its `point` (the parameter path) and `source` (the raw file it came from),
so every number in the report leads back to its records and the run's meta.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from movebench import family as families
from movebench.core import records, stats

SUMMARY_MEASURES = ("bandwidth_Bps", "elapsed_s")


def point_of(path: Path, family: str) -> str:
    """The point path of a raw records file .../raw/<family>/<point>.jsonl."""
    parts = Path(path).with_suffix("").parts
    return "/".join(parts[parts.index(family) + 1:]) if family in parts else Path(path).stem


def load(family: str, paths) -> pd.DataFrame:
    frames = []
    for path in paths:
        recs = records.read_jsonl(path)
        if recs:
            frame = pd.DataFrame.from_records(recs)
            frame["point"] = point_of(Path(path), family)
            frame["source"] = str(path)
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["family", "variant", "point", "rep", "warmup", "ok", *SUMMARY_MEASURES])
    table = pd.concat(frames, ignore_index=True)
    table["warmup"] = table["warmup"].astype(bool)
    table["ok"] = table["ok"].astype(bool)
    return families.load(family).derive(table)


def summarize(family: str, table: pd.DataFrame) -> pd.DataFrame:
    """One row per point and measure: n, median, mean, std, min, max, p5, p95, 95% CI of the median."""
    fam = families.load(family)
    measures = [m for m in (*SUMMARY_MEASURES, *fam.summary_measures) if m in table.columns]
    counted = table[~table["warmup"] & table["ok"]]
    rows = []
    for point, group in counted.groupby("point", sort=True):
        first = group.iloc[0]
        ident = {"family": family, "variant": first["variant"], "point": point}
        ident.update({k: first[k] for k in fam.point_keys if k in group.columns})
        for measure in measures:
            values = pd.to_numeric(group[measure], errors="coerce").dropna()
            if values.empty:
                continue
            rows.append({**ident, "measure": measure, **stats.summarize(values.tolist())})
    return pd.DataFrame(rows)


def write_tables(family: str, paths, output) -> None:
    table = load(family, paths)
    summary = summarize(family, table)
    for path in (output.records, output.parquet, output.summary):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    _atomic(output.records, lambda p: table.to_csv(p, index=False))
    _atomic(output.parquet, lambda p: table.to_parquet(p, index=False))
    _atomic(output.summary, lambda p: summary.to_csv(p, index=False))
    print(f"{family}: {len(table)} records, {summary['point'].nunique() if len(summary) else 0} points")


def _atomic(path, write) -> None:
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    write(tmp)
    tmp.replace(path)
