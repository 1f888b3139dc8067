"""The verdicts a campaign's report carries: the comparison with an earlier campaign (`campaign.compare_to`)
and the published results beside ours (`campaign.references`).

Both read tables only, and the report rule declares them as inputs (`inputs`): the compared
folder's records and points tables (and its campaign_run.json), and the references file. So a
report says what it read, and reruns when the earlier campaign or the references change.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING

from movebench import families
from movebench.core.layout import ResultsLayout
from movebench.judging import claims, references

if TYPE_CHECKING:  # annotations only: `config_problems` runs at config time, without pandas
    import pandas as pd

    from movebench.judging import compare

PUBLISHED = "published"


# --- the config ---


def references_file(campaign: dict) -> Path | None:
    """The references file a campaign checks against: the shipped one for `published`, none for null."""
    value = campaign.get("references", PUBLISHED)
    if value is None or value is False:
        return None
    return references.DEFAULT_FILE if value == PUBLISHED else Path(value).expanduser()


def compare_folder(campaign: dict) -> Path | None:
    value = campaign.get("compare_to")
    return Path(value).expanduser() if value else None


def thresholds(campaign: dict) -> dict:
    return dict(campaign.get("compare_thresholds") or {})


def noise_folders(campaign: dict) -> list[Path]:
    """campaign.compare_noise_from: one campaign's runs whose launch-to-launch spread sets compare_to's thresholds."""
    return [Path(p).expanduser() for p in campaign.get("compare_noise_from") or []]


def inputs(config: dict) -> dict[str, list[str]]:
    """The report rule's inputs beyond this campaign's tables: the compared campaign's tables (and the A/A pair's
    of compare_noise_from), the references."""
    from movebench.judging import compare

    campaign = config["campaign"]
    folder, refs = compare_folder(campaign), references_file(campaign)
    compared = [str(p) for p in compare.table_files(folder)] if folder else []
    for pair_folder in noise_folders(campaign) if folder else []:
        compared += [str(p) for p in compare.table_files(pair_folder)]
    studied = [str(claims.default_file())] if campaign.get("studies") else []  # the claims the study views judge
    return {"compare_to": compared, "references": ([str(refs)] if refs else []) + studied}


def config_problems(config: dict) -> list[tuple[str, object, str]]:
    """What is wrong with compare_to, compare_thresholds and references, as (key, value, what would be valid)."""
    campaign = config["campaign"]
    problems = []
    folder = compare_folder(campaign)
    if folder is not None:
        here = Path(campaign["results_dir"]).expanduser().resolve()
        if not folder.is_dir():
            problems.append(("campaign.compare_to", campaign["compare_to"],
                             "no such folder: name the results_dir of a finished campaign"))
        elif folder.resolve() == here:
            problems.append(("campaign.compare_to", campaign["compare_to"],
                             "is this campaign's own results_dir: name an earlier campaign's results folder"))
        elif not ResultsLayout(folder).tabled():
            problems.append(("campaign.compare_to", campaign["compare_to"],
                             "has no tables (tables/<family>.parquet): name the results_dir of a finished campaign"))
    noise = campaign.get("compare_noise_from")
    if noise and folder is None:
        problems.append(("campaign.compare_noise_from", noise,
                         "sets compare_to's thresholds, and compare_to is not set: set it, or leave this null"))
    for pair_folder in noise_folders(campaign):
        if not ResultsLayout(pair_folder).tabled():
            problems.append(("campaign.compare_noise_from", noise,
                             f"{pair_folder}: no tables (tables/<family>.parquet): name the results_dirs of "
                             "one campaign run two or more times"))
    problems += _threshold_problems(campaign.get("compare_thresholds") or {})
    refs = references_file(campaign)
    if refs is not None:
        for key, value, hint in _reference_problems(str(refs), _mtime(refs)):
            where = "" if key == "(file)" else f" {key} = {value!r}:"
            problems.append(("campaign.references", campaign.get("references", PUBLISHED), f"{refs}:{where} {hint}"))
    studies = campaign.get("studies") or []
    if studies:
        known = _study_keys(str(refs), _mtime(refs)) if refs is not None else ()
        for i, study in enumerate(studies):
            if study not in known:
                problems.append((f"campaign.studies[{i}]", study,
                                 "not a study of the references file: " + (", ".join(known) if known else
                                                                           "set campaign.references")))
    return problems


@functools.cache
def _study_keys(path: str, mtime: int | None) -> tuple:
    try:
        return tuple(sorted(references.load(path).get("studies") or {}))
    except references.ReferencesError:
        return ()


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


@functools.cache
def _reference_problems(path: str, mtime: int | None) -> tuple:
    """The references file's problems, checked once per version of the file: validating it is most of a config check."""
    try:
        references.load(path)
    except references.ReferencesError as error:
        return tuple(error.problems)
    return ()


def _threshold_problems(given: dict) -> list:
    problems = []
    known = families.names()

    def measures(family):
        return sorted(families.load(family).measure)

    def check_value(key, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            problems.append((f"campaign.compare_thresholds.{key}", value,
                             "must be a fraction > 0, e.g. 0.05 for 5%"))

    for key, value in given.items():
        family, _, measure = key.partition(".")
        if key == "default":
            check_value(key, value)
        elif family not in known:
            problems.append((f"campaign.compare_thresholds.{key}", value,
                             "unknown key: use default, a family (" + ", ".join(known) + ") or family.measure"))
        elif measure:
            if measure not in measures(family):
                problems.append((f"campaign.compare_thresholds.{key}", value,
                                 f"{family} has no measure {measure}: " + ", ".join(measures(family))))
            else:
                check_value(key, value)
        elif isinstance(value, dict):
            for sub, inner in value.items():
                if sub != "default" and sub not in measures(family):
                    problems.append((f"campaign.compare_thresholds.{key}.{sub}", inner,
                                     f"{family} has no measure {sub}: default or " + ", ".join(measures(family))))
                else:
                    check_value(f"{key}.{sub}", inner)
        else:
            check_value(key, value)
    return problems


# --- this campaign as compare and check read one ---


def results_of(config: dict, sections: dict) -> compare.Results:
    """This campaign's `Results` from the tables the report already read."""
    from movebench.judging import compare

    return compare.results_from_tables(config["campaign"]["results_dir"],
                                       {name: s["table"] for name, s in sections.items()},
                                       {name: s["points_table"] for name, s in sections.items()})


# --- compare_to ---


def comparison(config: dict, results: compare.Results) -> dict | None:
    """The comparison with campaign.compare_to: its table, verdict counts, summary lines and the section's HTML."""
    from movebench.judging import compare

    campaign = config["campaign"]
    folder = compare_folder(campaign)
    if folder is None:
        return None
    base = compare.read_tables(folder)
    given = thresholds(campaign)
    noise = compare.Noise({}, {})
    pair = noise_folders(campaign)
    if pair:
        noise = compare.noise_from([compare.read_tables(f) for f in pair], given)
        given = compare.with_noise(given, noise.thresholds)
    frame = compare.compare(base, results, given, run_variance=noise.run_variance)
    # this run's host load is written after the report: only BASE's can be known here
    warnings = [w for w in frame.attrs.get("warnings", []) if w.startswith("BASE")]
    return {
        "folder": str(campaign["compare_to"]),
        "frame": frame,
        "counts": compare.counts(frame),
        "lines": compare.summary_lines(frame),
        "resolution": compare.resolution_lines(frame),
        "noise": [{"key": key, "threshold": n.threshold, "rms": n.rms_log_ratio, "points": n.points,
                   "largest": n.largest_ratio, "raised": n.raised} for key, n in noise.thresholds.items()],
        "run_noise": [{"key": key, "sd": r.sd, "points": r.points, "df": r.df, "runs": r.runs}
                      for key, r in noise.run_variance.items()],
        "noise_from": [str(p) for p in pair],
        "warnings": warnings,
        "html": compare.render_section(frame, str(campaign["compare_to"]), campaign["results_dir"], given,
                                       id_prefix="compare-", level=3),
    }


# --- stacks ---


def stack_comparisons(config: dict, results: compare.Results) -> list[dict]:
    """Verdicts between the stacks each family ran (compare.between_stacks), at compare_thresholds: per pair,
    the counts, the summary lines and the section's HTML."""
    from movebench.judging import compare

    given = thresholds(config["campaign"])
    out = []
    order = {family: section.get("stacks") for family, section in config.items()
             if family != "campaign" and isinstance(section, dict)}
    for family, base, new, frame in compare.between_stacks(results, given, order):
        out.append({"family": family, "base": base, "new": new, "frame": frame, "counts": compare.counts(frame),
                    "lines": compare.summary_lines(frame),
                    "html": compare.render_section(frame, f"{family} on {base}", f"{family} on {new}", given,
                                                   allow_different=True, id_prefix=f"stacks-{family}-{new}-",
                                                   level=3)})
    return out


# --- references ---


def published(config: dict, results: compare.Results) -> pd.DataFrame | None:
    refs = references_file(config["campaign"])
    if refs is None:
        return None
    return references.check(results, references.load(refs))


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    from movebench.core.units import sig

    return sig(value)


def _band(r) -> str:
    high = "∞" if not math.isfinite(r["high"]) else _fmt(r["high"])
    return f"{_fmt(r['low'])} to {high}"


def in_words(r) -> str:
    """One sentence a person reads: reproduced or not, and why."""
    ours = f"{_fmt(r['measured'])} {r['unit']} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"
    theirs = f"{_fmt(r['value'])} {r['unit']}"
    what = f"{r['what']} ({r['metric']}" + (f", {r['parameters']})" if r["parameters"] else ")")
    if r["status"] == "fail":
        flipped = r["kind"] == "ratio" and (r["value"] > 1) != (r["measured"] > 1)
        why = (" The other variant wins here: the study's shape is reversed." if flipped
               else " The same variant wins, by a factor outside the study's band.")
        return (f"Not reproduced. The study found {what} = {theirs}; here it is {ours}, its whole interval "
                f"outside the accepted {_band(r)}.{why}")
    if r["status"] == "inconclusive":
        half, distance = references.log_distance(r["measured"], r["ci_low"], r["ci_high"], (r["low"], r["high"]))
        launches = r.get("launches")
        launches = int(launches) if launches is not None and launches == launches else 1
        return (f"Inconclusive. The study found {what} = {theirs}; here it is {ours}: the interval overlaps the "
                f"accepted {_band(r)}, so it neither holds nor fails; "
                f"{references.settle_words(launches, half, distance)}.")
    if r["status"] == "pass":
        return (f"Reproduced: {what} = {ours} here, its whole interval inside the accepted {_band(r)} "
                f"(the study: {theirs}).")
    if r["status"] == "shown":
        return f"Shown, not judged (an absolute figure does not transfer between machines): {theirs} on {r['system']}."
    return f"Not measured here: no point of this campaign has {r['parameters'] or 'these parameters'}."


def by_family(frame: pd.DataFrame | None) -> dict[str, dict]:
    """Per family: the judged and shown rows (with their sentence) and the references not measured, per study."""
    if frame is None:
        return {}
    out = {}
    for family, part in frame.groupby("family", sort=True):
        rows = []
        for r in part.to_dict("records"):
            if r["status"] == "not measured":
                continue
            rows.append({**r, "words": in_words(r), "ours": f"{_fmt(r['measured'])} [{_fmt(r['ci_low'])}, "
                                                                f"{_fmt(r['ci_high'])}]",
                         "theirs": _fmt(r["value"]), "band": _band(r) if r["judged"] else ""})
        order = {"fail": 0, "inconclusive": 1, "pass": 2, "shown": 3}
        rows.sort(key=lambda r: (order[r["status"]], r["id"]))
        missing = part[part["status"] == "not measured"]
        not_measured = [{"study": study, "title": group["title"].iloc[0], "count": len(group),
                         "ids": group["id"].tolist(), "parameters": sorted(set(group["parameters"]))}
                        for study, group in missing.groupby("study", sort=True)]
        counts = part["status"].value_counts().to_dict()
        out[family] = {"rows": rows, "not_measured": not_measured,
                       "counts": {s: int(counts.get(s, 0)) for s in references.STATUSES}}
    return out


# --- studies: a campaign that carries a study (campaign.studies) ---


def _theirs_and_ours(r) -> dict:
    measured = r["measured"] is not None and not (isinstance(r["measured"], float) and math.isnan(r["measured"]))
    return {"id": r["id"], "family": r["family"], "what": r["what"], "metric": r["metric"],
            "parameters": r["parameters"], "unit": r["unit"], "theirs": _fmt(r["value"]),
            "ours": f"{_fmt(r['measured'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if measured else "",
            "status": r["status"], "point": r["point"] or "", "quote": r["quote"] or ""}


def study_views(config: dict, results: compare.Results, published_frame: pd.DataFrame | None) -> list[dict]:
    """One view per study the campaign carries: the study's citation, its claims judged on this campaign's points
    (status and evidence), and every published value of the references file beside this campaign's figure at
    the same parameters and unit (empty where this campaign has no such point), in the file's order."""
    studies = config["campaign"].get("studies") or []
    refs = references_file(config["campaign"])
    if not studies or refs is None:
        return []
    cited = references.load(refs).get("studies") or {}
    judged = claims.judge(results.records, claims.load(), studies=studies, conditions=claims.conditions_of(results),
                          links=claims.link_rates(config))
    views = []
    for key in studies:
        part = judged[judged["study"] == key]
        rows = []
        if published_frame is not None:
            mine = published_frame[published_frame["study"] == key]
            rows = [_theirs_and_ours(r) for r in mine.to_dict("records")]
        counts = part["status"].value_counts().to_dict()
        views.append({"key": key, **cited.get(key, {}), "claims": part.to_dict("records"), "published": rows,
                      "counts": {s: int(counts.get(s, 0)) for s in claims.STATUSES},
                      "measured": sum(1 for r in rows if r["ours"])})
    return views
