"""Sensitivity: how sensitive and how honest the default campaign's verdicts are, on one commit.

Run (a default campaign, config/config.yaml, takes about 5 minutes here; `--small` one of about a minute):
  .venv/bin/python bench/sensitivity.py run /tmp/sens/after --runs 3            # the working tree: 3 runs, ~15 min
  .venv/bin/python bench/sensitivity.py run /tmp/sens/before --runs 3 --commit 5b4d0d8   # that commit: ~15 min
  .venv/bin/python bench/sensitivity.py run /tmp/sens/after --runs 1 --busy intermittent # after/intermittent-1, ~5 min
  .venv/bin/python bench/sensitivity.py analyse /tmp/sens/after/run-* --json /tmp/sens/after.json   # seconds
  .venv/bin/python bench/sensitivity.py analyse /tmp/sens/after/run-* /tmp/sens/after/intermittent-1
  .venv/bin/python bench/sensitivity.py compare-before-after /tmp/sens/before.json /tmp/sens/after.json
  .venv/bin/python bench/sensitivity.py run /tmp/sens/smoke --runs 2 --small       # smoke test, ~2 x 1 min
  .venv/bin/python bench/sensitivity.py          # all of it (both commits, quiet and busy runs): about an hour

`run OUT [--commit REV] [--runs 3] [--busy none|intermittent|steady] [--busy-run 1] [--small] [--label L]` runs
the campaign `--runs` times one after the other, into OUT/<label>-<i>/ (its results_dir; the config beside it
as OUT/<label>-<i>.yaml), i = 1..runs, label "run" (or the busy kind with --busy), and prints each run's wall
time and host_load (campaign_run.json). `--commit REV` runs that commit's code and config instead of the
working tree's: a detached `git worktree` at OUT/src-REV, run from there with PYTHONPATH=OUT/src-REV/src
first (the venv is the same; the script refuses to go on unless `movebench.__file__` resolves into the
worktree). `--busy intermittent` keeps one core busy (a tight loop) for 3 s of every 10 s during the whole of
run number `--busy-run`; `--busy steady` holds a quarter of one core (busy 25 ms, sleep 75 ms). The load is a
separate Python process this script starts before the campaign and stops after it, not a child of the
campaign, so host_load counts it as other processes' CPU.

`analyse RUN_DIR [RUN_DIR ...] [--inject 2,1.25] [--json FILE]` reads kept results folders and prints:
- A/A false verdicts: `movebench.judging.compare.compare(A, B)` with the CLI's defaults (no --noise-from) for every
  unordered pair; regressed + improved over the judged rows (only in base / only in new / not comparable
  left out), per family, per pair and pooled;
- rerun-interval coverage: per point-measure of each run's tables/<family>_summary.csv, the share of the other
  runs' medians inside this run's [rerun_low, rerun_high], and inside [ci_low, ci_high];
- minimum detectable change: the median of compare's `mdc` over the judged rows, per family, per pair, and
  pooled over the pairs for each family and for the sensitive subset;
- disturbed launches, per run: from the launch metas, the launches measured again (`disturbed_attempts`: the
  attempts discarded), those kept although disturbed (`disturbed`: no retry left), the largest
  `host_load.other_cpus`, and from the summaries the disturbed launches left out of the statistics
  (`launches_left_out`); "not recorded" where the metas carry none of these keys (older commits);
- power by injection: for each k, run B's results folder copied to a temporary folder, every measure of
  every point of its records tables (tables/<family>.parquet, what compare reads; the csv too) made k times
  worse in the measure's direction, and A compared against it; the share judged regressed of the judged
  point-measures, per family and in the sensitive subset (shuffle uni/bidi/alltoall >= 64 KiB; io
  posix/mpiio >= 4 MiB per process; bcast payloads >= 1 MiB, sparse by its CSR bytes from the records'
  `payload_bytes`, dense by shape x dtype);
- the targets with PASS/MISS: false verdicts <= 2%; reruns inside the rerun interval >= 90%; CI holding the
  other runs' medians >= 90%; 2x found on >= 95% of every family; 1.25x on >= 90% of the subset; median mdc
  <= 15% in the subset and <= 30% in every family.
Only the primary measures count (the spec's bandwidth, time and rate measures: units B/s, s and 1/s); memory
and bookkeeping measures (bytes, imbalance, efficiency, retries) are left out, their false verdicts printed
on one line of their own. Pairs and injections are every unordered pair (A the earlier folder on the command
line, B the later). It takes seconds.

`analyse` judges with the movebench it imports: the working tree's. For a commit's runs judged by that commit's
own compare, put its worktree first: `PYTHONPATH=/tmp/sens/before/src-5b4d0d8/src .venv/bin/python
bench/sensitivity.py analyse /tmp/sens/before/run-* --json /tmp/sens/before.json` (the first line printed names
the movebench that judged).

`compare-before-after BEFORE_JSON AFTER_JSON` prints two analyses (`analyse --json`) side by side.

With no arguments: the whole benchmark into a new folder under the system temp folder: the commit before
(5b4d0d8) and the working tree, 3 quiet runs each, then one intermittent-busy and one steady-busy run each,
then the analyses of the quiet runs and of the quiet runs with the busy ones (each side judged by its own
code), and both side by side: 10 default campaigns, about an hour. Run it on an otherwise quiet machine: other
work shows in host_load and in every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "5b4d0d8"
#: Units of the measures that count: bandwidths, times, rates (memory, shares and counts are bookkeeping).
PRIMARY_UNITS = ("B/s", "s", "1/s")
KIB, MIB = 1024, 1024 * 1024
#: The issue's targets: (key, comparison, bound, what it says).
FALSE_MAX, RERUN_MIN, CI_MIN, POWER_2_MIN, POWER_125_MIN, MDC_SUBSET_MAX, MDC_FAMILY_MAX = (
    0.02, 0.90, 0.90, 0.95, 0.90, 0.15, 0.30)

#: `--small`: a campaign of about a minute (as bench/verdict.py's window --small), in 3 launches, so that every
#: statistic above has something to work on: shuffle uni and bidi at 4 KiB and 256 KiB, a dense bcast below and
#: above 1 MiB, a posix io point of 4 MiB, and memcpy's bounds.
SMALL = {
    "campaign": {"name": "sensitivity-small", "launches": 3, "repetitions": 6, "warmups": 1, "timeout": 300},
    "calibration": {"probes": ["memcpy"], "ranks": [2], "memcpy_sizes": ["4KiB", "256KiB"], "repetition_time": 0.02,
                    "repetitions": 6, "warmups": 1, "launch_groups": True},
    "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], "nodes": [1], "message_sizes": ["4KiB", "256KiB"],
                "windows": [64], "iterations": "auto", "repetition_time": 0.05, "launch_groups": True},
    "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[100, 100], [1000, 1000]], "dtypes": ["float64"],
              "ranks": [2], "nodes": [1], "launch_groups": True},
    "io": {"patterns": ["sfsw"], "backends": ["posix"], "size_per_proc": ["4MiB"], "ranks": [2], "nodes": [1],
           "block_size": "4MiB", "range_size": "4MiB", "launch_groups": True},
}

# The outside load: a separate Python process (started with its own session, stopped by its pid).
BUSY_CODE = {
    "intermittent": "import time\nwhile True:\n    end = time.monotonic() + 3\n"
                    "    while time.monotonic() < end:\n        pass\n    time.sleep(7)\n",
    # 25 ms of its own CPU time, then 75 ms asleep: a quarter of a core even where it waits for one
    "steady": "import time\nwhile True:\n    end = time.process_time() + 0.025\n"
              "    while time.process_time() < end:\n        pass\n    time.sleep(0.075)\n",
}


# --- run ---


def _worktree(out: Path, rev: str) -> Path:
    """A detached worktree of `rev` at OUT/src-REV (reused when it is there at that commit)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True)
    if sha.returncode:
        sys.exit(f"sensitivity: {rev!r} is not a commit of {ROOT}: {sha.stderr.strip()}")
    sha = sha.stdout.strip()
    tree = out / f"src-{rev}"
    if tree.exists():
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip()
        if head != sha:
            sys.exit(f"sensitivity: {tree} exists at {head or 'no commit'}, not {sha}: remove it "
                     f"(git worktree remove --force {tree})")
        return tree
    done = subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode:
        sys.exit(f"sensitivity: git worktree add failed: {done.stderr.strip()}")
    print(f"worktree of {rev} ({sha[:12]}) at {tree} (remove it later: git worktree remove --force {tree})")
    return tree


def _source(out: Path, commit: str | None) -> tuple[Path, dict]:
    """(the folder to run from, the environment) for the working tree or `commit`'s worktree; refuses to go on
    when movebench would not be imported from that folder."""
    if commit is None:
        return ROOT, {}
    tree = _worktree(out, commit)
    env = {"PYTHONPATH": os.pathsep.join([str(tree / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if not (tree / ".node").exists() and (ROOT / ".node").is_dir():
        env["MOVEBENCH_NODE_PREFIX"] = str(ROOT / ".node")  # Azurite as installed here, not npm again
    found = subprocess.run([sys.executable, "-c", "import movebench; print(movebench.__file__)"], cwd=tree,
                           env={**os.environ, **env}, capture_output=True, text=True).stdout.strip()
    if not found or not Path(found).resolve().is_relative_to((tree / "src").resolve()):
        sys.exit(f"sensitivity: with PYTHONPATH={env['PYTHONPATH']} movebench is imported from {found or 'nowhere'}, "
                 f"not from {tree / 'src'}: refusing to measure the wrong code")
    print(f"movebench from {found}")
    return tree, env


def _busy_start(kind: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", BUSY_CODE[kind]], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"  outside load {kind} started (pid {proc.pid})", flush=True)
    return proc


def _busy_stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _run(config: dict, results: Path, cwd: Path, env: dict, busy: str | None) -> dict:
    """One campaign into `results` (its results_dir), as bench/verdict.py's `_run`, with an outside load when asked."""
    config = {**config, "campaign": {**config["campaign"], "results_dir": str(results)}}
    path = results.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config))
    load = _busy_start(busy) if busy else None
    t0 = time.time()
    try:
        proc = subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(path), "run"], cwd=cwd,
                              env={**os.environ, **env}, capture_output=True, text=True)
    finally:
        if load is not None:
            _busy_stop(load)
    wall = time.time() - t0
    run_file = results / "campaign_run.json"
    info = json.loads(run_file.read_text()) if run_file.exists() else {}
    (results.parent / f"{results.name}.log").write_text(proc.stdout + proc.stderr)
    print(f"  {results.name}: {wall:.0f} s ({info.get('wall_s', float('nan')):.0f} s in the campaign), snakemake "
          f"exit {proc.returncode}, busy {busy or 'none'}, host load {info.get('host_load', 'not recorded')}",
          flush=True)
    if not info:
        print(f"  {results.name}: no campaign_run.json; the last lines of its output "
              f"({results.parent / (results.name + '.log')}):\n" +
              "\n".join("    " + line for line in (proc.stdout + proc.stderr).splitlines()[-15:]), flush=True)
    return {"wall_s": wall, "returncode": proc.returncode, "busy": busy, "host_load": info.get("host_load")}


def run(out, commit: str | None = None, runs: int = 3, busy: str = "none", busy_run: int = 1, small: bool = False,
        label: str | None = None) -> list[Path]:
    out = Path(out).absolute()
    busy = None if busy == "none" else busy
    if busy and not 1 <= busy_run <= runs:
        sys.exit(f"sensitivity: --busy-run {busy_run} is not one of the runs 1..{runs}")
    label = label or busy or "run"
    folders = [out / f"{label}-{i}" for i in range(1, runs + 1)]
    taken = [str(f) for f in folders if f.exists()]
    if taken:
        sys.exit(f"sensitivity: {', '.join(taken)} already exist: name another OUT or --label (or remove them)")
    out.mkdir(parents=True, exist_ok=True)
    cwd, env = _source(out, commit)
    config = SMALL if small else yaml.safe_load((cwd / "config" / "config.yaml").read_text())
    print(f"{'SMALL' if small else cwd / 'config' / 'config.yaml'} on {commit or 'the working tree'}: {runs} run(s) "
          f"into {out}/{label}-<i>" + (f", run {busy_run} with the {busy} outside load" if busy else ""), flush=True)
    for i, results in enumerate(folders, start=1):
        info = _run(config, results, cwd, env, busy if busy and i == busy_run else None)
        (out / f"{results.name}.sensitivity.json").write_text(json.dumps(
            {"commit": commit or "working tree", "small": small, **info}, indent=2) + "\n")
    return folders


# --- analyse ---


def results_folder(path) -> Path:
    """A results folder (tables/ or raw/ in it), or a folder holding one as results/."""
    path = Path(path)
    if not (path / "tables").is_dir() and not (path / "raw").is_dir() and (path / "results").is_dir():
        return path / "results"
    return path


def primary_measures(family: str) -> set[str]:
    """The family's bandwidth, time and rate measures (its spec's, by unit)."""
    try:
        from movebench import families

        return {m.name for m in families.load(family).measures if m.unit in PRIMARY_UNITS}
    except ImportError:
        return {"bandwidth_Bps", "elapsed_s"}


def _params(point: str) -> dict[str, str]:
    return dict(seg.partition("~")[::2] for seg in str(point).split("/") if "~" in seg)


def _size(text) -> int | None:
    from movebench.core.sizes import parse_size

    try:
        return parse_size(int(float(text)) if str(text).replace(".", "", 1).isdigit() else str(text))
    except (ValueError, TypeError):
        return None


def dense_bytes(params: dict) -> int | None:
    try:
        from movebench.families.bcast import ITEM_BYTES, parse_shape

        return math.prod(parse_shape(params["shape"])) * ITEM_BYTES[params["dtype"]]
    except (ImportError, KeyError, ValueError):
        return None


def payloads(records: pd.DataFrame) -> dict[str, int]:
    """bcast point -> the bytes one receiver gets (the kernel's `payload_bytes`: CSR bytes for sparse)."""
    if records.empty or "payload_bytes" not in records.columns or "family" not in records.columns:
        return {}
    rows = records[(records["family"] == "bcast") & records["payload_bytes"].notna()]
    return {p: int(v) for p, v in rows.groupby("point")["payload_bytes"].first().items()}


def sensitive(family: str, point: str, payload: dict[str, int] | None = None) -> bool:
    """The issue's sensitive subset: shuffle uni/bidi/alltoall >= 64 KiB, io posix/mpiio >= 4 MiB per process,
    bcast >= 1 MiB of payload (sparse only where the records give its CSR bytes)."""
    params = _params(point)
    if family == "shuffle":
        size = _size(params.get("message_size"))
        return params.get("pattern") in ("uni", "bidi", "alltoall") and size is not None and size >= 64 * KIB
    if family == "io":
        size = _size(params.get("size_per_proc"))
        return params.get("backend") in ("posix", "mpiio") and size is not None and size >= 4 * MIB
    if family == "bcast":
        got = (payload or {}).get(point)
        if got is None and params.get("kind", "dense") == "dense":
            got = dense_bytes(params)
        return got is not None and got >= MIB
    return False


def _judged(frame: pd.DataFrame) -> pd.DataFrame:
    from movebench.judging import compare

    if frame.empty:
        return frame
    return frame[~frame["verdict"].isin((compare.ONLY_BASE, compare.ONLY_NEW, compare.NOT_COMPARABLE))]


def _primary(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    keep = frame.apply(lambda r: r["measure"] in primary_measures(r["family"]), axis=1)
    return frame[keep.astype(bool)]


def _subset(frame: pd.DataFrame, payload: dict) -> pd.DataFrame:
    if frame.empty:
        return frame
    keep = frame.apply(lambda r: sensitive(r["family"], r["point"], payload), axis=1)
    return frame[keep.astype(bool)]


def false_verdicts(frame: pd.DataFrame) -> dict[str, dict]:
    """Per family and "total": judged point-measures and those judged regressed or improved."""
    judged = _judged(frame)
    out = {}
    for family, rows in judged.groupby("family", sort=True):
        out[family] = {"judged": len(rows), "false": int(rows["verdict"].isin(("regressed", "improved")).sum())}
    out["total"] = {"judged": sum(v["judged"] for v in out.values()), "false": sum(v["false"] for v in out.values())}
    return out


def _summaries(folder: Path) -> pd.DataFrame:
    frames = []
    for file in sorted((folder / "tables").glob("*_summary.csv")):
        try:
            frame = pd.read_csv(file)
        except pd.errors.EmptyDataError:
            continue
        if len(frame):
            frames.append(frame.assign(family=file.name.removesuffix("_summary.csv")))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["family", "point", "measure"])


def coverage(summaries: list[pd.DataFrame]) -> dict[str, dict]:
    """Per family and "total": of every other run's median of a point-measure, how many fall inside this run's
    [rerun_low, rerun_high] and inside [ci_low, ci_high] (ordered pairs of runs; rows without an interval,
    e.g. one launch, are counted in `no_rerun`)."""
    keyed = []
    for frame in summaries:
        frame = _primary(frame)
        keyed.append({(r["family"], r["point"], r["measure"]): r for r in frame.to_dict("records")})
    out: dict[str, dict] = {}
    for i, mine in enumerate(keyed):
        for key, row in mine.items():
            counts = out.setdefault(key[0], {"rerun_n": 0, "rerun_in": 0, "ci_n": 0, "ci_in": 0, "no_rerun": 0})
            for j, other in enumerate(keyed):
                if i == j or key not in other or pd.isna(other[key].get("median")):
                    continue
                median = float(other[key]["median"])
                low, high = row.get("rerun_low"), row.get("rerun_high")
                if low is None or high is None or pd.isna(low) or pd.isna(high):
                    counts["no_rerun"] += 1
                else:
                    counts["rerun_n"] += 1
                    counts["rerun_in"] += int(float(low) <= median <= float(high))
                low, high = row.get("ci_low"), row.get("ci_high")
                if low is not None and high is not None and not pd.isna(low) and not pd.isna(high):
                    counts["ci_n"] += 1
                    counts["ci_in"] += int(float(low) <= median <= float(high))
    out["total"] = {k: sum(v[k] for v in out.values()) for k in ("rerun_n", "rerun_in", "ci_n", "ci_in", "no_rerun")}
    return out


def _median_mdc(frame: pd.DataFrame) -> float | None:
    if frame.empty or "mdc" not in frame.columns:
        return None
    values = pd.to_numeric(frame["mdc"], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def mdc_by_family(frames: list[pd.DataFrame], payload: dict) -> dict[str, float | None]:
    """The median `mdc` of the judged primary rows of `frames` (pooled), per family and for the subset."""
    parts = [_primary(_judged(f)) for f in frames if len(f)]
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if rows.empty:
        return {}
    out = {family: _median_mdc(part) for family, part in rows.groupby("family", sort=True)}
    out["subset"] = _median_mdc(_subset(rows, payload))
    return out


def disturbed(folder: Path) -> dict:
    """What the launch metas say about outside load: launches kept although disturbed (`disturbed`: no retry was
    left), launches measured again (`disturbed_attempts`: the disturbed attempts, discarded), the largest
    `host_load.other_cpus` of any attempt, and the disturbed launches the statistics left out (the summaries'
    `launches_left_out`: a point with enough quiet launches drops its disturbed ones). `recorded` is False when no
    meta carries any of them (commits before launches watched their load); `left_out` None when no summary says."""
    metas = sorted((folder / "raw").rglob("*.meta.json"))
    out = {"launches": len(metas), "recorded": False, "disturbed": 0, "retried": 0, "attempts_redone": 0,
           "left_out": None, "max_other_cpus": None}
    loads = []
    for path in metas:
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not any(k in meta for k in ("disturbed", "disturbed_attempts", "host_load")):
            continue
        out["recorded"] = True
        attempts = meta.get("disturbed_attempts") or []
        out["disturbed"] += int(bool(meta.get("disturbed")))
        out["retried"] += int(bool(attempts))
        out["attempts_redone"] += len(attempts)
        for load in [meta.get("host_load"), *[a.get("host_load", a) for a in attempts if isinstance(a, dict)]]:
            if isinstance(load, dict) and isinstance(load.get("other_cpus"), (int, float)):
                loads.append(float(load["other_cpus"]))
    out["max_other_cpus"] = max(loads) if loads else None
    summaries = _summaries(folder)
    if "launches_left_out" in summaries.columns:
        per_point = summaries.drop_duplicates(["family", "point"])["launches_left_out"]
        out["left_out"] = int(pd.to_numeric(per_point, errors="coerce").fillna(0).sum())
    return out


def _launch_line(d: dict) -> str:
    if not d["recorded"]:
        return "not recorded"
    peak = "n/a" if d["max_other_cpus"] is None else f"{d['max_other_cpus']:.2f}"
    left = "not recorded" if d["left_out"] is None else d["left_out"]
    return (f"{d['launches']} point-launches: {d['retried']} retried ({d['attempts_redone']} disturbed attempts "
            f"measured again), {d['disturbed']} kept marked disturbed (no retry left), {left} left out of the "
            f"statistics; max other_cpus {peak}")


def inject(folder: Path, factor: float, into: Path) -> Path:
    """A copy of results `folder` at `into` whose every point is `factor` times worse in every measure compare judges
    (higher-is-better divided, lower-is-better multiplied), in the records tables compare reads."""
    from movebench.judging import compare

    shutil.copytree(folder, into, ignore=shutil.ignore_patterns("logs", "*.html"))
    tables = into / "tables"
    tables.mkdir(exist_ok=True)
    names = {p.stem for p in tables.glob("*.parquet")} | {p.name for p in (into / "raw").glob("*") if p.is_dir()}
    for name in sorted(names):
        parquet = tables / f"{name}.parquet"
        if parquet.exists():
            frame = pd.read_parquet(parquet)
        else:  # compare would read the raw records: write what it would read, changed, where it looks first
            from movebench.core.layout import ResultsLayout
            from movebench.engine import aggregate

            raw = ResultsLayout(into).raw
            frame = aggregate.load(name, sorted((raw / name).rglob("*.jsonl")), raw)
        for measure in compare.measures_of(name, frame.columns):
            better = compare.direction(name, measure)
            values = pd.to_numeric(frame[measure], errors="coerce")
            frame[measure] = values / factor if better == "higher" else values * factor
        frame.to_parquet(parquet, index=False)
        if (tables / f"{name}.csv").exists():
            frame.to_csv(tables / f"{name}.csv", index=False)
    return into


def power(frame: pd.DataFrame, payload: dict) -> dict[str, dict]:
    """Per family and "subset": judged primary point-measures and those judged regressed."""
    judged = _primary(_judged(frame))
    out = {}
    for family, rows in judged.groupby("family", sort=True):
        out[family] = {"judged": len(rows), "regressed": int((rows["verdict"] == "regressed").sum())}
    sub = _subset(judged, payload)
    out["subset"] = {"judged": len(sub), "regressed": int((sub["verdict"] == "regressed").sum())}
    return out


def _share(n: int, d: int) -> float | None:
    return n / d if d else None


def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _add(into: dict, counts: dict) -> None:
    for family, c in counts.items():
        slot = into.setdefault(family, dict.fromkeys(c, 0))
        for k, v in c.items():
            slot[k] = slot.get(k, 0) + v


def targets(metrics: dict, families: list[str], injected: list[float]) -> list[dict]:
    """The issue's targets, each with its value and whether it holds (None: not measured)."""
    rows = []

    def target(name, value, bound, at_most):
        ok = None if value is None else (value <= bound if at_most else value >= bound)
        rows.append({"name": name, "value": value, "bound": bound, "at_most": at_most, "pass": ok})

    target("false verdicts (A/A), total", metrics.get("false.total"), FALSE_MAX, True)
    target("other runs' medians inside the rerun interval", metrics.get("rerun.total"), RERUN_MIN, False)
    target("other runs' medians inside the CI", metrics.get("ci.total"), CI_MIN, False)
    for family in families:
        target(f"2x found regressed, {family}", metrics.get(f"inject.2.{family}"), POWER_2_MIN, False)
    target("1.25x found regressed, subset", metrics.get("inject.1.25.subset"), POWER_125_MIN, False)
    target("median mdc, subset", metrics.get("mdc.subset"), MDC_SUBSET_MAX, True)
    for family in families:
        target(f"median mdc, {family}", metrics.get(f"mdc.{family}"), MDC_FAMILY_MAX, True)
    if 2.0 not in injected:
        rows = [r for r in rows if not r["name"].startswith("2x")]
    if 1.25 not in injected:
        rows = [r for r in rows if not r["name"].startswith("1.25x")]
    return rows


def _mark(row: dict) -> str:
    return "not measured" if row["pass"] is None else ("PASS" if row["pass"] else "MISS")


def _k(factor: float) -> str:
    return f"{factor:g}"


def analyse(folders, inject_factors=(2.0, 1.25), json_path=None) -> dict:
    from movebench.judging import compare

    # `run-*` also matches the files beside each folder (run-1.yaml, run-1.log, run-1.sensitivity.json)
    folders = [results_folder(f) for f in folders if Path(f).is_dir()]
    import movebench

    print(f"verdicts by {Path(movebench.__file__).parent}")
    if len(folders) < 2:
        sys.exit("sensitivity analyse: give two run folders or more (one campaign run several times)")
    names = [str(f) for f in folders]
    results = [compare.read_results(f) for f in folders]
    payload: dict[str, int] = {}
    for res in results:
        payload.update(payloads(res.records))
    bcast_points = {p for res in results if not res.records.empty
                    for p in res.records.loc[res.records["family"] == "bcast", "point"].unique()}
    sparse_missing = sorted(p for p in bcast_points if _params(p).get("kind") == "sparse" and p not in payload)
    note = ("subset: shuffle uni/bidi/alltoall at >= 64 KiB; io posix/mpiio at >= 4 MiB per process; bcast at >= 1 MiB "
            "of payload (the records' payload_bytes, CSR bytes for sparse; dense by shape x dtype where missing)")
    if sparse_missing:
        note += f"; {len(sparse_missing)} sparse bcast points left out: their records carry no payload_bytes"
    print(note)
    pairs = [(i, j) for i in range(len(folders)) for j in range(i + 1, len(folders))]
    metrics: dict[str, float | None] = {}
    report: dict = {"runs": names, "note": note, "movebench": str(Path(movebench.__file__).parent), "pairs": {},
                    "disturbed": {}, "coverage": {}, "injection": {}}

    print("\nruns:")
    for name, res, folder in zip(names, results, folders, strict=True):
        side = folder.parent / f"{folder.name}.sensitivity.json"
        extra = json.loads(side.read_text()) if side.exists() else {}
        d = disturbed(folder)
        report["disturbed"][name] = {**d, "host_load": res.run.get("host_load"), "busy": extra.get("busy"),
                                     "wall_s": res.run.get("wall_s")}
        load = (res.run.get("host_load") or {}).get("other_cpus")
        print(f"  {name}: busy {extra.get('busy') or 'none'}, the run's other_cpus "
              f"{'n/a' if load is None else f'{load:.2f}'}; launches: {_launch_line(d)}")

    print("\nA/A false verdicts (regressed + improved / judged; primary measures):")
    frames, total_primary, total_all, pair_mdc = {}, {}, {}, {}
    for i, j in pairs:
        frame = compare.compare(results[i], results[j])
        frames[(i, j)] = frame
        primary = false_verdicts(_primary(frame))
        every = false_verdicts(frame)
        _add(total_primary, primary)
        _add(total_all, every)
        mdc = mdc_by_family([frame], payload)
        pair_mdc[(i, j)] = mdc
        key = f"{Path(names[i]).name} vs {Path(names[j]).name}"
        report["pairs"][key] = {"false": primary, "false_all_measures": every, "mdc": mdc}
        print(f"  {key}: " + ", ".join(f"{fam} {c['false']}/{c['judged']} ({_pct(_share(c['false'], c['judged']))})"
                                        for fam, c in primary.items()))
        print("    median mdc: " + ", ".join(f"{fam} {_pct(v)}" for fam, v in mdc.items()))
    families = sorted(f for f in total_primary if f != "total")
    print("  pooled: " + ", ".join(f"{fam} {c['false']}/{c['judged']} ({_pct(_share(c['false'], c['judged']))})"
                                   for fam, c in total_primary.items()))
    every = total_all.get("total", {"false": 0, "judged": 0})
    print(f"  every measure (memory and bookkeeping too): {every['false']}/{every['judged']} "
          f"({_pct(_share(every['false'], every['judged']))})")
    for fam, c in total_primary.items():
        metrics[f"false.{fam}"] = _share(c["false"], c["judged"])
    metrics["false_all_measures.total"] = _share(every["false"], every["judged"])

    print("\nrerun-interval coverage (other runs' medians inside this run's interval; primary measures):")
    cov = coverage([_summaries(f) for f in folders])
    report["coverage"] = cov
    for fam, c in cov.items():
        metrics[f"rerun.{fam}"] = _share(c["rerun_in"], c["rerun_n"])
        metrics[f"ci.{fam}"] = _share(c["ci_in"], c["ci_n"])
        print(f"  {fam}: rerun interval {c['rerun_in']}/{c['rerun_n']} ({_pct(metrics[f'rerun.{fam}'])}), "
              f"CI {c['ci_in']}/{c['ci_n']} ({_pct(metrics[f'ci.{fam}'])})"
              + (f"; {c['no_rerun']} without a rerun interval (one launch)" if c["no_rerun"] else ""))

    pooled_mdc = mdc_by_family(list(frames.values()), payload)
    print("\nminimum detectable change (median mdc of the A/A pairs' judged rows, pooled over the pairs):")
    print("  " + ", ".join(f"{fam} {_pct(v)}" for fam, v in pooled_mdc.items()))
    for fam, v in pooled_mdc.items():
        metrics[f"mdc.{fam}"] = v
    report["mdc"] = pooled_mdc

    print("\npower by injection (A against B made k times worse; share judged regressed of the judged, primary):")
    for factor in inject_factors:
        total: dict[str, dict] = {}
        for i, j in pairs:
            with tempfile.TemporaryDirectory(prefix="movebench-sensitivity-") as tmp:
                worse = inject(folders[j], factor, Path(tmp) / "b")
                found = power(compare.compare(results[i], worse), payload)
            _add(total, found)
            report["injection"].setdefault(_k(factor), {})[f"{Path(names[i]).name} vs {Path(names[j]).name}"] = found
        report["injection"].setdefault(_k(factor), {})["pooled"] = total
        for fam, c in total.items():
            metrics[f"inject.{_k(factor)}.{fam}"] = _share(c["regressed"], c["judged"])
        print(f"  x{_k(factor)}: " + ", ".join(f"{fam} {c['regressed']}/{c['judged']} "
                                               f"({_pct(_share(c['regressed'], c['judged']))})"
                                               for fam, c in total.items()))

    rows = targets(metrics, families, [float(f) for f in inject_factors])
    print("\ntargets:")
    for row in rows:
        print(f"  {row['name']}: {_pct(row['value'])} ({'<=' if row['at_most'] else '>='} {_pct(row['bound'])}) "
              f"{_mark(row)}")
    report["metrics"], report["targets"] = metrics, rows
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"\nwrote {json_path}")
    return report


def compare_before_after(before: str, after: str) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in (before, after))
    width = max([len(k) for k in {**a["metrics"], **b["metrics"]}] + [10])
    print(f"{'':{width}}  {'before':>10}  {'after':>10}")
    print(f"{'runs':{width}}  {len(a['runs']):>10}  {len(b['runs']):>10}")
    for key in sorted({**a["metrics"], **b["metrics"]}):
        print(f"{key:{width}}  {_pct(a['metrics'].get(key)):>10}  {_pct(b['metrics'].get(key)):>10}")
    print("\ntargets:")
    named = {r["name"]: r for r in a["targets"]}
    after_rows = {r["name"]: r for r in b["targets"]}
    names = list(dict.fromkeys([*named, *after_rows]))
    width = max([len(n) for n in names] + [10])
    print(f"{'':{width}}  {'before':>18}  {'after':>18}")
    for name in names:
        cells = []
        for rows in (named, after_rows):
            row = rows.get(name)
            cells.append("-" if row is None else f"{_pct(row['value'])} {_mark(row)}")
        bound = (named.get(name) or after_rows[name])
        print(f"{name:{width}}  {cells[0]:>18}  {cells[1]:>18}   ({'<=' if bound['at_most'] else '>='} "
              f"{_pct(bound['bound'])})")
    print("\nlaunches:")
    for side, report in (("before", a), ("after", b)):
        for name, d in report["disturbed"].items():
            print(f"  {side} {name}: busy {d.get('busy') or 'none'}; {_launch_line(d)}")


def everything() -> None:
    out = Path(tempfile.gettempdir()) / f"movebench-sensitivity-{dt.datetime.now():%Y%m%d-%H%M%S}"
    print(f"the whole benchmark into {out}: {BEFORE} and the working tree, 3 quiet runs each, then one intermittent "
          "and one steady busy run each: 10 default campaigns, about an hour", flush=True)
    sides = {"before": BEFORE, "after": None}
    for side, commit in sides.items():
        run(out / side, commit, runs=3)
    for side, commit in sides.items():
        for kind in ("intermittent", "steady"):
            run(out / side, commit, runs=1, busy=kind, busy_run=1)
    for side, commit in sides.items():
        # each side's verdicts by its own code: the commit's compare for the runs of the commit
        env = {**os.environ}
        if commit:
            env["PYTHONPATH"] = os.pathsep.join([str(out / side / f"src-{commit}" / "src"),
                                                 *filter(None, [os.environ.get("PYTHONPATH")])])
        quiet = [str(p) for p in sorted((out / side).glob("run-[0-9]*[0-9]"))]
        busy = [str(out / side / "intermittent-1"), str(out / side / "steady-1")]
        for title, folders, name in (("quiet runs", quiet, side),
                                     ("quiet and busy runs", quiet + busy, f"{side}-busy")):
            print(f"\n=== {side}: {title}", flush=True)
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "analyse", *folders, "--json",
                            str(out / f"{name}.json")], env=env, check=True)
    print("\n=== before / after, quiet")
    compare_before_after(out / "before.json", out / "after.json")
    print("\n=== before / after, quiet and busy")
    compare_before_after(out / "before-busy.json", out / "after-busy.json")


def _factors(text: str) -> list[float]:
    try:
        factors = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected factors such as 2,1.25") from None
    if not factors or any(not f > 1 for f in factors):
        raise argparse.ArgumentTypeError(f"{text!r}: every factor must be above 1")
    return factors


def main(argv) -> int:
    if not argv:
        everything()
        return 0
    parser = argparse.ArgumentParser(prog="bench/sensitivity.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the campaign --runs times into OUT/<label>-<i>")
    p.add_argument("out")
    p.add_argument("--commit", help="run this commit's code and config (a worktree at OUT/src-REV)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--busy", choices=("none", "intermittent", "steady"), default="none")
    p.add_argument("--busy-run", type=int, default=1, help="the run (1..runs) with the outside load")
    p.add_argument("--small", action="store_true", help="a campaign of about a minute instead of the default")
    p.add_argument("--label", help="folder names OUT/<label>-<i> (default: run, or the busy kind)")
    a = sub.add_parser("analyse", help="verdicts' honesty and sensitivity from kept run folders")
    a.add_argument("runs", nargs="+")
    a.add_argument("--inject", type=_factors, default=[2.0, 1.25], help="factors, e.g. 2,1.25")
    a.add_argument("--json", help="write the analysis here (for compare-before-after)")
    c = sub.add_parser("compare-before-after", help="two analyses (analyse --json) side by side")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.runs < 1:
            parser.error("--runs must be at least 1")
        run(args.out, args.commit, args.runs, args.busy, args.busy_run, args.small, args.label)
    elif args.command == "analyse":
        analyse(args.runs, args.inject, args.json)
    else:
        compare_before_after(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
