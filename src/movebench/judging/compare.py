"""Two campaigns side by side: per point and measure, the ratio NEW/BASE, its CI, a p-value and a verdict.

Points are matched by family and point path (the path names the variant and every swept
parameter). Each (point, measure) gets one row: both medians, the ratio with its 95% CI and the
p-value (`movebench.core.verdict`: a t-test on the log launch medians where both sides have 2 launches or more, the
Mann-Whitney test on the repetitions of a one-launch row), the verdict, and the environment fingerprint keys
that differ between the two runs of the point. A point measured on one side only keeps its rows
(verdict "only in base" / "only in new"); a point whose MPI implementation or CPU model differs
is "not comparable" unless the caller allows it. `compare` returns that table; `render_html`
turns it into compare.html; `summary_lines` into the few lines the CLI prints.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from movebench.core import envinfo, resources
from movebench.core.layout import ResultsLayout
from movebench.core.tables import counted, disturbed_launches
from movebench.core.verdict import (
    ALPHA,
    DEFAULT_THRESHOLD,
    MIN_REPETITIONS,
    compare_launches,
    compare_samples,
    launch_variance_prior,
    run_level_variance,
    verdict,
)
from movebench.core.verdict import direction as direction_by_name

ONLY_BASE, ONLY_NEW, NOT_COMPARABLE = "only in base", "only in new", "not comparable"
#: Every value `verdict` takes in a comparison table, worst first (the order of the HTML page).
VERDICT_ORDER = ("regressed", NOT_COMPARABLE, ONLY_BASE, ONLY_NEW, "inconclusive", "improved", "unchanged")
#: Fingerprint keys that make two runs different experiments rather than two runs of one.
INCOMPARABLE_KEYS = ("mpi_library", "cpu_model", "launch_grouped")
COLUMNS = ("family", "variant", "point", "measure", "better", "threshold", "n_base", "n_new", "median_base",
           "median_new", "ratio", "ci_low", "ci_high", "p_value", "launches_base", "launches_new", "unit", "mdc",
           "mdc_double", "limit", "verdict", "comparable", "differs", "differs_detail", "note", "point_new")
#: What a one-launch row's interval is worth (its `unit` is "repetitions").
ONE_LAUNCH = "one launch: the interval is within one launch; a relaunch moves figures more"
#: Record fields that say how much work a repetition did: a time of different work is not comparable
#: (shuffle's `iterations: auto` calibrates a loop count per run; its bandwidth stays comparable).
WORK_KEYS = ("iterations", "bytes")
#: CPUs other processes may keep busy during a run before compare warns that it measured a busy host.
BUSY_OTHER_CPUS = 0.25
#: Fewer launches a side than this: a row's resolution is limited by its launches rather than their spread.
FEW_LAUNCHES = 3


def direction(family: str | None, measure: str) -> str | None:
    """Which way is better for a family's measure: as its spec declares it, else by the measure's name."""
    declared = None
    if family:
        from movebench import families

        try:
            declared = getattr(families.load(family).measure.get(measure), "better", None)
        except (ImportError, AttributeError):
            declared = None
    return direction_by_name(measure, declared)


class ResultsError(Exception):
    """A results folder that cannot be read: one line naming the folder and what is missing."""


@dataclass
class Results:
    """One campaign's records (every repetition, warm-ups and failures flagged) and each point's meta."""

    path: Path
    records: pd.DataFrame
    metas: dict[tuple[str, str], dict] = field(default_factory=dict)
    failed: set[tuple[str, str]] = field(default_factory=set)
    run: dict = field(default_factory=dict)  # campaign_run.json of `python -m movebench run`, when present


def read_results(path) -> Results:
    """Records from each family's table (its raw records where a table is missing), each point's meta, the
    failed points (core.layout says where each lives)."""
    path = Path(path)
    layout = ResultsLayout(path)
    if not layout.tables.is_dir() and not layout.raw.is_dir():
        raise ResultsError(f"{path}: not a movebench results folder (no {layout.tables.name}/ or "
                           f"{layout.raw.name}/ in it)")
    frames = []
    for name in layout.families():
        parquet = layout.table(name)
        if parquet.exists():
            frame = pd.read_parquet(parquet)
        else:
            from movebench.engine import aggregate

            frame = aggregate.load(name, sorted((layout.raw / name).rglob("*.jsonl")), layout.raw)
        if len(frame):
            frame = frame.assign(family=name)
            frames.append(frame)
    records = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["family", "variant", "point", "rep", "warmup", "ok"])
    metas = {}
    for family, point in records[["family", "point"]].drop_duplicates().itertuples(index=False):
        meta_path = layout.meta(family, point)
        if meta_path.exists():
            metas[(family, point)] = json.loads(meta_path.read_text())
    failed = set()
    for fail in layout.failed.rglob("*.json"):
        failed.add(layout.launch_of(fail))
    run_file = layout.run_record
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    return Results(path, records, metas, failed, run)


def table_files(path) -> list[Path]:
    """What `read_tables` reads in a results folder: every family's records and points tables, and the run's
    record (campaign_run.json) where there is one. The report declares them as its inputs."""
    layout = ResultsLayout(path)
    files = []
    for family in layout.tabled():
        files.append(layout.table(family))
        points = layout.table(family, "points")
        if points.exists():
            files.append(points)
    run = layout.run_record
    return files + ([run] if run.exists() else [])


def read_tables(path) -> Results:
    """A results folder from its tables alone (records, and each point's status and meta from the points table),
    as the report reads one: no raw file, so that what the report read is what its rule declared."""
    path = Path(path)
    records, points = {}, {}
    for file in table_files(path):
        if file.suffix == ".parquet":
            records[file.stem] = pd.read_parquet(file)
        elif file.name.endswith("_points.csv"):
            points[file.name.removesuffix("_points.csv")] = pd.read_csv(file)
    if not records:
        raise ResultsError(f"{path}: no tables (tables/<family>.parquet) in it: name the results_dir of a finished "
                           "campaign")
    run_file = ResultsLayout(path).run_record
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    return results_from_tables(path, records, points, run)


def _scalar(value):
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value.item() if hasattr(value, "item") else value


def results_from_tables(path, records: dict, points: dict, run: dict | None = None) -> Results:
    """`Results` from per-family records tables and points tables (status, failure, meta flattened by
    `movebench.engine.aggregate`): the fingerprint comes from the points table's `fingerprint.*` columns."""
    frames = [frame.assign(family=name) for name, frame in records.items() if len(frame)]
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["family", "variant", "point", "rep", "warmup", "ok"])
    metas, failed = {}, set()
    for name, table in points.items():
        if not len(table):
            continue
        prints = [c for c in table.columns if c.startswith("fingerprint.")]
        for row in table.to_dict("records"):
            if row.get("status") == "failed":
                failed.add((name, row["point"]))
            if row.get("status") == "ok" and prints:
                metas[(name, row["point"])] = {"fingerprint": {c.removeprefix("fingerprint."): _scalar(row[c])
                                                               for c in prints}}
                rule = {c.removeprefix("launches."): _scalar(row[c]) for c in table.columns
                        if c.startswith("launches.")}
                if rule:
                    metas[(name, row["point"])]["launches"] = rule
    return Results(Path(path), merged, metas, failed, run or {})


def measures_of(family: str, columns) -> list[str]:
    """The measures compared for a family: its spec's `measures`, else what aggregate summarises; only those
    with a direction."""
    columns = set(columns)
    try:
        from movebench import families

        declared = [m.name for m in families.load(family).measures]
    except ImportError:
        declared = sorted(c for c in columns if direction(None, c))
    return [m for m in dict.fromkeys(declared) if m in columns and direction(family, m)]


def threshold_for(thresholds: dict | None, family: str, measure: str) -> float:
    """`thresholds`: {"default": t, "<family>": t, "<family>.<measure>": t} or nested
    {"<family>": {"default": t, "<measure>": t}}; the most specific entry wins."""
    thresholds = thresholds or {}
    fam = thresholds.get(family)
    nested = fam if isinstance(fam, dict) else {}
    for candidate in (thresholds.get(f"{family}.{measure}"), nested.get(measure), nested.get("default"),
                      None if isinstance(fam, dict) else fam, thresholds.get("default", DEFAULT_THRESHOLD)):
        if candidate is not None:
            return float(candidate)
    return DEFAULT_THRESHOLD


#: z of a two-sided 1% level, the verdict's own: a launch-to-launch ratio beyond exp(z * sd) happens by chance
#: in about 1% of point-measures when log ratios between launches are normal with that sd.
NOISE_Z = 2.576
#: The fewest judged point-measures of a family and measure whose A/A spread sets a threshold.
NOISE_MIN_POINTS = 3


@dataclass(frozen=True)
class NoiseThreshold:
    """What an A/A pair says one family's measure needs: `threshold` from the RMS of `points` log ratios."""

    family: str
    measure: str
    points: int
    rms_log_ratio: float
    largest_ratio: float
    threshold: float
    raised: bool  # above what the other thresholds already asked for


@dataclass(frozen=True)
class RunVariance:
    """What the runs of one campaign say a family's measure varies by from run to run, beyond its launches:
    the variance of a point's run effect on the log scale (`core.verdict.run_level_variance`)."""

    family: str
    measure: str
    variance: float
    df: int
    points: int
    runs: int

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance)


@dataclass(frozen=True)
class Noise:
    """What A/A runs of one campaign say: thresholds for measures judged within one launch (`thresholds`),
    the run-level variance for measures judged at the launch level (`run_variance`)."""

    thresholds: dict[str, NoiseThreshold]
    run_variance: dict[str, RunVariance]


def noise_from(folders, floor: dict | None = None, allow_different: bool = False) -> Noise:
    """The noise of `folders`, results folders (or `Results`) of one campaign run two or more times.

    Points measured in 2 launches or more per run are judged at the launch level, whose test already holds
    the launch-to-launch spread: what the runs add is the run's own effect, a variance (`run_variances`)
    that joins the test's, not a raised threshold. Points of one launch keep today's rule: their A/A
    ratios raise the thresholds (`thresholds_from_noise`)."""
    runs = [f if isinstance(f, Results) else read_results(f) for f in folders]
    if len(runs) < 2:
        raise ValueError("the launch-to-launch spread needs one campaign run at least twice: give two folders or more")
    pairs = [compare(runs[i], runs[j], floor, allow_different=allow_different)
             for i in range(len(runs)) for j in range(i + 1, len(runs))]
    return Noise(thresholds_from_noise(pairs, floor), run_variances(runs))


def run_variances(runs) -> dict[str, RunVariance]:
    """Per `family.measure`, the run-level variance of `runs` (results of one campaign run several times),
    from the points measured in every run; measures with no point of 2 launches in 2 runs are left out."""
    runs = [r if isinstance(r, Results) else read_results(r) for r in runs]
    launches: dict[tuple[str, str], dict[str, list]] = {}
    for res in runs:
        for (family, point), group in counted(res.records).groupby(["family", "point"], sort=False):
            for measure in measures_of(family, group.columns):
                values = _launch_values(group, measure)
                if values:
                    launches.setdefault((family, measure), {}).setdefault(point, []).append(values)
    out = {}
    for (family, measure), points in sorted(launches.items()):
        found = run_level_variance(points.values())
        if found is not None:
            variance, df, used = found
            out[f"{family}.{measure}"] = RunVariance(family, measure, variance, df, used, len(runs))
    return out


def with_noise(thresholds: dict | None, noise: dict[str, NoiseThreshold]) -> dict:
    """`thresholds` with each family's measure raised to what `noise` (thresholds_from_noise) asks for."""
    return {**(thresholds or {}), **{key: n.threshold for key, n in noise.items()}}


def thresholds_from_noise(aa, floor: dict | None = None) -> dict[str, NoiseThreshold]:
    """Per `family.measure`, the practical threshold that the launch-to-launch spread of A/A pairs asks for.

    `aa` is `compare(A, A2)` of one campaign run twice, or a list of such tables (every pair of three or
    more runs: their ratios are pooled). Each side's repetitions come from one launch, so
    the verdict's test sees the spread within a launch only; what changes from launch to launch (where
    ranks and pages land, the host's other work) shows in the A/A ratios. Under no change the log ratio
    of a later comparison has the A/A log ratios' spread (both are differences of two launches), so the
    threshold is exp(NOISE_Z * RMS(log ratio)) - 1, the RMS over the family's judged point-measures
    (pooled: one pair gives one ratio per point; `points` counts ratios), and never below the threshold `floor` gives
    (`--threshold`'s dict). Families with fewer than NOISE_MIN_POINTS judged point-measures keep the floor.
    """
    aa = pd.concat(aa, ignore_index=True) if isinstance(aa, list) else aa
    # a launch-level row's test holds the launch spread already: its runs' noise is a variance (run_variances)
    judged = aa[~aa["verdict"].isin((ONLY_BASE, ONLY_NEW, NOT_COMPARABLE)) & (aa["unit"] != "launches")]
    out = {}
    for (family, measure), rows in judged.groupby(["family", "measure"], sort=True):
        logs = [math.log(r) for r in rows["ratio"] if r and r > 0 and math.isfinite(r)]
        if len(logs) < NOISE_MIN_POINTS:
            continue
        rms = math.sqrt(sum(v * v for v in logs) / len(logs))
        base = threshold_for(floor, family, measure)
        spread = math.exp(NOISE_Z * rms) - 1
        out[f"{family}.{measure}"] = NoiseThreshold(family, measure, len(logs), rms,
                                                    math.exp(max(abs(v) for v in logs)), max(base, spread),
                                                    spread > base)
    return out


def point_fingerprint(meta: dict | None) -> dict:
    """The meta's fingerprint, flattened to "packages.numpy"-style keys (computed for metas older than it)."""
    if meta is None:
        return {}
    fp = meta.get("fingerprint") or envinfo.fingerprint(meta)
    flat = {}
    for key, value in fp.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        elif isinstance(value, list):
            flat[key] = ",".join(map(str, value))
        else:
            flat[key] = value
    return flat


def fingerprint_differences(base_meta: dict | None, new_meta: dict | None) -> dict[str, tuple]:
    """Key -> (base value, new value) for every fingerprint key whose values differ."""
    if base_meta is None or new_meta is None:
        return {}
    a, b = point_fingerprint(base_meta), point_fingerprint(new_meta)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _work_differences(b: pd.DataFrame | None, n: pd.DataFrame | None) -> dict[str, tuple]:
    if b is None or n is None:
        return {}
    out = {}
    for key in WORK_KEYS:
        if key in b.columns and key in n.columns:
            a, z = (sorted(_plain(v) for v in side[key].dropna().unique().tolist()) for side in (b, n))
            if a and z and a != z:
                out[key] = (a, z)
    return out


def _plain(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def is_time(measure: str) -> bool:
    """A time in seconds (not a rate per second): a time of different work is not comparable."""
    return measure.endswith("_s") and not measure.endswith("_per_s")


def load_warnings(base: Results, new: Results) -> list[str]:
    """A side that ran while other processes kept CPUs of its host busy measured them too: its launches that
    stayed disturbed (launch measured them again first), and the run as a whole."""
    lines = []
    for name, res in (("BASE", base), ("NEW", new)):
        launches = disturbed_launches(res.records)
        if launches:
            left_out = sum(1 for d in launches.values() if d["left_out"])
            worst = max(d["other_cpus"] or 0 for d in launches.values())
            lines.append(f"{name}: {len(launches)} launches stayed disturbed by outside load (other processes kept up "
                         f"to {worst:.2f} CPUs busy): {left_out} left out of the statistics, "
                         f"{len(launches) - left_out} kept where their point had fewer than 2 quiet launches, e.g. "
                         + ", ".join(f"{f} {p} launch {k}" for f, p, k in list(launches)[:3]))
        load = res.run.get("host_load") or {}
        if (load.get("other_cpus") or 0) > BUSY_OTHER_CPUS:
            lines.append(f"{name} ran while other processes kept {load['other_cpus']:.2f} of the host's "
                         f"{load['cpus']} CPUs busy (the campaign used {load['campaign_cpus']:.2f}): its figures "
                         "include their interference")
    return lines


def mdc_target(*sides: Results) -> float | None:
    """The detectable change the campaigns asked their launches for (`launches: {mdc_target}`), the smallest."""
    targets = [meta["launches"]["mdc_target"] for res in sides for meta in res.metas.values()
               if isinstance(meta.get("launches"), dict) and meta["launches"].get("mdc_target") is not None]
    return min(targets) if targets else None


def _values(group: pd.DataFrame | None, measure: str) -> list[float]:
    if group is None or measure not in group.columns:
        return []
    return pd.to_numeric(group[measure], errors="coerce").dropna().tolist()


def launch_index(group: pd.DataFrame) -> pd.Series:
    """Each record's launch: its `launch` column, 0 where it has none (records written before launches)."""
    if "launch" not in group.columns:
        return pd.Series(0, index=group.index, dtype=int)
    return pd.to_numeric(group["launch"], errors="coerce").fillna(0).astype(int)


def _launch_values(group: pd.DataFrame | None, measure: str) -> list[list[float]]:
    """A point's counted values of a measure, one list per launch (launches with no value left out)."""
    if group is None or measure not in group.columns or not len(group):
        return []
    values = pd.to_numeric(group[measure], errors="coerce")
    lists = [part.dropna().tolist() for _, part in values.groupby(launch_index(group), sort=True)]
    return [v for v in lists if v]


def _judge(base: list[list[float]], new: list[list[float]], prior, run_level=None) -> object:
    """compare_launches when both sides have 2 launches or more, else today's comparison of the repetitions."""
    if len(base) >= 2 and len(new) >= 2:
        return compare_launches(base, new, prior=prior, run_level=run_level)
    result = compare_samples([v for launch in base for v in launch], [v for launch in new for v in launch])
    return replace(result, launches_base=len(base), launches_new=len(new))


class MatchError(ValueError):
    """Points that --match-ignoring cannot pair: one line naming them and what would pair them."""


def parse_match_ignoring(items) -> dict[str, tuple[str, str] | None]:
    """["window", "skew=0:1.1"] -> {"window": None, "skew": ("0", "1.1")}; a bad item raises MatchError."""
    out = {}
    for item in items or ():
        key, sep, values = str(item).partition("=")
        if not key or "~" in key or "/" in key:
            raise MatchError(f"{item!r}: expected a parameter name such as window, or window=BASE:NEW such as "
                             "window=64:1")
        if sep:
            base_value, colon, new_value = values.partition(":")
            if not colon or not base_value or not new_value:
                raise MatchError(f"{item!r}: expected KEY=BASE:NEW, e.g. window=64:1 (BASE's value, then NEW's)")
            out[key] = (base_value, new_value)
        else:
            out[key] = None
    return out


def _same_value(text: str, wanted: str) -> bool:
    if text == wanted:
        return True
    try:
        return float(text) == float(wanted)
    except ValueError:
        return False


def _match_keys(groups: dict, ignoring: dict, side: str) -> tuple[dict, dict, int]:
    """(family, point without the ignored keys) -> group, and -> the original point; points whose ignored key
    has another value than the one picked for this side are left out. Two points left on one key are an error."""
    keyed, original, left_out = {}, {}, 0
    index = 0 if side == "base" else 1
    for (family, point), group in groups.items():
        kept, skip = [], False
        for segment in point.split("/"):
            key, _, value = segment.partition("~")
            if key in ignoring:
                picked = ignoring[key]
                if picked is not None and not _same_value(value, picked[index]):
                    skip = True
                continue
            kept.append(segment)
        if skip:
            left_out += 1
            continue
        match = (family, "/".join(kept))
        if match in original:
            a, b = sorted([original[match], point])
            names = ", ".join(k for k in ignoring)
            raise MatchError(f"{side.upper()} has two {family} points that differ only in {names}: {a} and {b}; "
                             f"pick one value per side with --match-ignoring KEY=BASE:NEW (e.g. window=64:1)")
        keyed[match], original[match] = group, point
    return keyed, original, left_out


def compare(base, new, thresholds: dict | None = None, allow_different: bool = False,
            match_ignoring: dict | None = None, run_variance: dict | None = None) -> pd.DataFrame:
    """One row per point and measure (columns `COLUMNS`); `base`/`new` are results folders or `Results`.

    `match_ignoring` ({"window": None} or {"window": ("64", "1")}, see `parse_match_ignoring`)
    pairs points that differ in those parameters: BASE's point with NEW's point whose other
    parameters are equal (with values given, only BASE's points at the first and NEW's at the
    second take part). `point` is then BASE's path and `point_new` NEW's.
    `run_variance` ({"family.measure": RunVariance} of `noise_from`): the run-level variance each launch-level
    test adds.
    """
    base = base if isinstance(base, Results) else read_results(base)
    new = new if isinstance(new, Results) else read_results(new)
    ignoring = dict(match_ignoring or {})
    sides, originals, left_out = {}, {}, {}
    for name, res in (("base", base), ("new", new)):
        groups = {key: group for key, group in counted(res.records).groupby(["family", "point"], sort=False)}
        # a point whose every repetition failed is still present (with no measured values), not absent
        for key in res.records[["family", "point"]].drop_duplicates().itertuples(index=False):
            groups.setdefault(tuple(key), res.records.iloc[0:0])
        sides[name], originals[name], left_out[name] = _match_keys(groups, ignoring, name)
    rows, pending = [], []
    for family, matched in sorted(set(sides["base"]) | set(sides["new"])):
        b, n = sides["base"].get((family, matched)), sides["new"].get((family, matched))
        base_point = originals["base"].get((family, matched))
        new_point = originals["new"].get((family, matched))
        point = base_point or new_point
        variant = next((g["variant"].iloc[0] for g in (b, n) if g is not None and len(g)), None)
        failed_notes = [f"failed in {name}" for name, res, p in (("base", base, base_point), ("new", new, new_point))
                        if (family, p or point) in res.failed]
        if base_point and new_point and base_point != new_point:
            failed_notes.append(f"matched ignoring {', '.join(ignoring)}: NEW's point is {new_point}")
        columns = set(b.columns if b is not None else ()) | set(n.columns if n is not None else ())
        differs = fingerprint_differences(base.metas.get((family, base_point)), new.metas.get((family, new_point)))
        comparable = not any(k in differs for k in INCOMPARABLE_KEYS)
        work = _work_differences(b, n)
        work_note = "work differs (" + ", ".join(
            f"{k} {','.join(map(str, a))} -> {','.join(map(str, z))}" for k, (a, z) in work.items()) + \
            "): times of different work are not compared"
        for measure in measures_of(family, columns):
            bl, nl = _launch_values(b, measure), _launch_values(n, measure)
            if not bl and not nl:
                continue
            better = direction(family, measure)
            threshold = threshold_for(thresholds, family, measure)
            different_work = bool(work) and is_time(measure)
            if b is None:
                outcome = ONLY_NEW
            elif n is None:
                outcome = ONLY_BASE
            elif (not comparable and not allow_different) or different_work:
                outcome = NOT_COMPARABLE
            else:
                outcome = None  # judged below, once the family's launch variances give their prior
            pending.append((bl, nl, outcome, {
                "family": family, "variant": variant, "point": point, "measure": measure, "better": better,
                "threshold": threshold, "comparable": comparable, "differs": ", ".join(differs),
                "differs_detail": "; ".join(f"{k}: {_short(a)} -> {_short(z)}" for k, (a, z) in differs.items()),
                "note": "; ".join(failed_notes + ([work_note] if different_work else [])),
                "point_new": new_point or point,
            }))
    # the prior of a point's launch variance, from the family's points of each measure that have 2 launches or
    # more on both sides (core.verdict.launch_variance_prior)
    spread = {}
    for bl, nl, _, row in pending:
        if len(bl) >= 2 and len(nl) >= 2:
            spread.setdefault((row["family"], row["measure"]), []).append((bl, nl))
    priors = {key: launch_variance_prior(points) for key, points in spread.items()}
    touched, kept = {}, {}
    for side, res in (("BASE", base), ("NEW", new)):
        for (family, point, _), info in disturbed_launches(res.records).items():
            touched[(family, point)] = True
            if not info["left_out"]:
                kept.setdefault((family, point), set()).add(side)
    for bl, nl, outcome, row in pending:
        keys = [(row["family"], row["point"]), (row["family"], row["point_new"])]
        row["limit"] = limit_of(len(bl), len(nl), any(key in touched for key in keys))
        row["_loaded"] = sorted(set().union(*(kept.get(key, set()) for key in keys)))
        run = (run_variance or {}).get(f"{row['family']}.{row['measure']}")
        result = _judge(bl, nl, priors.get((row["family"], row["measure"])),
                        None if run is None else (run.variance, run.df))
        if outcome is None:
            outcome = verdict(result, row["better"], row["threshold"])
        loaded = row.pop("_loaded")
        if loaded and outcome in ("regressed", "improved"):
            # outside load moves a figure as a change of code would: a side measured under it cannot tell them apart
            outcome = "inconclusive"
            row["note"] = "; ".join(filter(None, [row["note"], "inconclusive rather than changed: "
                                                  f"{' and '.join(loaded)} kept launches disturbed by outside load "
                                                  "(no 2 quiet ones)"]))
        rows.append({**row, **{k: v for k, v in result.as_dict().items() if k != "scale"}, "verdict": outcome})
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs["warnings"] = load_warnings(base, new)
    frame.attrs["mdc_target"] = mdc_target(base, new)
    frame.attrs["match_ignoring"] = ignoring
    frame.attrs["left_out"] = left_out
    return frame


DEFAULT_STACK = "default"


def _without_stack(point: str) -> str:
    return "/".join(seg for seg in point.split("/") if not seg.startswith("stack~"))


def _stack_of(point: str) -> str:
    """The stack a point path names; the default stack is kept out of paths."""
    return next((seg[len("stack~"):] for seg in point.split("/") if seg.startswith("stack~")), DEFAULT_STACK)


def between_stacks(results: Results, thresholds: dict | None = None,
                   order: dict[str, list] | None = None) -> list[tuple[str, str, str, pd.DataFrame]]:
    """Verdicts between the communication stacks of one campaign (docs/stacks.md): for each family whose records
    name more than one stack, each stack against the first (the first of the family's `stacks` in `order`, as
    the campaign names them; without it `default` when it ran, else the first by name), point
    by point on everything but the stack. A different MPI library is what such a comparison is about, so the
    points are judged (`allow_different`) and the fingerprint keys that differ are named, not "not comparable".
    Returns (family, base stack, new stack, compare's table) per pair."""
    records = results.records
    if records.empty or "stack" not in records.columns:
        return []
    out = []
    for family, rows in records.groupby("family", sort=True):
        stacks = rows["stack"].fillna(DEFAULT_STACK).astype(str)
        named = [str(n) for n in (order or {}).get(family) or []]
        rank = {name: i for i, name in enumerate(named)}
        names = sorted(stacks.unique(), key=lambda name: (rank.get(name, len(named)), name != DEFAULT_STACK, name))
        if len(names) < 2:
            continue
        sides = {}
        for name in names:
            part = rows[stacks == name].copy()
            original = dict(zip(part["point"].map(_without_stack), part["point"], strict=False))
            part["point"] = part["point"].map(_without_stack)
            metas = {(family, p): results.metas[(family, o)] for p, o in original.items()
                     if (family, o) in results.metas}
            failed = {(family, _without_stack(p)) for f, p in results.failed if f == family and _stack_of(p) == name}
            sides[name] = Results(results.path, part, metas, failed, results.run)
        for name in names[1:]:
            frame = compare(sides[names[0]], sides[name], thresholds, allow_different=True)
            out.append((family, names[0], name, frame))
    return out


def _count(value) -> str:
    return "" if value is None or pd.isna(value) else str(int(value))


def _short(value) -> str:
    text = "(none)" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def counts(frame: pd.DataFrame) -> dict[str, int]:
    """Rows per verdict, every verdict named (zero included), worst first."""
    seen = frame["verdict"].value_counts().to_dict() if len(frame) else {}
    return {v: int(seen.get(v, 0)) for v in VERDICT_ORDER}


def worst(frame: pd.DataFrame, verdict_name: str = "regressed", limit: int = 5) -> pd.DataFrame:
    """The rows of one verdict, largest change first."""
    rows = frame[frame["verdict"] == verdict_name].copy()
    rows["_size"] = rows["ratio"].map(lambda r: abs(math.log(r)) if r and r > 0 and math.isfinite(r) else math.inf)
    return rows.sort_values("_size", ascending=False).drop(columns="_size").head(limit)


def limit_of(launches_base: int, launches_new: int, disturbed: bool) -> str:
    """What limits a row's resolution: its launches' spread, their number, or launches lost to outside load."""
    if disturbed:
        return "disturbed launches"
    if min(launches_base, launches_new) < FEW_LAUNCHES:
        return "too few launches"
    return "between-launch spread"


def resolution(row) -> str:
    """What one row can tell: "resolves changes of >= 18% with 3 launches; 6 launches would resolve 12%", or
    ONE_LAUNCH for a row compared on the repetitions."""
    if row.get("unit") != "launches" or row.get("mdc") is None or pd.isna(row.get("mdc")):
        if row.get("unit") == "repetitions" and max(row.get("launches_base") or 1, row.get("launches_new") or 1) >= 2:
            return "fewer than 2 launches on one side: compared on the repetitions, within one launch"
        return ONE_LAUNCH
    launches = min(int(row["launches_base"]), int(row["launches_new"]))
    limit = row.get("limit")
    return (f"resolves changes of >= {100 * row['mdc']:.0f}% with {launches} launches; "
            f"{2 * launches} launches would resolve {100 * row['mdc_double']:.0f}%"
            + (f" (limited by {limit})" if isinstance(limit, str) and limit else ""))


def resolution_lines(frame: pd.DataFrame) -> list[str]:
    """Per family and measure judged at the launch level, the median minimum detectable change; and how many rows
    stand on one launch."""
    if not len(frame) or "unit" not in frame.columns:
        return []
    lines = []
    judged = frame[~frame["verdict"].isin((ONLY_BASE, ONLY_NEW, NOT_COMPARABLE))]
    launched = judged[(judged["unit"] == "launches") & judged["mdc"].notna()]
    target = frame.attrs.get("mdc_target")
    for (family, measure), rows in launched.groupby(["family", "measure"], sort=True):
        launches = int(min(rows["launches_base"].median(), rows["launches_new"].median()))
        line = (f"{family} {measure}: resolves changes of >= {100 * rows['mdc'].median():.0f}% with {launches} "
                f"launches; {2 * launches} launches would resolve {100 * rows['mdc_double'].median():.0f}% "
                f"(median of {len(rows)} point{'s' if len(rows) != 1 else ''})")
        missed = rows[rows["mdc"] > target] if target is not None else rows[:0]
        if len(missed):
            why = missed["limit"].value_counts() if "limit" in missed else pd.Series(dtype=int)
            line += (f"; {len(missed)} above the campaign's {100 * target:.0f}% target, limited by "
                     + ", ".join(f"{reason} ({n})" for reason, n in why.items()))
        lines.append(line)
    single = len(judged) - len(launched)
    if single:
        lines.append(f"{single} point-measure{'s' if single != 1 else ''} compared on repetitions: {ONE_LAUNCH}")
    return lines


def summary_lines(frame: pd.DataFrame, limit: int = 5) -> list[str]:
    c = counts(frame)
    points = frame[["family", "point"]].drop_duplicates().shape[0] if len(frame) else 0
    lines = [f"warning: {w}" for w in frame.attrs.get("warnings", [])]
    main = ", ".join(f"{c[v]} {v}" for v in ("regressed", "improved", "unchanged", "inconclusive"))
    if c[NOT_COMPARABLE]:
        main += f", {c[NOT_COMPARABLE]} {NOT_COMPARABLE}"
    for side in (ONLY_BASE, ONLY_NEW):
        if c[side]:
            n_points = frame[frame["verdict"] == side][["family", "point"]].drop_duplicates().shape[0]
            main += f"; {n_points} point{'s' if n_points != 1 else ''} {side}"
    lines.append(f"{len(frame)} point-measures in {points} points: {main}")
    ignoring = frame.attrs.get("match_ignoring") or {}
    if ignoring:
        picked = [f"{k} (BASE {v[0]}, NEW {v[1]})" if v else k for k, v in ignoring.items()]
        left = frame.attrs.get("left_out") or {}
        lines.append("matched ignoring " + ", ".join(picked) + "; left out: "
                     + ", ".join(f"{left.get(side, 0)} {side} points at other values" for side in ("base", "new")))
    lines += resolution_lines(frame)
    for name in ("regressed", "improved"):
        rows = worst(frame, name, limit)
        if len(rows):
            lines.append(f"{'worst regressions' if name == 'regressed' else 'largest improvements'}:")
            lines += [f"  {r.family} {r.point} {r.measure}: x{r.ratio:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}] "
                      f"p={r.p_value:.2g} ({r.better} is better)" for r in rows.itertuples()]
    bad = frame[(frame["verdict"] == NOT_COMPARABLE) & ~frame["comparable"]]
    for r in bad[["family", "point", "differs"]].drop_duplicates().head(limit).itertuples():
        lines.append(f"not comparable: {r.family} {r.point} ({r.differs}; --allow-different to judge anyway)")
    return lines


# --- compare.html ---


def human(value, measure: str) -> str:
    """A value of a measure in a unit a person reads (SI values stay in the CSV)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if measure.endswith("_Bps"):
        for unit, f in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
            if abs(value) >= f:
                return f"{value / f:.4g} {unit}"
        return f"{value:.4g} B/s"
    if measure.endswith("_bytes"):
        for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(value) >= f:
                return f"{value / f:.4g} {unit}"
        return f"{value:.4g} B"
    if is_time(measure):
        for unit, f in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
            if abs(value) >= f:
                return f"{value / f:.4g} {unit}"
        return f"{value / 1e-9:.4g} ns"
    return f"{value:.4g}"


def render_html(frame: pd.DataFrame, base_label: str, new_label: str, thresholds: dict | None = None,
                allow_different: bool = False) -> str:
    """compare.html: self-contained (inline CSS, no script, no external URL)."""
    return _render("compare.html.j2", frame, base_label, new_label, thresholds, allow_different)


def render_section(frame: pd.DataFrame, base_label: str, new_label: str, thresholds: dict | None = None,
                   allow_different: bool = False, id_prefix: str = "", level: int = 2) -> str:
    """The same tables without the page around them, for a section of another report (it brings no CSS:
    the classes are those of compare.html's style block). `id_prefix` keeps its anchors apart from the
    page's (the report's family sections are `#shuffle`, ...); `level` is its headings' level."""
    return _render("compare_section.html.j2", frame, base_label, new_label, thresholds, allow_different,
                   id_prefix, level)


def _render(template: str, frame, base_label, new_label, thresholds, allow_different, id_prefix="",
            level=2) -> str:
    import jinja2
    import markupsafe

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.templates())),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    order = {v: i for i, v in enumerate(VERDICT_ORDER)}
    shown = frame.assign(_o=frame["verdict"].map(order)).sort_values(["_o", "family", "point", "measure"])

    def row(r):
        return {"family": r.family, "point": markupsafe.Markup("/<wbr>").join(r.point.split("/")),
                "measure": r.measure, "better": r.better or "",
                "n": f"{r.n_base} / {r.n_new}", "launches": f"{_count(r.launches_base)} / {_count(r.launches_new)}",
                "resolution": resolution(r._asdict()), "base": human(r.median_base, r.measure),
                "new": human(r.median_new, r.measure),
                "ratio": "" if pd.isna(r.ratio) else f"{r.ratio:.3f}",
                "ci": "" if pd.isna(r.ci_low) else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]",
                "p": "" if pd.isna(r.p_value) else f"{r.p_value:.2g}", "threshold": f"{100 * r.threshold:g}%",
                "verdict": r.verdict, "css": r.verdict.replace(" ", "-"), "differs": r.differs_detail,
                "note": r.note}

    ignoring = frame.attrs.get("match_ignoring") or {}
    matching = ""
    if ignoring:
        matching = "Points paired ignoring " + ", ".join(
            f"{k} (BASE at {v[0]}, NEW at {v[1]})" if v else k for k, v in ignoring.items()) + \
            ": each row names BASE's point; the note names NEW's."
    headline = [row(r) for r in shown[shown["verdict"].isin(["regressed", "improved"])].itertuples()]
    per_family = {fam: [row(r) for r in part.itertuples()] for fam, part in shown.groupby("family", sort=True)}
    one_side = shown[shown["verdict"].isin([ONLY_BASE, ONLY_NEW])][["family", "point", "verdict", "note"]]
    one_side = one_side.drop_duplicates(["family", "point"])
    return env.get_template(template).render(
        base=base_label, new=new_label, counts=counts(frame), warnings=frame.attrs.get("warnings", []),
        headline=headline, families=per_family, matching=matching, resolution=resolution_lines(frame),
        one_side=one_side.to_dict("records"), thresholds=thresholds or {}, default_threshold=DEFAULT_THRESHOLD,
        alpha=ALPHA, min_repetitions=MIN_REPETITIONS, allow_different=allow_different,
        incomparable_keys=INCOMPARABLE_KEYS, id_prefix=id_prefix, level=level,
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))


def write(frame: pd.DataFrame, out_dir, base_label: str, new_label: str, thresholds=None,
          allow_different: bool = False) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv, page = out_dir / "compare.csv", out_dir / "compare.html"
    frame.to_csv(csv, index=False)
    page.write_text(render_html(frame, base_label, new_label, thresholds, allow_different), encoding="utf-8")
    return csv, page
