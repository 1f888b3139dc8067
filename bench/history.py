"""History: how often the change-point detector cries wolf on A/A runs, how often it finds injected steps, and how
Apache Otava's defaults and ruptures' PELT do on the same series.

Run:
  .venv/bin/python bench/history.py                         # all of it: 10 campaigns (~7 min here), then the rest
  .venv/bin/python bench/history.py run /tmp/hist --runs 10  # the campaign (bench/history.yaml) 10 times: run-1..10
  .venv/bin/python bench/history.py analyse /tmp/hist/run-*/ # A/A false alarms and injected steps (seconds)
  .venv/bin/python bench/history.py resample /tmp/hist/run-*/ # the same runs redrawn into 10-30 run series (minutes)
  .venv/bin/python bench/history.py patterns                 # otava-test-data's patterns, no campaign (a minute)
  .venv/bin/python bench/history.py simulate                 # campaign-like series, no campaign (a few minutes)

`run OUT --runs N [--config bench/history.yaml]`: the campaign N times on this commit, one after the other, into
OUT/run-<i> (its results_dir), each with `snakemake --profile local`. bench/history.yaml has 24 points over
shuffle (uni, bidi, alltoall at 3 sizes), bcast (dense and sparse, pickle and buffer, 2 shapes) and io (posix and
mpiio, 3 patterns), 6 launches each, so each point-measure's series has N runs of launch-level estimates.

`analyse RUN_DIR...`: the runs, in the order given, added to a temporary store; then
- false alarms per 100 series: change points in the A/A series (one per point and primary measure: the units B/s,
  s and 1/s), none of which changed;
- precision, recall and F1 for steps of 1.25x, 1.5x and 2x injected at run 6 (index 5, the measure made worse in
  its direction from there on) into a copy of every series: the launch-level estimate and its interval scaled, as
  scaling every record of a point's launches scales them (the CI is of log launch medians); a hit is a change
  point within one run of run 6, any other change point a false one;
- the same series through Otava's defaults (apache-otava 0.8.0: compute_change_points, window 50, p 0.001, no
  minimum magnitude; one number per run) and ruptures 1.1.10's PELT (l2 cost, BIC penalty 2 sigma^2 log n, sigma
  from the median absolute successive difference), side by side;
Target: false alarms at most the nominal rate (history.detect.ALPHA, 1 per 100 series), recall >= 90% at 1.5x.
(`run-*/`, not `run-*`: `run` writes each run's config, run-<i>.yaml, beside its folder. The shell orders them
run-1, run-10, run-2, ...: that is the runs' order then; sort them by number for the campaigns' own order.)
`--at 4,5,6,7,8` puts the steps at those runs instead (a step at run 3 or 9 leaves fewer than MIN_SIZE runs on one
side: not findable by design); `--alpha` and `--min-size` set movebench's detector's; `--misses` names the series it
missed, and those with a false change point.

`resample RUN_DIR... [--lengths 10,20,30] [--draws 5]`: what more runs would give, with no more campaigns: each real
series' runs redrawn (with replacement, never the same run twice in a row, each with its own standard error) into
series of each length, A/A, then with the steps at the middle run. The noise is the real runs' (modes and outliers
included); what is lost is their order.

`simulate [--series 1000] [--runs 10]`: the same analysis on series drawn as a campaign's would be (3 launches a run,
each run's standard error estimated on 2 degrees of freedom, run-to-run noise beyond it of 0-2%): no campaign needed.

`patterns [--seeds 20]`: otava-test-data 0.1.9's generators (step, regression and fix, outlier, variance change,
banding, multiple changes, noise alone), each at lengths 30 and 60 with 5% noise, through the three detectors:
precision, recall, F1 (a hit within 2 points of a true change; outliers, banding and noise have none to find).
Our detector gets no per-run uncertainty there (the patterns have one number per point): the run-to-run variance
it estimates from the series is all it has.

Otava and ruptures run in a venv of their own (their pins clash with ours: Otava wants numpy < 2 on some
platforms), made on first use under .bench-otava/ (pip install apache-otava==0.8.0 ruptures==1.1.10
otava-test-data==0.1.9), or the Python named by --others-python.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from movebench.judging.history import analysis, detect, store  # noqa: E402
from movebench.judging.history import run as history_run  # noqa: E402

CONFIG = ROOT / "bench" / "history.yaml"
OTHERS_VENV = ROOT / ".bench-otava"
OTHERS_PINS = ["apache-otava==0.8.0", "ruptures==1.1.10", "otava-test-data==0.1.9"]
STEPS = (1.25, 1.5, 2.0)
#: run 6, counted from 1
STEP_AT = 5
PRIMARY_UNITS = {"B/s", "s", "1/s"}

# Runs in the other venv: reads {"series": [[...], ...]} on stdin, prints {"otava": [[idx...]], "pelt": [[...]]}.
OTHERS = r"""
import json, sys
import numpy as np
from otava.analysis import compute_change_points
import ruptures as rpt
series = json.load(sys.stdin)["series"]
out = {"otava": [], "pelt": []}
for s in series:
    y = np.asarray(s, dtype=float)
    cps, _ = compute_change_points(list(y))  # its defaults: window_len 50, max_pvalue 0.001, min_magnitude 0
    out["otava"].append(sorted(int(c.index) for c in cps))
    sigma = np.median(np.abs(np.diff(y))) / 0.6745 / np.sqrt(2) if len(y) > 2 else 0.0
    pen = 2 * max(sigma, 1e-12) ** 2 * np.log(len(y))
    bk = rpt.Pelt(model="l2", min_size=2, jump=1).fit(y.reshape(-1, 1)).predict(pen=pen) if len(y) >= 4 else [len(y)]
    out["pelt"].append([int(b) for b in bk[:-1]])
json.dump(out, sys.stdout)
"""

PATTERNS_SCRIPT = r"""
import json, sys
import numpy as np
import otava_test_data as otd
seeds, out = int(sys.argv[1]), []
for length in (30, 60):
    for seed in range(seeds):
        sig = 5.0
        made = {
            "step": otd.step_function(length, 100, 120, sigma=sig, seed=seed),
            "regression_fix": otd.regression_fix(length, 100, 130, regression_duration=max(3, length // 6), sigma=sig,
                                                 seed=seed),
            "outlier": otd.outlier(length, 100, 150, sigma=sig, seed=seed),
            "variance_change": otd.variance_change(length, 100, 2.0, 10.0, seed=seed),
            "banding": otd.banding(length, 100, 105, sigma=sig, seed=seed),
            "multiple_changes": otd.multiple_changes(length, [100, 115, 130, 145], sigma=sig, seed=seed),
            "noise_normal": otd.noise_normal(length, 100, sigma=sig, seed=seed),
        }
        for name, ts in made.items():
            truth = [cp.index for cp in ts.change_points if cp.change_type not in ("outlier", "variance")]
            out.append({"pattern": name, "length": length, "seed": seed, "y": [float(v) for v in ts.data],
                        "truth": truth})
json.dump(out, sys.stdout)
"""


def others_python(given: str | None) -> str:
    if given:
        return given
    python = OTHERS_VENV / "bin" / "python"
    if not python.exists():
        print(f"bench/history: making {OTHERS_VENV} ({' '.join(OTHERS_PINS)})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(OTHERS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *OTHERS_PINS], check=True)
    return str(python)


def others(series: list[list[float]], python: str) -> dict:
    proc = subprocess.run([python, "-c", OTHERS], input=json.dumps({"series": series}), capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def score(found: list[list[int]], truth: list[list[int]], tolerance: int) -> dict:
    """Precision, recall, F1 over many series: a true change is hit by the nearest unused change point within
    `tolerance`; the rest are false."""
    tp = fp = fn = 0
    for got, want in zip(found, truth, strict=True):
        left = list(got)
        for t in want:
            near = [g for g in left if abs(g - t) <= tolerance]
            if near:
                left.remove(min(near, key=lambda g: abs(g - t)))
                tp += 1
            else:
                fn += 1
        fp += len(left)
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}


def ours(series: list[detect.Series], alpha: float = detect.ALPHA, min_size: int = detect.MIN_SIZE) -> list[list[int]]:
    return [[c.index for c in detect.detect(_copy(s), alpha=alpha, min_size=min_size).changes] for s in series]


def _copy(s: detect.Series) -> detect.Series:
    """detect() writes its findings into the Series: the same A/A series goes through it once per setting"""
    return detect.Series(y=s.y, se=s.se, log=s.log, df=s.df)


def series_from_runs(folders: list[Path]) -> list[tuple[tuple, detect.Series, str]]:
    """(key, Series, better) of every primary point-measure in the runs, read through a temporary store as
    `history add` would write it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.duckdb"
        for i, folder in enumerate(folders):
            run = history_run.read(folder)
            # the order given is the runs' order, whatever their clocks said
            run.started = 1.8e9 + 86400 * i
            run.run_id = f"{i:04d}-{run.run_id}"
            store.add(path, run)
        _, estimates = store.load(path)
    out = []
    # a time of other work (shuffle's `iterations: auto` sets a loop count per run) is no series, as in `history`
    for key, group in analysis.series_groups(estimates):
        if group["unit"].iloc[0] not in PRIMARY_UNITS or len(group) != len(folders):
            continue
        out.append((key, analysis.series_of(group), str(group["better"].iloc[0])))
    return out


def injected(s: detect.Series, better: str, factor: float, at: int = STEP_AT) -> detect.Series:
    worse = factor if better == "lower" else 1 / factor
    shift = np.log(worse) if s.log else None
    y = s.y.copy()
    if s.log:
        y[at:] += shift
    else:
        y[at:] *= worse
    se = s.se if s.log else s.se * np.where(np.arange(len(y)) >= at, worse, 1.0)
    return detect.Series(y=y, se=se, log=s.log, df=s.df)


def raw_values(s: detect.Series) -> list[float]:
    return (np.exp(s.y) if s.log else s.y).tolist()


def analyse(folders: list[Path], python: str | None, with_others: bool = True, at=(STEP_AT,),
            alpha: float = detect.ALPHA, min_size: int = detect.MIN_SIZE, misses: bool = False) -> dict:
    found = series_from_runs(folders)
    if not found:
        raise SystemExit("bench/history: no primary point-measure measured in every run")
    print(f"{len(found)} series (point x primary measure) over {len(folders)} runs", flush=True)
    return evaluate(found, python, with_others, at=at, alpha=alpha, min_size=min_size, misses=misses)


def evaluate(found: list[tuple], python: str | None, with_others: bool = True, steps=STEPS, at=(STEP_AT,),
             alpha: float = detect.ALPHA, min_size: int = detect.MIN_SIZE, misses: bool = False) -> dict:
    """A/A false alarms per 100 series and precision / recall / F1 of steps injected at run 6 (or at each index of
    `at`), per detector; `alpha` and `min_size` are movebench's detector's; `misses` lists the series it missed."""
    aa = [s for _, s, _ in found]
    n_runs = len(aa[0].y)
    result = {"series": len(found), "runs": n_runs, "nominal_per_100": 100 * alpha}
    if (alpha, min_size) != (detect.ALPHA, detect.MIN_SIZE):
        print(f"  (movebench's detector at alpha {alpha:g}, min_size {min_size})")
    detectors = {"movebench": lambda ss: ours(ss, alpha, min_size)}
    if with_others:
        py = others_python(python)
        cache: dict[int, dict] = {}

        def other(name):
            def run(ss):
                key = id(ss)
                if key not in cache:
                    cache[key] = others([raw_values(s) for s in ss], py)
                return cache[key][name]
            return run
        detectors |= {"otava": other("otava"), "pelt": other("pelt")}
    for name, fn in detectors.items():
        got = fn(aa)
        false = sum(len(g) for g in got)
        hit = sum(bool(g) for g in got)
        result[f"{name}_aa"] = {"false_per_100_series": 100 * hit / len(aa), "false_change_points": false}
        print(f"  {name:10s} A/A: {hit} of {len(aa)} series with a false change point "
              f"({100 * hit / len(aa):.1f} per 100; nominal {100 * alpha:g}), {false} false change points")
        if misses and name == "movebench":
            for (key, _, _), g in zip(found, got, strict=True):
                if g:
                    print(f"    false: {_label(key)} at run {', '.join(str(i + 1) for i in g)}")
    for k in at:
        if not 0 < k < n_runs:
            print(f"  (a step at run {k + 1} needs runs on both sides of it: {n_runs} runs)")
            continue
        where = "" if k == STEP_AT else f" at run {k + 1}"
        for factor in steps:
            copies = [injected(s, better, factor, at=k) for _, s, better in found]
            truth = [[k]] * len(copies)
            for name, fn in detectors.items():
                got = fn(copies)
                sc = score(got, truth, tolerance=1)
                result[f"{name}_step_{factor}" + ("" if k == STEP_AT else f"_at_{k + 1}")] = sc
                print(f"  {name:10s} step x{factor}{where}: precision {sc['precision']:.2f} recall {sc['recall']:.2f} "
                      f"F1 {sc['f1']:.2f} ({sc['tp']} found, {sc['fn']} missed, {sc['fp']} false)")
                if misses and name == "movebench":
                    for (key, _, _), g in zip(found, got, strict=True):
                        if not any(abs(i - k) <= 1 for i in g):
                            print(f"    missed: {_label(key)}" + (f" (found at run {', '.join(str(i + 1) for i in g)})"
                                                                   if g else ""))
    return result


def _label(key) -> str:
    return " ".join(str(v) for v in key[1:]) if key else "(simulated)"


def patterns(seeds: int, python: str | None) -> dict:
    py = others_python(python)
    proc = subprocess.run([py, "-c", PATTERNS_SCRIPT, str(seeds)], capture_output=True, text=True, check=True)
    cases = json.loads(proc.stdout)
    series = [detect.Series(y=np.log(np.asarray(c["y"])), se=np.zeros(len(c["y"])), log=True) for c in cases]
    got = {"movebench": ours(series)}
    theirs = others([c["y"] for c in cases], py)
    got |= theirs
    result = {}
    names = sorted({c["pattern"] for c in cases})
    print(f"otava-test-data 0.1.9: {len(cases)} series ({seeds} seeds x lengths 30, 60), 5% noise; "
          "precision / recall / F1 (a hit within 2 points); false change points where there is none to find")
    print(f"  {'pattern':18s}" + "".join(f"{d:>26s}" for d in got))
    for name in names:
        idx = [i for i, c in enumerate(cases) if c["pattern"] == name]
        truth = [cases[i]["truth"] for i in idx]
        cells = []
        for det, found in got.items():
            sc = score([found[i] for i in idx], truth, tolerance=2)
            result[f"{name}/{det}"] = sc
            if sc["tp"] + sc["fn"]:
                cells.append(f"{sc['precision']:.2f} / {sc['recall']:.2f} / {sc['f1']:.2f}")
            else:
                cells.append(f"{sc['fp']} false in {len(idx)}")
        print(f"  {name:18s}" + "".join(f"{c:>26s}" for c in cells))
    return result


def simulate(series: int, runs: int, python: str | None, seed: int = 0, steps=STEPS) -> dict:
    """Campaign-like series with no campaign: each run 3 launches, its own standard error estimated on 2 degrees of
    freedom (the truth 0.3-1% a run), run-to-run noise beyond it of 0, 0.5, 1 or 2%; A/A, then the same series
    with steps at run 6."""
    rng = np.random.default_rng(seed)
    made = []
    for _ in range(series):
        sig = rng.uniform(0.003, 0.01, runs)
        se = detect.moderate(sig * np.sqrt(rng.chisquare(2, runs) / 2), np.full(runs, 2.0))
        tau = rng.choice([0.0, 0.005, 0.01, 0.02])
        made.append(detect.Series(y=rng.standard_normal(runs) * np.sqrt(sig**2 + tau**2), se=se, log=True,
                                  df=np.full(runs, 2.0)))
    print(f"simulated: {series} series of {runs} runs (3 launches a run, own standard error on 2 df, run-to-run "
          "noise 0-2%)", flush=True)
    return evaluate([(None, s, "lower") for s in made], python, steps=steps)


def resampled(s: detect.Series, length: int, rng: np.random.Generator) -> detect.Series:
    """A series of `length` runs drawn from `s`'s own runs with replacement, each with its estimate, standard error
    and degrees of freedom, no run drawn twice in a row (a repeat would be a successive difference of exactly 0, which
    no two real runs give, and would pull the run-to-run variance's estimate down)."""
    n = len(s.y)
    idx = [int(rng.integers(n))]
    for _ in range(length - 1):
        step = int(rng.integers(1, n))
        idx.append((idx[-1] + step) % n)
    idx = np.array(idx)
    return detect.Series(y=s.y[idx], se=s.se[idx], log=s.log, df=None if s.df is None else s.df[idx])


def resample(folders: list[Path], lengths, draws: int, steps, seed: int = 0, alpha: float = detect.ALPHA,
             misses: bool = False, min_size: int = detect.MIN_SIZE) -> dict:
    """What more runs would give: each real series' runs redrawn into series of each length (`draws` per series),
    A/A as drawn, then a step at the middle run. The runs' noise is the real one, outliers and modes included; what
    is lost is their order (a slow drift in the real runs becomes noise)."""
    found = series_from_runs(folders)
    rng = np.random.default_rng(seed)
    print(f"{len(found)} series over {len(folders)} runs, redrawn {draws} times each at each length; a step at the "
          "middle run", flush=True)
    result = {}
    for length in lengths:
        made = [(key, resampled(s, length, rng), better) for key, s, better in found for _ in range(draws)]
        aa = ours([s for _, s, _ in made], alpha, min_size)
        hit = sum(bool(g) for g in aa)
        row = {"aa_false_per_100_series": 100 * hit / len(made), "aa_series": len(made), "aa_false_series": hit}
        cells = [f"A/A {hit} of {len(made)} false ({100 * hit / len(made):.1f} per 100)"]
        named = {"A/A false": [_label(key) for (key, _, _), g in zip(made, aa, strict=True) if g]}
        at = length // 2
        for factor in steps:
            got = ours([injected(s, better, factor, at=at) for _, s, better in made], alpha, min_size)
            sc = score(got, [[at]] * len(made), tolerance=1)
            row[f"step_{factor}"] = sc
            cells.append(f"x{factor} recall {sc['recall']:.2f} ({sc['fp']} false)")
            named[f"x{factor} missed"] = [_label(key) for (key, _, _), g in zip(made, got, strict=True)
                                          if not any(abs(i - at) <= 1 for i in g)]
        result[length] = row
        print(f"  {length:3d} runs: " + "; ".join(cells), flush=True)
        if misses:
            for what, labels in named.items():
                for label in sorted(set(labels), key=lambda v: -labels.count(v)):
                    print(f"    {what}: {labels.count(label)} of {draws}: {label}")
    return result


def run_campaigns(out: Path, runs: int, config: Path) -> list[Path]:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    folders = []
    for i in range(1, runs + 1):
        results = out / f"run-{i}"
        cfg = yaml.safe_load(config.read_text())
        cfg["campaign"]["results_dir"] = str(results)
        cfg_file = out / f"run-{i}.yaml"
        cfg_file.write_text(yaml.safe_dump(cfg))
        print(f"bench/history: run {i} of {runs} into {results}", flush=True)
        subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(cfg_file), "run"], cwd=ROOT,
                       check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        folders.append(results)
    return folders


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--others-python", help="a Python with apache-otava, ruptures and otava-test-data")
    sub = parser.add_subparsers(dest="command")
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--config", type=Path, default=CONFIG)
    a = sub.add_parser("analyse")
    a.add_argument("runs", nargs="+", type=Path)
    a.add_argument("--no-others", action="store_true", help="movebench's detector only")
    a.add_argument("--json", type=Path)
    a.add_argument("--at", type=lambda t: [int(v) - 1 for v in t.split(",")], default=[STEP_AT],
                   help="the runs (counted from 1) where the steps start, e.g. 4,5,6,7,8 (default: 6)")
    a.add_argument("--alpha", type=float, default=detect.ALPHA,
                   help="movebench's detector's level (default: %(default)s)")
    a.add_argument("--min-size", type=int, default=detect.MIN_SIZE,
                   help="movebench's detector's fewest runs of a level (default: %(default)s)")
    a.add_argument("--misses", action="store_true", help="name the series movebench's detector missed or flagged")
    p = sub.add_parser("patterns")
    p.add_argument("--seeds", type=int, default=20)
    m = sub.add_parser("simulate")
    m.add_argument("--series", type=int, default=1000)
    m.add_argument("--runs", type=int, default=10)
    m.add_argument("--steps", type=lambda t: [float(v) for v in t.split(",")], default=list(STEPS),
                   help="the steps injected at run 6, e.g. 1.02,1.05,1.1 (default: 1.25,1.5,2)")
    rs = sub.add_parser("resample", help="the real runs redrawn into longer series: what more runs would give")
    rs.add_argument("runs", nargs="+", type=Path)
    rs.add_argument("--lengths", type=lambda t: [int(v) for v in t.split(",")], default=[10, 20, 30])
    rs.add_argument("--draws", type=int, default=5, help="series drawn per real series and length (default: 5)")
    rs.add_argument("--steps", type=lambda t: [float(v) for v in t.split(",")], default=list(STEPS))
    rs.add_argument("--seed", type=int, default=0)
    rs.add_argument("--alpha", type=float, default=detect.ALPHA)
    rs.add_argument("--min-size", type=int, default=detect.MIN_SIZE)
    rs.add_argument("--misses", action="store_true", help="name the series missed or flagged, with how often")
    rs.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run_campaigns(args.out, args.runs, args.config)
        return 0
    if args.command == "analyse":
        result = analyse(args.runs, args.others_python, with_others=not args.no_others, at=args.at, alpha=args.alpha,
                         min_size=args.min_size, misses=args.misses)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    if args.command == "resample":
        result = resample(args.runs, args.lengths, args.draws, args.steps, args.seed, args.alpha, args.misses,
                          args.min_size)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    if args.command == "patterns":
        patterns(args.seeds, args.others_python)
        return 0
    if args.command == "simulate":
        simulate(args.series, args.runs, args.others_python, steps=args.steps)
        return 0
    out = Path(tempfile.mkdtemp(prefix="movebench-history-bench-"))
    folders = run_campaigns(out, 10, CONFIG)
    analyse(folders, args.others_python)
    simulate(1000, 10, args.others_python)
    patterns(20, args.others_python)
    print(f"bench/history: runs kept in {out}; remove it with: rm -r {shutil.os.fspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
