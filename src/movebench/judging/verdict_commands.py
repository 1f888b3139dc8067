"""`python -m movebench compare` and `python -m movebench check`: verdicts for people and for CI.

Exit status: 0, or 1 when a `--fail-on` status occurs, or 2 for unusable input (a missing
results folder, a bad threshold, an invalid references file), with one line saying why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from movebench.engine import config as campaign_config
from movebench.judging import claims
from movebench.judging import compare as comparing
from movebench.judging import references as refs

COMPARE_FAIL_ON = ("regressed", "improved", "inconclusive", "not-comparable", "only-in-base", "only-in-new")
CHECK_FAIL_ON = ("fail", "inconclusive", "not-measured")


def _threshold(text: str) -> tuple[str, float]:
    key, sep, value = text.rpartition("=")
    key = key if sep else "default"
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        number = None
    if number is None or not number > 0 or not key:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a fraction such as 0.05 or 5%, optionally after FAMILY= or FAMILY.MEASURE=")
    return key, number


def add_parsers(sub) -> dict:
    p = sub.add_parser("compare", help="verdicts of NEW against BASE per point and measure: compare.html, compare.csv",
                       description="Compare two results folders point by point (docs/compare.md).")
    p.add_argument("base", help="the BASE results folder")
    p.add_argument("new", help="the NEW results folder")
    p.add_argument("--out", help="folder for compare.html and compare.csv (default: NEW)")
    p.add_argument("--threshold", action="append", type=_threshold, default=[], metavar="[FAMILY[.MEASURE]=]T",
                   help="practical threshold, e.g. 0.05 or 5%% (default 5%%); repeat with shuffle=0.1 or "
                        "shuffle.bandwidth_Bps=8%% for a family or a measure")
    p.add_argument("--noise-from", nargs="+", metavar="A",
                   help="results folders of one campaign run two or more times: measures judged at the launch "
                        "level add the runs' run-to-run variance to their test; measures of one launch get the "
                        "threshold their A/A spread asks for, never below --threshold's")
    p.add_argument("--fail-on", action="append", choices=COMPARE_FAIL_ON, default=[],
                   help="exit 1 when any point-measure has this verdict (repeatable), e.g. regressed")
    p.add_argument("--allow-different", action="store_true",
                   help="judge points whose MPI library or CPU model differ instead of marking them not comparable")
    p.add_argument("--match-ignoring", action="append", default=[], metavar="KEY[=BASE:NEW]",
                   help="pair points that differ in parameter KEY (e.g. window); KEY=BASE:NEW (window=64:1) takes "
                        "BASE's points at one value and NEW's at another (repeatable)")
    c = sub.add_parser("check", help="pass / fail / inconclusive / not measured per reference (published results, "
                                     "baselines)",
                       description="Check a results folder against a references file (docs/compare.md).")
    c.add_argument("results", help="the results folder")
    c.add_argument("--references", default=str(refs.DEFAULT_FILE), help="references YAML (default: %(default)s)")
    c.add_argument("--out", help="folder for check.csv (default: RESULTS)")
    c.add_argument("--fail-on", action="append", choices=CHECK_FAIL_ON, default=[],
                   help="exit 1 when any reference has this status (repeatable), e.g. fail")
    c.add_argument("--studies", nargs="+", metavar="STUDY", default=[],
                   help="also judge these studies' claims (config/references/claims.yaml; docs/studies.md): "
                        "reproduced / not reproduced / inconclusive / not comparable / not measured with the "
                        "evidence, in claims.csv")
    c.add_argument("--with", dest="also", nargs="+", metavar="RESULTS", default=[],
                   help="with --studies: more results folders whose points the claims judge too, for a study whose "
                        "systems ran as campaigns of their own (the cloud study's Azure and Cirrus columns)")
    return {"compare": run_compare, "check": run_check}


def run_compare(args) -> int:
    thresholds = dict(args.threshold)
    for path in (args.base, args.new, *(args.noise_from or ())):
        if not Path(path).is_dir():
            print(f"movebench compare: {path}: no such results folder", file=sys.stderr)
            return 2
    if args.noise_from and len(args.noise_from) < 2:
        print("movebench compare: --noise-from needs one campaign's results folder at least twice (A A2 ...)",
              file=sys.stderr)
        return 2
    noise = comparing.Noise({}, {})
    try:
        if args.noise_from:
            noise = comparing.noise_from(args.noise_from, thresholds, allow_different=args.allow_different)
            thresholds = comparing.with_noise(thresholds, noise.thresholds)
        ignoring = comparing.parse_match_ignoring(args.match_ignoring)
        frame = comparing.compare(args.base, args.new, thresholds, allow_different=args.allow_different,
                                  match_ignoring=ignoring, run_variance=noise.run_variance)
    except (comparing.ResultsError, comparing.MatchError) as error:
        print(f"movebench compare: {error}", file=sys.stderr)
        return 2
    csv, page = comparing.write(frame, args.out or args.new, str(args.base), str(args.new), thresholds,
                                args.allow_different)
    print(f"movebench compare: NEW {args.new} against BASE {args.base}")
    if noise.run_variance:
        print(f"  run-to-run spread from the {len(args.noise_from)} runs {' '.join(args.noise_from)} "
              "(sd of a point's run effect, log scale; added to each launch-level test):")
        for key, r in noise.run_variance.items():
            print(f"    {key}: {r.sd:.3f} over {r.points} points ({r.df} df)")
    if noise.thresholds:
        print(f"  thresholds from the A/A pairs of {' '.join(args.noise_from)} "
              f"(exp({comparing.NOISE_Z} x RMS of the log ratios) - 1, never below --threshold's):")
        for key, n in noise.thresholds.items():
            print(f"    {key}: {n.threshold:.1%}{'' if n.raised else ' (the floor)'}, RMS log ratio "
                  f"{n.rms_log_ratio:.3f} over {n.points} ratios, largest x{n.largest_ratio:.3g}")
    for line in comparing.summary_lines(frame):
        print("  " + line)
    print(f"  wrote {page} and {csv}")
    return _fail_on("compare", args.fail_on, frame["verdict"])


def _fail_on(command: str, fail_on, found) -> int:
    """1 when any verdict `found` is one --fail-on names (spelled with dashes), saying which; else 0."""
    hit = sorted({v.replace("-", " ") for v in fail_on} & set(found))
    if hit:
        print(f"movebench {command}: failing (--fail-on): {', '.join(hit)}", file=sys.stderr)
        return 1
    return 0


def run_check(args) -> int:
    for path in (args.results, *args.also):
        if not Path(path).is_dir():
            print(f"movebench check: {path}: no such results folder", file=sys.stderr)
            return 2
    if args.also and not args.studies:
        print("movebench check: --with judges claims: name them with --studies", file=sys.stderr)
        return 2
    try:
        document = refs.load(args.references)
        frame = refs.check(args.results, document)
    except refs.ReferencesError as error:
        print(error.message(), file=sys.stderr)
        return 2
    except comparing.ResultsError as error:
        print(f"movebench check: {error}", file=sys.stderr)
        return 2
    out = Path(args.out or args.results)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "check.csv", index=False)
    print(f"movebench check: {args.results} against {args.references}")
    for line in refs.summary_lines(frame):
        print("  " + line)
    print(f"  wrote {out / 'check.csv'}")
    if args.studies:
        known = sorted({c["study"] for c in claims.load()["claims"]})
        unknown = sorted(set(args.studies) - set(known))
        if unknown:
            print(f"movebench check: --studies {', '.join(unknown)}: no such study; the claims file has "
                  + ", ".join(known), file=sys.stderr)
            return 2
        try:
            # the campaign's config, when named, states what no record holds (a node's link rate: per: link)
            config = campaign_config.load(args.configfile) if getattr(args, "configfile", None) else None
            judged = claims.check(args.results, studies=args.studies, also=args.also,
                                  links=claims.link_rates(config))
        except (ValueError, comparing.ResultsError, campaign_config.ConfigFileError) as error:
            print(f"movebench check: {error}", file=sys.stderr)
            return 2
        judged.to_csv(out / "claims.csv", index=False)
        counts = judged["status"].value_counts().to_dict()
        print(f"movebench check: the claims of {', '.join(args.studies)}"
              + (f" on {args.results} with {' '.join(args.also)}" if args.also else "") + ": "
              + ", ".join(f"{counts.get(s, 0)} {s}" for s in claims.STATUSES))
        for r in judged.itertuples():
            print(f"  {r.status.upper():15s} {r.id}: {r.evidence}")
        print(f"  wrote {out / 'claims.csv'}")
    return _fail_on("check", args.fail_on, frame["status"])
