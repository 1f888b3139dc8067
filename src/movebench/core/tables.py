"""What every reader of records agrees on: which repetitions count."""

from __future__ import annotations

#: A point keeps its disturbed launches (measured beside outside load, `disturbed` in their meta and records)
#: unless this many of its launches were quiet: then those alone are its statistics.
MIN_QUIET_LAUNCHES = 2
#: The records' column naming the job a launch ran in when it was a launch group's (the group's name and the
#: job's start, from the meta): points whose launches share it were measured in the same launches, one after
#: another, and their launch effects are paired (reportkit.ratio). Empty for a point launched on its own and in
#: tables written before the column existed.
LAUNCH_JOB = "launch_job"


def counted(table):
    """The measured repetitions: warm-ups and failed repetitions left out.

    `table`: a records DataFrame (aggregate's tables, compare's records), returned filtered (an empty one as it
    is), or a list of records (a kernel's `.jsonl`, as the bench scripts read it), returned as a list.
    """
    if isinstance(table, list):
        return [r for r in table if not r["warmup"] and r.get("ok", True)]
    if table.empty:
        return table
    table = table[~table["warmup"].astype(bool) & table["ok"].astype(bool)]
    return quiet(table)


def quiet(table):
    """`table` less the disturbed launches of every point that has MIN_QUIET_LAUNCHES quiet ones."""
    if table.empty or "disturbed" not in table.columns or "launch" not in table.columns:
        return table
    disturbed = table["disturbed"].fillna(False).astype(bool)
    if not disturbed.any():
        return table
    keys = ["family", "point"] if "family" in table.columns else ["point"]
    quiet_launches = table[~disturbed].groupby(keys)["launch"].nunique()
    enough = table.set_index(keys).index.map(lambda key: quiet_launches.get(key, 0) >= MIN_QUIET_LAUNCHES)
    return table[~(disturbed & enough.to_numpy(dtype=bool))]


def disturbed_launches(table) -> dict[tuple, dict]:
    """(family, point, launch) -> {other_cpus, left_out} of each launch in a records DataFrame whose meta says it
    stayed disturbed (`left_out`: `quiet` takes it out of the statistics). Records without a `family` column (one
    family's table) are keyed (None, point, launch)."""
    if table.empty or "disturbed" not in table.columns:
        return {}
    measured = table[~table["warmup"].astype(bool) & table["ok"].astype(bool)]
    if "family" not in measured.columns:
        measured = measured.assign(family=None)
    launch = measured["launch"].fillna(0).astype(int) if "launch" in measured.columns else 0
    measured = measured.assign(launch=launch)
    hit = measured[measured["disturbed"].fillna(False).astype(bool)]
    if hit.empty:
        return {}
    kept = quiet(measured)
    kept_keys = set(zip(kept["family"], kept["point"], kept["launch"], strict=True))
    out = {}
    for (family, point, k), rows in hit.groupby(["family", "point", "launch"], sort=True, dropna=False):
        other = rows["other_cpus"].dropna() if "other_cpus" in rows else []
        out[(family, point, int(k))] = {"other_cpus": float(other.max()) if len(other) else None,
                                        "left_out": (family, point, k) not in kept_keys}
    return out
