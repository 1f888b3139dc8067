"""A launch measured beside outside load is marked disturbed, measured again within its budget, and left out of
the statistics when its point has quiet launches enough."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from conftest import MPIEXEC
from movebench import families
from movebench.core.tables import counted
from movebench.engine import aggregate, launch

PYTHON = sys.executable
SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"


def launch_beside_load(tmp_path, policy: dict, load_s: float):
    task = families.load("shuffle").task({"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 4},
                                         {"iterations": "auto", "repetition_time": 0.3}, repetitions=2, warmups=0)
    out, meta = tmp_path / "raw" / "p.jsonl", tmp_path / "raw" / "p.meta.json"
    env = {**os.environ, launch.DISTURBED_ENV: json.dumps(policy)}
    # outside load: a full core spinning, not a descendant of the launch
    load = subprocess.Popen([PYTHON, "-c", SPIN.format(seconds=load_s)])
    try:
        proc = subprocess.run([PYTHON, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()),
                               "--launcher", MPIEXEC, "--out", str(out), "--meta", str(meta),
                               "--failed", str(tmp_path / "f.json")],
                              capture_output=True, text=True, timeout=300, env=env)
    finally:
        load.kill()
        load.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(meta.read_text())


@pytest.mark.mpi
def test_a_launch_beside_a_load_is_marked_disturbed_and_measured_again(tmp_path):
    ledger = tmp_path / "retries"
    proc, meta = launch_beside_load(tmp_path, {"other_cpus": 0.3, "retries": 1, "retry_budget_s": 300,
                                               "ledger": str(ledger)}, load_s=120)
    assert meta["host_load"]["other_cpus"] > 0.3, meta["host_load"]
    assert meta["disturbed"] is True and meta["disturbed_threshold"] == 0.3
    assert len(meta["disturbed_attempts"]) == 1  # measured again once, disturbed again: kept, marked
    assert meta["disturbed_attempts"][0]["host_load"]["other_cpus"] > 0.3
    assert "DISTURBED" in proc.stderr and "measuring it again" in proc.stderr and "no retry left" in proc.stderr
    assert float(ledger.read_text().split()[0]) > 0  # the retry's cost is booked for the campaign's budget


@pytest.mark.mpi
def test_a_spent_budget_keeps_the_disturbed_launch_without_a_retry(tmp_path):
    ledger = tmp_path / "retries"
    ledger.write_text("500\n")
    proc, meta = launch_beside_load(tmp_path, {"other_cpus": 0.3, "retries": 3, "retry_budget_s": 100,
                                               "ledger": str(ledger)}, load_s=120)
    assert meta["disturbed"] is True and meta["disturbed_attempts"] == []
    assert "retry_budget_s 100" in proc.stderr


@pytest.mark.mpi
def test_a_launch_below_the_threshold_is_not_disturbed(tmp_path):
    # the same load, a threshold above what one spinning core can show on any host
    _, meta = launch_beside_load(tmp_path, {"other_cpus": 64, "retries": 1}, load_s=120)
    assert meta["disturbed"] is False and meta["disturbed_attempts"] == []
    assert meta["host_load"]["other_cpus"] > 0.3
    assert {"busy_cpus", "campaign_cpus", "watchers_cpus", "other_cpus", "wall_s"} <= set(meta["host_load"])


def test_policy_reads_the_campaigns_settings_and_its_budget(tmp_path, monkeypatch):
    monkeypatch.setenv(launch.DISTURBED_ENV, json.dumps({"other_cpus": 0.2, "retries": 2, "retry_budget_s": 10,
                                                         "ledger": str(tmp_path / "l")}))
    policy = launch.DisturbedPolicy.from_env()
    assert policy.disturbed({"other_cpus": 0.19}) is None and "0.25 CPUs" in policy.disturbed({"other_cpus": 0.25})
    assert policy.grant(0, 3.0) == policy.pause_s and policy.spent() == pytest.approx(3.0 + policy.pause_s)
    assert policy.grant(1, 6.0) is None  # 5 booked + 6 > 10 s
    assert policy.grant(2, 0.1) is None  # retries used
    monkeypatch.delenv(launch.DISTURBED_ENV)
    assert launch.DisturbedPolicy.from_env().other_cpus == launch.DISTURBED_DEFAULTS["other_cpus"]


def records(point, launches, disturbed=()):
    return pd.DataFrame([{"family": "shuffle", "point": point, "launch": k, "rep": r, "warmup": False, "ok": True,
                          "elapsed_s": 1.0 + k, "disturbed": k in disturbed}
                         for k in range(launches) for r in range(3)])


def test_disturbed_launches_are_left_out_only_where_two_quiet_ones_remain():
    table = pd.concat([records("a", 3, disturbed={1}), records("b", 3, disturbed={0, 2}), records("c", 2)])
    kept = counted(table)
    assert sorted(kept[kept["point"] == "a"]["launch"].unique()) == [0, 2]  # two quiet launches: 1 left out
    assert sorted(kept[kept["point"] == "b"]["launch"].unique()) == [0, 1, 2]  # one quiet: kept, marked
    assert len(kept[kept["point"] == "c"]) == 6


def test_the_summary_counts_disturbed_and_left_out_launches():
    point = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~4"
    table = pd.concat([records(point, 3, disturbed={1}), records(point + "/x", 3, disturbed={0, 2})])
    table = table.assign(variant="uni", bandwidth_Bps=1e9)
    table.loc[table["point"] == point + "/x", "point"] = "other"
    summary = aggregate.summarize("shuffle", table)
    first = summary[summary["point"] == point].iloc[0]
    assert first["launches"] == 2 and first["launches_disturbed"] == 1 and first["launches_left_out"] == 1
    other = summary[summary["point"] == "other"].iloc[0]
    assert other["launches"] == 3 and other["launches_disturbed"] == 2 and other["launches_left_out"] == 0


def test_the_sampler_counts_a_process_as_outside_load_unless_it_is_ours():
    from movebench.core import envinfo

    spin = subprocess.Popen([PYTHON, "-c", SPIN.format(seconds=1.5)])
    outside = envinfo.LoadSampler(lambda: [os.getpid()], interval=0.1)
    ours = envinfo.LoadSampler(lambda: [os.getpid(), spin.pid], interval=0.1)
    time.sleep(0.2)
    start, spun = time.time(), envinfo.process_cpu_seconds(spin.pid)
    time.sleep(0.8)
    end, spun = time.time(), envinfo.process_cpu_seconds(spin.pid) - spun
    for sampler in (outside, ours):
        sampler.stop()
    spin.kill()
    spin.wait()
    # whatever else the host runs, the two differ by the CPUs the spinning process got meanwhile (a core on an
    # idle host, less on a busy one)
    share = spun / (end - start)
    difference = outside.window(start, end) - ours.window(start, end)
    assert share > 0.05 and difference > 0.5 * share, (difference, share)
    assert outside.window(end, end) is None  # an empty window says nothing


@pytest.mark.mpi
def test_each_point_of_a_launch_group_is_judged_by_its_own_repetitions(tmp_path):
    """A group's points each carry the load of their own measuring window; under a load throughout, every one is
    disturbed and measured again, in a launch of the disturbed points only."""
    fam = families.load("shuffle")
    tasks = [fam.task({"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": size, "window": 4},
                      {"iterations": "auto", "repetition_time": 0.3}, repetitions=2, warmups=0)
             for size in (4096, 8192)]
    raw = tmp_path / "raw"
    outs = [raw / f"p{i}.jsonl" for i in range(2)]
    metas = [raw / f"p{i}.meta.json" for i in range(2)]
    env = {**os.environ, launch.DISTURBED_ENV: json.dumps({"other_cpus": 0.3, "retries": 1, "retry_budget_s": 300})}
    load = subprocess.Popen([PYTHON, "-c", SPIN.format(seconds=120)])
    try:
        proc = subprocess.run([PYTHON, "-m", "movebench.engine.launch", "--group",
                               json.dumps({"name": "g", "group": [t.to_dict() for t in tasks]}), "--launcher",
                               MPIEXEC, "--records", *map(str, outs), "--metas", *map(str, metas), "--failed",
                               str(tmp_path / "failed")], capture_output=True, text=True, timeout=300, env=env)
    finally:
        load.kill()
        load.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 of 2 points measured" in proc.stderr and "measuring them again" in proc.stderr
    for meta_file in metas:
        meta = json.loads(meta_file.read_text())
        assert meta["disturbed"] is True and len(meta["disturbed_attempts"]) == 1
        # the load of the point's own repetitions, and the launch's beside it
        assert meta["host_load"]["other_cpus"] > 0.3 and "launch_other_cpus" in meta["host_load"]
        assert meta["launch_group"]["size"] == 2
        assert meta["launches"] == 1  # the task's rule, for the report's and compare's targets
