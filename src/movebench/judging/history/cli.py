"""`python -m movebench history`: add campaign runs to a store, list change points, draw the history page."""

from __future__ import annotations

import argparse
import sys

from movebench.judging.history import detect, store

#: the store when --store is not given (relative to the working directory)
DEFAULT_STORE = "history.duckdb"

DESCRIPTION = """Every campaign a run in a history store (a DuckDB file: `duckdb history.duckdb` opens it with SQL),
and change points across runs: on each campaign's, family's, point's and measure's series of launch-level
estimates, each run weighted by its own uncertainty. A series with no change gets a false change point at most
ALPHA of the time (default 1%); each change point comes with its size (the new level over the old, a ratio) and
95% interval, the runs where it may have happened, and the fingerprint fields that changed there (commit, MPI
library, stack, transport, hosts, CPU model, kernel, package versions). A campaign adds itself at its end when
campaign.history names a store. docs/history.md has a worked example."""


def add_parser(sub) -> dict:
    p = sub.add_parser("history", help="campaign runs in a store: change points across runs, history.html",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    hist = p.add_subparsers(dest="history_command", required=True)
    a = hist.add_parser("add", help="add finished campaigns' results folders to the store, then redraw its page",
                        description="Add each RESULTS folder (a finished campaign: campaign_run.json and tables/) "
                        "as one run. A run already in the store is stored once. Writers wait for each other (a "
                        "lock file beside the store), so campaigns ending at once all land; a file that is not a "
                        "movebench store of this version is refused and left as it is.")
    a.add_argument("results", nargs="+", help="results folders of finished campaigns")
    a.add_argument("--store", default=DEFAULT_STORE, help="the store (default: %(default)s; created when missing)")
    a.add_argument("--no-page", action="store_true", help="leave the history page (STORE with .html) as it is")
    c = hist.add_parser("changes", help="list the change points; --fail-on regression for nightly CI",
                        description="Every change point of every series in the store, one line each.")
    c.add_argument("--store", default=DEFAULT_STORE, help="the store (default: %(default)s)")
    c.add_argument("--alpha", type=_alpha, default=detect.ALPHA,
                   help="the chance of a false change point in a series with none (default: %(default)s)")
    c.add_argument("--fail-on", choices=["regression"], action="append", default=[],
                   help="regression: exit 1 when a series' newest runs started a worse level (its last change "
                   "point goes the bad way and its first new run is among the newest 3)")
    g = hist.add_parser("page", help="write the history page", description="history.html from the store.")
    g.add_argument("--store", default=DEFAULT_STORE, help="the store (default: %(default)s)")
    g.add_argument("--out", help="the page (default: STORE with .html)")
    g.add_argument("--alpha", type=_alpha, default=detect.ALPHA, help="as for changes (default: %(default)s)")
    return {"history": run}


def _alpha(text: str) -> float:
    value = float(text)
    if not 0 < value <= detect.ALPHA_CEILING:
        raise argparse.ArgumentTypeError(f"--alpha {text}: must lie in (0, {detect.ALPHA_CEILING}]")
    return value


def run(args) -> int:
    from movebench.judging.history import analysis, page
    from movebench.judging.history import run as runs

    try:
        if args.history_command == "add":
            for folder in args.results:
                found = runs.read(folder)
                added = store.add(args.store, found)
                print(f"movebench history: {folder}: {'added' if added else 'already in'} {args.store} "
                      f"(run {found.run_id}, campaign {found.campaign}, {len(found.estimates)} point-measures)")
            if not args.no_page:
                print(f"movebench history: page at {page.render(args.store)}")
            return 0
        if args.history_command == "page":
            print(f"movebench history: page at {page.render(args.store, args.out, alpha=args.alpha)}")
            return 0
        _, estimates = store.load(args.store)
        results = analysis.analyse(estimates, alpha=args.alpha)
        rows = analysis.change_rows(results)
        print(f"{len(results)} series, {len(rows)} change point(s) at alpha {args.alpha}")
        for r in rows:
            size = (f"x{r['size']:.3g} [{r['size_low']:.3g}, {r['size_high']:.3g}]" if r["scale"] == "ratio"
                    else f"{r['size']:+.3g} [{r['size_low']:+.3g}, {r['size_high']:+.3g}]")
            print(f"  {r['direction']:6s} {r['campaign']} {r['family']} {r['point']} {r['measure']}: {size} from "
                  f"run {r['run']} ({r['started']:%Y-%m-%d %H:%M}){' recent' if r['recent'] else ''}"
                  f"{'; changed: ' + r['changed'] if r['changed'] else ''}")
        bad = analysis.regressions(results) if "regression" in args.fail_on else []
        if bad:
            print(f"movebench history: {len(bad)} series started a worse level in their newest runs", file=sys.stderr)
            return 1
        return 0
    except (store.StoreError, runs.RunError) as exc:
        print(f"movebench: {exc}", file=sys.stderr)
        return 2
