"""Verdicts: how often they are wrong, how often they find a change, what they cost, and a real A/A and A/B.

Run:
  .venv/bin/python bench/verdict.py calibration            # synthetic lognormal records (about 30 s)
  .venv/bin/python bench/verdict.py aa [CONFIG]            # CONFIG (default config/config.yaml) run twice
  .venv/bin/python bench/verdict.py ab CONFIG NAME=VALUE   # run once plainly, once with an environment variable
  .venv/bin/python bench/verdict.py window [CONFIG|--small]  # the issue's benchmark: A, A again, and B with
                                                           # shuffle window 1 instead of 64; A/A and A/B verdicts
  .venv/bin/python bench/verdict.py window-verdicts A A2 B   # the same verdicts of three kept results folders

`window` runs CONFIG (default: the default campaign) twice and once more with shuffle's window 64
replaced by 1, then prints the verdict counts per family of A/A and of A/B (and of A/B again at the
thresholds the A/A pair's launch-to-launch spread asks for: `--noise-from`), the A/B matched with
`--match-ignoring window=64:1` (BASE's window-64 points against NEW's window-1 points; every other
family's points against themselves, as in A/A). `--small` runs a campaign of about a minute
instead (shuffle uni and bidi at 4 KiB and 256 KiB, windows 1 and 64, with its memcpy bounds).

`calibration` prints, per repetitions n, noise CV and true change, the share of comparisons judged
regressed or improved (the false-verdict rate when the change is 1.0, the detection rate otherwise)
with the power of the t-test on log values at the same 1% level beside it (the best any test can do
on lognormal data), and the cost of one comparison. `aa` and `ab` run real campaigns one after the
other with `python -m movebench run` into a temporary folder and print the verdict counts and the
CPUs other processes kept busy meanwhile (on a shared machine that load moves figures by more
than any threshold; quote A/A results only from a quiet machine).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]


def calibration(trials: int = 2000) -> None:
    from scipy import stats

    from movebench.core.verdict import compare_samples, verdict

    print(f"{'n':>3} {'CV':>5} {'change':>7} {'verdicts':>9} {'t-test':>7}  (share of {trials} comparisons "
          "judged regressed/improved; t-test: its power at 1%)")
    for n in (6, 10, 20, 40):
        for cv in (0.05, 0.10, 0.20):
            sigma = math.sqrt(math.log(1 + cv**2))
            for factor in (1.0, 1.05, 1.10, 1.20):
                rng = np.random.default_rng(1)
                base = rng.lognormal(0, sigma, (trials, n))
                new = rng.lognormal(0, sigma, (trials, n)) * factor
                hits = sum(verdict(compare_samples(b, x), "lower") in ("regressed", "improved")
                           for b, x in zip(base, new, strict=True))
                oracle = np.mean(stats.ttest_ind(np.log(new), np.log(base), axis=1).pvalue < 0.01)
                print(f"{n:>3} {cv:>5.2f} {factor:>7.2f} {hits / trials:>9.3f} {oracle:>7.3f}")
    rng = np.random.default_rng(2)
    for n in (10, 40):
        pairs = [(rng.lognormal(0, 0.1, n), rng.lognormal(0, 0.1, n)) for _ in range(5000)]
        t0 = time.perf_counter()
        for b, x in pairs:
            verdict(compare_samples(b, x), "lower")
        print(f"one comparison at n = {n}: {(time.perf_counter() - t0) / len(pairs) * 1e6:.0f} us")


def _run(config: dict, results: Path, env: dict | None = None) -> dict:
    config = {**config, "campaign": {**config["campaign"], "results_dir": str(results)}}
    path = results.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config))
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(path), "run"], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True)
    info = json.loads((results / "campaign_run.json").read_text())
    print(f"  {results.name}: {time.time() - t0:.0f} s, snakemake exit {proc.returncode}, "
          f"host load {info['host_load']}", flush=True)
    return info


def campaigns(config_path: str, env: dict | None) -> None:
    from movebench.judging import compare

    config = yaml.safe_load(Path(config_path).read_text())
    with tempfile.TemporaryDirectory(prefix="movebench-verdict-") as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        print(f"{config_path}: A" + (f", then B with {env}" if env else ", then the same again (A/A)"))
        _run(config, a)
        _run(config, b, env)
        frame = compare.compare(a, b)
        for line in compare.summary_lines(frame):
            print("  " + line)
        counts = frame.groupby(["family", "verdict"]).size().unstack(fill_value=0)
        print(counts.to_string())


#: `window --small`: the issue's benchmark at a size that proves it works in about a minute per campaign.
SMALL = {
    "campaign": {"name": "verdict-small", "repetitions": 10, "warmups": 2, "timeout": 300},
    "calibration": {"probes": ["memcpy"], "ranks": [2], "memcpy_sizes": ["4KiB", "256KiB"], "repetitions": 6,
                    "warmups": 1},
    "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], "nodes": [1], "message_sizes": ["4KiB", "256KiB"],
                "windows": [1, 64], "iterations": "auto", "repetition_time": 0.1},
}


def window_verdicts(a: Path, a2: Path, b: Path) -> None:
    """The verdict counts of A/A and of A/B (B's window 1 against A's 64), then A/B again at the thresholds the
    A/A pair's launch-to-launch spread asks for (`compare A B --noise-from A A2`)."""
    from movebench.judging import compare

    ignoring = compare.parse_match_ignoring(["window=64:1"])
    aa = compare.compare(a, a2)
    noise = compare.thresholds_from_noise(aa)
    at_noise = compare.with_noise(None, noise)
    for title, frame in (("A/A", aa),
                         ("A/B (compare A B --match-ignoring window=64:1)",
                          compare.compare(a, b, match_ignoring=ignoring)),
                         ("A/B at the A/A pair's thresholds (--noise-from A A2)",
                          compare.compare(a, b, at_noise, match_ignoring=ignoring))):
        print(f"\n{title}")
        for line in compare.summary_lines(frame):
            print("  " + line)
        counts = frame.groupby(["family", "verdict"]).size().unstack(fill_value=0)
        print(counts.to_string())
    print("\nthresholds from the A/A pair:")
    for key, n in noise.items():
        print(f"  {key} {n.threshold:.0%} (RMS log ratio {n.rms_log_ratio:.3f}, {n.points} points)")


def window(config_path: str | None) -> None:
    """A, A again, B with shuffle window 64 -> 1; the verdict counts of A/A and of A/B (matched ignoring window)."""
    import copy


    config = SMALL if config_path is None else yaml.safe_load(Path(config_path).read_text())
    changed = copy.deepcopy(config)
    windows = config["shuffle"].get("windows", [64])
    if 64 not in windows:
        sys.exit(f"shuffle.windows = {windows}: the benchmark replaces window 64 by 1, so the config needs 64")
    changed["shuffle"]["windows"] = sorted({1 if w == 64 else w for w in windows})
    with tempfile.TemporaryDirectory(prefix="movebench-verdict-") as tmp:
        a, a2, b = Path(tmp) / "a", Path(tmp) / "a2", Path(tmp) / "b"
        print(f"{config_path or 'SMALL'}: A, A again, then B with shuffle.windows {changed['shuffle']['windows']} "
              f"instead of {windows}", flush=True)
        loads = [_run(config, a), _run(config, a2), _run(changed, b)]
        window_verdicts(a, a2, b)
        busy = [info["host_load"]["other_cpus"] for info in loads if info.get("host_load")]
        if busy:
            print(f"\nother processes kept {min(busy):.2f}-{max(busy):.2f} of the host's CPUs busy during the "
                  "campaigns (campaign_run.json host_load.other_cpus); quote verdicts only from a quiet host")


def main(argv) -> int:
    if not argv or argv[0] == "calibration":
        calibration()
    elif argv[0] == "aa":
        campaigns(argv[1] if len(argv) > 1 else str(ROOT / "config" / "config.yaml"), None)
    elif argv[0] == "window-verdicts" and len(argv) == 4:
        window_verdicts(*map(Path, argv[1:]))
    elif argv[0] == "window" and len(argv) <= 2:
        small = len(argv) == 2 and argv[1] == "--small"
        window(None if small else (argv[1] if len(argv) == 2 else str(ROOT / "config" / "config.yaml")))
    elif argv[0] == "ab" and len(argv) == 3 and "=" in argv[2]:
        name, _, value = argv[2].partition("=")
        campaigns(argv[1], {name: value})
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
