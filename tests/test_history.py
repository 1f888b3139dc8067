"""History: runs in a store (add, re-add, concurrent adds, other versions, foreign files), the change-point detector
on synthetic series, and `history changes --fail-on regression` (the page in a browser: test_history_browser.py)."""

import copy
import hashlib
import json
import subprocess
import sys
import time

import duckdb
import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from history_support import POINTS, write_run, write_series
from movebench import campaign
from movebench.cli import main
from movebench.engine import config as campaign_config
from movebench.judging.history import analysis, detect, store
from movebench.judging.history import run as history_run
from test_pipeline import TINY


def checksum(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the store ---

def test_add_keeps_each_point_measures_launch_level_estimate_and_the_fingerprint(tmp_path):
    results = write_run(tmp_path / "r", start=1.8e9)
    assert store.add(tmp_path / "h.duckdb", history_run.read(results))
    runs, estimates = store.load(tmp_path / "h.duckdb")
    assert len(runs) == 1 and runs["campaign"].iloc[0] == "nightly"
    assert json.loads(runs["fingerprint"].iloc[0])["mpi_library"] == "MPICH"
    assert len(estimates) == len(POINTS) * 2  # elapsed_s and bandwidth_Bps per point
    summary = pd.read_csv(results / "tables" / "shuffle_summary.csv")
    first = summary.iloc[0]
    row = estimates[(estimates["point"] == first["point"]) & (estimates["measure"] == first["measure"])]
    assert row["estimate"].iloc[0] == pytest.approx(summary["median"].iloc[0])
    assert row["launches"].iloc[0] == 3 and row["ci_low"].iloc[0] < row["estimate"].iloc[0] < row["ci_high"].iloc[0]
    # the standard error is the launches' t-interval's (df 2): half-width / t(0.975, 2)
    half = np.log(row["ci_high"].iloc[0]) - np.log(row["ci_low"].iloc[0])
    assert row["se_log"].iloc[0] == pytest.approx(half / 2 / 4.302652729749464, rel=1e-6)
    # a user opens it with SQL
    with duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from estimates where measure = 'elapsed_s'").fetchone()[0] == len(POINTS)


def test_the_same_run_added_twice_or_from_a_copy_is_stored_once(tmp_path):
    results = write_run(tmp_path / "r", start=1.8e9)
    path = tmp_path / "h.duckdb"
    assert store.add(path, history_run.read(results))
    copy_of = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(results), str(copy_of)], check=True)
    assert not store.add(path, history_run.read(results))
    assert not store.add(path, history_run.read(copy_of))
    runs, estimates = store.load(path)
    assert len(runs) == 1 and len(estimates) == len(POINTS) * 2


def test_two_campaigns_adding_at_once_both_land(tmp_path):
    a = write_run(tmp_path / "a", start=1.8e9, seed=1)
    b = write_run(tmp_path / "b", start=1.8e9 + 86400, seed=2)
    path = tmp_path / "h.duckdb"
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    with store.locked(path):  # both start while a third writer holds the store: they must wait, not fail
        procs = [subprocess.Popen([sys.executable, "-m", "movebench", "history", "add", str(r), "--store", str(path),
                                   "--no-page"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in (a, b)]
        time.sleep(2)
        assert all(p.poll() is None for p in procs)
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs, _ = store.load(path)
    assert len(runs) == 2


@pytest.mark.parametrize("version, says", [(0, "from an older movebench"), (store.SCHEMA_VERSION + 1, "newer")])
def test_a_store_of_another_version_is_refused_untouched(tmp_path, capsys, version, says):
    path = tmp_path / "h.duckdb"
    store.add(path, history_run.read(write_run(tmp_path / "r", start=1.8e9)))
    with duckdb.connect(str(path)) as con:
        con.execute("update movebench_store set value = ? where key = 'schema_version'", [str(version)])
    before = checksum(path)
    assert main(["history", "add", str(write_run(tmp_path / "r2", start=1.9e9)), "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"schema version {version}" in err and says in err and "left as it is" in err
    assert checksum(path) == before


def test_a_corrupt_or_foreign_file_is_refused_untouched(tmp_path, capsys):
    results = write_run(tmp_path / "r", start=1.8e9)
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(np.random.default_rng(0).bytes(20000))
    foreign = tmp_path / "foreign.duckdb"
    with duckdb.connect(str(foreign)) as con:
        con.execute("create table sales (id integer, amount double)")
        con.execute("insert into sales values (1, 2.5)")
    half = tmp_path / "half.duckdb"
    store.add(half, history_run.read(results))
    half.write_bytes(half.read_bytes()[: 5000])  # a copy cut short
    for path, says in ((garbage, "not a DuckDB database"), (foreign, "not a movebench history store"),
                       (half, "DuckDB cannot open it")):
        before = checksum(path)
        assert main(["history", "add", str(results), "--store", str(path)]) == 2
        err = capsys.readouterr().err
        assert says in err and str(path) in err, err
        assert checksum(path) == before


def test_campaign_history_naming_a_foreign_file_is_refused_before_any_job(tmp_path):
    foreign = tmp_path / "notes.duckdb"
    foreign.write_text("my notes\n" * 100)
    config = copy.deepcopy(TINY)
    config["campaign"]["history"] = str(foreign)
    with pytest.raises(campaign_config.ConfigError) as error:
        campaign.validate(config)
    message = error.value.message()
    assert "campaign.history" in message and str(foreign) in message and "not a DuckDB database" in message
    config["campaign"]["history"] = str(tmp_path / "new.duckdb")  # a store yet to be made is fine
    assert campaign.validate(config)["campaign"]["history"] == str(tmp_path / "new.duckdb")


def test_not_a_results_folder_is_said(tmp_path, capsys):
    assert main(["history", "add", str(tmp_path), "--store", str(tmp_path / "h.duckdb")]) == 2
    assert "no campaign_run.json" in capsys.readouterr().err
    assert not (tmp_path / "h.duckdb").exists()


# --- the detector on synthetic series ---

def _series(y, se):
    return detect.detect(detect.Series(y=np.asarray(y, float), se=np.asarray(se, float), log=True))


def test_a_step_is_found_with_its_size_interval_and_place():
    rng = np.random.default_rng(1)
    y = rng.normal(0, 0.01, 20)
    y[12:] += np.log(1.25)
    found = _series(y, np.full(20, 0.01)).changes
    assert len(found) == 1
    change = found[0]
    assert change.index == 12 and change.low <= 12 <= change.high
    assert change.size_low < 1.25 < change.size_high and change.size == pytest.approx(1.25, rel=0.03)


def test_a_slow_drift_is_found_as_steps_the_same_way_adding_up_to_it():
    rng = np.random.default_rng(2)
    drift = np.log(np.linspace(1.0, 1.3, 30))  # 1% a run, below one run's noise of 1% at each step
    y = drift + rng.normal(0, 0.01, 30)
    found = _series(y, np.full(30, 0.01)).changes
    assert found and all(c.size > 1 for c in found)
    total = np.prod([c.size for c in found])
    assert 1.15 < total < 1.4


@pytest.mark.parametrize("where", [10, 19])
def test_a_single_outlier_is_not_a_change(where):
    rng = np.random.default_rng(3)
    y = rng.normal(0, 0.01, 20)
    y[where] += np.log(1.5)  # 40 of its standard errors off, once
    assert _series(y, np.full(20, 0.01)).changes == []


def test_a_change_in_spread_alone_is_not_a_change_of_level():
    # from run 15 on each run is six times as noisy, and says so (its own standard error): no level moved
    false = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        se = np.r_[np.full(15, 0.005), np.full(15, 0.03)]
        y = rng.normal(0, se)
        false += bool(_series(y, se).changes)
    assert false <= 3


def _realistic_null(rng, n):
    """n runs of 3 launches: each run's own standard error estimated on 2 df, and run-to-run noise beyond it."""
    sig = rng.uniform(0.003, 0.01, n)
    se_hat = sig * np.sqrt(rng.chisquare(2, n) / 2)
    y = rng.normal(0, np.sqrt(sig**2 + 0.01**2))
    return y, detect.moderate(se_hat, np.full(n, 2.0))


def test_false_alarms_stay_at_the_nominal_rate_and_a_half_step_is_found():
    rng = np.random.default_rng(4)
    series = 300
    false = sum(bool(_series(*_realistic_null(rng, 10)).changes) for _ in range(series))
    # nominal 1%: 3 expected; 8 or more has probability 1.2% if the rate were 1%
    assert false <= 7
    found = 0
    for _ in range(50):
        y, se = _realistic_null(rng, 10)
        y[6:] += np.log(1.5)
        found += any(abs(c.index - 6) <= 1 for c in _series(y, se).changes)
    assert found >= 45


def test_too_few_runs_give_no_change():
    assert _series([0.0, 0.5, 0.5], [0.01] * 3).changes == []


# --- analysis and --fail-on ---

def test_change_points_name_what_changed_with_them(tmp_path):
    folders = write_series(tmp_path, 10, step_at=6, step=1.5, change_meta_at=6)
    path = tmp_path / "h.duckdb"
    for f in folders:
        store.add(path, history_run.read(f))
    _, estimates = store.load(path)
    results = analysis.analyse(estimates)
    changed = [r for r in results if r.found]
    assert {r.key[2] for r in changed} == {"pattern~uni/nodes~1/ranks~2/message_size~4096/window~8"}
    for r in changed:
        f = r.found[-1]
        assert f.change.index == 6 and f.worse and not f.recent
        assert f.changed["mpi_library"] == ["MPICH", "Open MPI"]
    assert analysis.regressions(results) == []


def test_a_time_of_other_work_is_not_the_same_series(tmp_path):
    # `iterations: auto` sets a loop count per run: each run's times are of other work, its bandwidths are not
    path = tmp_path / "h.duckdb"
    for i in range(10):
        store.add(path, history_run.read(write_run(tmp_path / f"run-{i}", start=1.7e9 + 86400 * i, seed=i,
                                                   iterations=10 + 2 * i)))
    _, estimates = store.load(path)
    by_measure = {}
    for r in analysis.analyse(estimates):
        by_measure.setdefault(r.key[3], []).append(r)
    assert all(len(r.frame) == 1 and not r.found for r in by_measure["elapsed_s"])  # the newest run's work only
    assert all(len(r.frame) == 10 and not r.found for r in by_measure["bandwidth_Bps"])
    newest = json.loads(by_measure["elapsed_s"][0].frame["fingerprint"].iloc[-1])
    assert newest["work"].startswith("iterations=28 bytes=")
    assert analysis.fingerprint_changes([{"work": "iterations=10", "kernel": "a"},
                                         {"work": "iterations=12", "kernel": "b"}]) == {"kernel": ["a", "b"]}


def test_fail_on_regression_when_the_newest_runs_start_a_worse_level(tmp_path, capsys):
    worse, better = tmp_path / "worse", tmp_path / "better"
    for root, step in ((worse, 1.5), (better, 1 / 1.5)):
        for f in write_series(root, 10, step_at=7, step=step):
            assert main(["history", "add", str(f), "--store", str(root / "h.duckdb"), "--no-page"]) == 0
    capsys.readouterr()
    assert main(["history", "changes", "--store", str(worse / "h.duckdb"), "--fail-on", "regression"]) == 1
    out = capsys.readouterr()
    assert "worse" in out.out and "recent" in out.out and "started a worse level" in out.err
    assert main(["history", "changes", "--store", str(worse / "h.duckdb")]) == 0  # without --fail-on: listed only
    assert main(["history", "changes", "--store", str(better / "h.duckdb"), "--fail-on", "regression"]) == 0
    assert "better" in capsys.readouterr().out


def test_history_help_documents_the_commands(capsys):
    with pytest.raises(SystemExit):
        main(["history", "--help"])
    out = capsys.readouterr().out
    for word in ("add", "changes", "page", "campaign.history", "false change point"):
        assert word in out
