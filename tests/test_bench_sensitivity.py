"""bench/sensitivity.py's analysis on synthetic results folders: records with known lognormal noise, summarised by
movebench's own aggregate, compared by movebench's own compare."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from movebench.engine import aggregate

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "sensitivity.py"
_spec = importlib.util.spec_from_file_location("bench_sensitivity", SCRIPT)
sens = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sens)

PATTERNS, SIZES, WINDOWS = ("uni", "bidi", "alltoall"), (4096, 262144), (1, 64)
POINTS = [f"pattern~{p}/nodes~1/ranks~2/message_size~{s}/window~{w}" for p in PATTERNS for s in SIZES for w in WINDOWS]


def write_run(root: Path, seed: int, launch_sd: float = 0.01, rep_sd: float = 0.02, launches: int = 3,
              repetitions: int = 8) -> Path:
    """A results folder of shuffle POINTS: lognormal launch effects (launch_sd) and repetitions (rep_sd) around
    a time per point; tables/shuffle.parquet, .csv and _summary.csv as the pipeline writes them."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, point in enumerate(POINTS):
        params = {key: (int(v) if v.isdigit() else v) for key, v in (seg.split("~") for seg in point.split("/"))}
        for launch in range(launches):
            shift = rng.normal(0, launch_sd)
            ident = {"family": "shuffle", "variant": params["pattern"], **params, "point": point, "launch": launch,
                     "bytes": 1_000_000, "iterations": 10}
            rows.append({**ident, "rep": 0, "warmup": True, "ok": True, "elapsed_s": 0.05})
            for rep in range(repetitions):
                rows.append({**ident, "rep": rep, "warmup": False, "ok": True,
                             "elapsed_s": 0.001 * (k + 1) * math.exp(shift + rng.normal(0, rep_sd))})
    table = pd.DataFrame(rows)
    table["bandwidth_Bps"] = table["bytes"] / table["elapsed_s"]
    tables = root / "tables"
    tables.mkdir(parents=True)
    table.to_parquet(tables / "shuffle.parquet", index=False)
    table.to_csv(tables / "shuffle.csv", index=False)
    aggregate.summarize("shuffle", table).to_csv(tables / "shuffle_summary.csv", index=False)
    return root


def test_injection_is_found_and_identical_runs_give_few_false_verdicts(tmp_path, capsys):
    a, b = write_run(tmp_path / "run-1", seed=1), write_run(tmp_path / "run-2", seed=2)
    report = sens.analyse([a, b], [2.0, 1.25], tmp_path / "out.json")
    metrics = report["metrics"]
    judged = report["pairs"]["run-1 vs run-2"]["false"]["total"]
    assert judged["judged"] == 2 * len(POINTS)  # elapsed_s and bandwidth_Bps of every point
    assert judged["false"] <= 1  # identical distributions: at 1% per row, 0 expected, 1 possible
    assert metrics["inject.2.shuffle"] == 1.0  # launch noise 1%: a 2x change is found on every point-measure
    assert metrics["inject.2.subset"] == 1.0
    subset = report["injection"]["2"]["pooled"]["subset"]
    assert subset["judged"] == 2 * 6  # uni, bidi, alltoall at 256 KiB, both windows, two measures
    assert metrics["inject.1.25.shuffle"] == 1.0  # 25% against 1% launch noise is found too
    assert 0 < metrics["mdc.shuffle"] < 0.15
    assert metrics["rerun.total"] is not None and metrics["ci.total"] is not None
    names = {r["name"]: r for r in report["targets"]}
    assert names["2x found regressed, shuffle"]["pass"] is True
    assert names["false verdicts (A/A), total"]["pass"] is (metrics["false.total"] <= 0.02)
    assert json.loads((tmp_path / "out.json").read_text())["metrics"]["inject.2.shuffle"] == 1.0
    out = capsys.readouterr().out
    assert "targets:" in out and "not recorded" in out  # the synthetic runs carry no launch metas
    sens.compare_before_after(tmp_path / "out.json", tmp_path / "out.json")
    assert "PASS" in capsys.readouterr().out


def test_injection_changes_every_measure_in_its_own_direction(tmp_path):
    a = write_run(tmp_path / "run-1", seed=1)
    worse = sens.inject(a, 2.0, tmp_path / "worse")
    before = pd.read_parquet(a / "tables" / "shuffle.parquet")
    after = pd.read_parquet(worse / "tables" / "shuffle.parquet")
    assert np.allclose(after["elapsed_s"], 2 * before["elapsed_s"])
    assert np.allclose(after["bandwidth_Bps"], before["bandwidth_Bps"] / 2)
    assert (after["bytes"] == before["bytes"]).all()  # the work is the same: only the measures move
    assert np.allclose(pd.read_csv(worse / "tables" / "shuffle.csv")["elapsed_s"], after["elapsed_s"])


def _summary(median, ci=(None, None), rerun=(None, None), measure="elapsed_s"):
    return {"family": "shuffle", "point": POINTS[0], "measure": measure, "median": median, "ci_low": ci[0],
            "ci_high": ci[1], "rerun_low": rerun[0], "rerun_high": rerun[1], "launches": 3}


def test_rerun_coverage_counts_the_other_runs_medians_inside_each_interval(tmp_path):
    runs = [pd.DataFrame([_summary(1.5, (1.4, 1.6), (1.0, 2.0)), _summary(1.5, (1.4, 1.6), (1.0, 2.0), "imbalance")]),
            pd.DataFrame([_summary(1.8)]),  # inside the rerun interval, outside the CI
            pd.DataFrame([_summary(3.0)])]  # outside both
    cov = sens.coverage(runs)["total"]
    assert (cov["rerun_in"], cov["rerun_n"]) == (1, 2)  # 50%; imbalance (not a primary measure) left out
    assert (cov["ci_in"], cov["ci_n"]) == (0, 2)
    assert cov["no_rerun"] == 4  # runs 2 and 3 have no interval to hold the other two medians
    for i, frame in enumerate(runs):  # the same through the summary files
        (tmp_path / f"r{i}" / "tables").mkdir(parents=True)
        frame.drop(columns="family").to_csv(tmp_path / f"r{i}" / "tables" / "shuffle_summary.csv", index=False)
    again = sens.coverage([sens._summaries(tmp_path / f"r{i}") for i in range(3)])
    assert again["shuffle"]["rerun_in"] == 1 and again["shuffle"]["rerun_n"] == 2


def test_the_sensitive_subset():
    assert sens.sensitive("shuffle", "pattern~bidi/nodes~1/ranks~2/message_size~65536/window~64")
    assert not sens.sensitive("shuffle", "pattern~shuffle/nodes~1/ranks~2/message_size~4194304/window~64/skew~0.0")
    assert not sens.sensitive("shuffle", "pattern~uni/nodes~1/ranks~2/message_size~4096/window~64")
    assert sens.sensitive("io", "pattern~sfsw/backend~mpiio/nodes~1/ranks~2/size_per_proc~4194304")
    assert not sens.sensitive("io", "pattern~sfsw/backend~blob/nodes~1/ranks~2/size_per_proc~16777216")
    assert sens.sensitive("bcast", "kind~dense/method~osu/nodes~1/ranks~2/shape~2000x2000/dtype~float64")
    assert not sens.sensitive("bcast", "kind~dense/method~osu/nodes~1/ranks~2/shape~100x100/dtype~float64")
    sparse = "kind~sparse/method~buffer/nodes~1/ranks~2/shape~2000x2000/density~0.6/dtype~float64"
    assert not sens.sensitive("bcast", sparse)  # no CSR bytes known: left out
    assert sens.sensitive("bcast", sparse, {sparse: 28_808_004})


def test_disturbed_launches_are_counted_where_metas_record_them(tmp_path):
    raw = tmp_path / "raw" / "shuffle" / POINTS[0]
    raw.mkdir(parents=True)
    (raw.parent / f"{raw.name}.meta.json").write_text(json.dumps({"host_load": {"other_cpus": 0.1},
                                                                  "disturbed": False, "disturbed_attempts": []}))
    (raw / "launch~1.meta.json").write_text(json.dumps({"host_load": {"other_cpus": 0.05}, "disturbed": True,
                                                        "disturbed_attempts": [{"host_load": {"other_cpus": 0.9}}]}))
    got = sens.disturbed(tmp_path)
    assert got == {"launches": 2, "recorded": True, "disturbed": 1, "retried": 1, "attempts_redone": 1,
                   "left_out": None, "max_other_cpus": 0.9}
    (tmp_path / "tables").mkdir()
    pd.DataFrame([{"point": POINTS[0], "measure": m, "launches_disturbed": 1, "launches_left_out": 1}
                  for m in ("elapsed_s", "bandwidth_Bps")]).to_csv(tmp_path / "tables" / "shuffle_summary.csv",
                                                                   index=False)
    assert sens.disturbed(tmp_path)["left_out"] == 1  # one per point, not one per measure
    (raw / "launch~1.meta.json").write_text("{}")
    (raw.parent / f"{raw.name}.meta.json").write_text(json.dumps({"hostname": "vm"}))
    assert sens.disturbed(tmp_path)["recorded"] is False
