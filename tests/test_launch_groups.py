"""Launch groups: points of one family that share what a launch fixes run in one launch, each writing its own
records; the plan groups them, the order places the groups, a failed member loses none of the others."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import snakemake
from movebench.cli import main
from movebench.engine import config as campaign_config
from movebench.engine import plan
from movebench.reportkit import ratio

STREAM = {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "iterations": 20}


def planned(config: dict):
    config = campaign_config.validate(config)
    tasks = plan.tasks(config, plan.grid(config))
    return config, tasks, plan.launch_groups(config, tasks)


def test_kv_points_share_a_launch_by_default_and_the_order_places_groups():
    config, tasks, groups = planned({"campaign": {"launches": 2},
                                     "kv": {"operations": ["put", "get"], "value_sizes": ["4KiB", "64KiB"],
                                            "clients_per_node": [1, 2]}})
    assert config["kv"]["launch_groups"] is True
    kv = groups["kv"]
    # two client counts x two launches; each group holds both operations at both sizes
    assert sorted(g.name for g in kv) == sorted(f"nodes~1/clients_per_node~{c}/managers_per_node~1/launch~{k}"
                                                for c in (1, 2) for k in (0, 1))
    assert all(len(g.members) == 4 for g in kv)
    assert {p for g in kv for p in g.members} == set(tasks["kv"])
    for group in kv:
        assert {tasks["kv"][p].launch for p in group.members} == {group.launch}
        assert {tasks["kv"][p].point["clients_per_node"] for p in group.members} == {int(group.key_path.split("~")[2]
                                                                                        .split("/")[0])}
    order = plan.launch_order(tasks, 5, groups)
    assert sorted(name for _, name in order) == sorted(g.name for g in kv)
    assert [name.endswith("launch~0") for _, name in order] == [True, True, False, False]  # rounds in order
    assert set(plan.priorities(order)["kv"]) == {g.name for g in kv}


def test_a_section_turns_groups_on_or_off_and_calibration_groups_memcpy_apart_from_fio():
    _, _, groups = planned({"campaign": {"launches": 1}, "kv": {"launch_groups": False},
                            "shuffle": {**STREAM, "message_sizes": ["1KiB", "2KiB"], "launch_groups": True}})
    assert "kv" not in groups and [g.members for g in groups["shuffle"]] == [
        ("pattern~uni/nodes~1/ranks~2/message_size~1024/window~1",
         "pattern~uni/nodes~1/ranks~2/message_size~2048/window~1")]
    with pytest.raises(campaign_config.ConfigError) as error:
        campaign_config.validate({"campaign": {}, "shuffle": {"launch_group": True}})
    assert "shuffle.launch_group" in error.value.message() and "unknown key" in error.value.message()
    # memcpy's launch is its ranks; fio's is one process, whatever jobs fio starts
    _, tasks, groups = planned({"campaign": {"launches": 1}, "kv": {"enabled": False},
                                "calibration": {"probes": ["memcpy", "fio"], "memcpy_sizes": ["4KiB", "1MiB"],
                                                "fio_patterns": ["sfsw", "mfmw"], "launch_groups": True}})
    assert sorted((g.name, len(g.members)) for g in groups["calibration"]) == [
        ("probe~fio/ranks~2/launch~0", 2), ("probe~memcpy/ranks~2/launch~0", 2)]
    for group in groups["calibration"]:
        placed = {(tasks["calibration"][p].ranks, tasks["calibration"][p].nodes) for p in group.members}
        assert placed == ({(1, 1)} if "fio" in group.name else {(2, 1)})
    # io's points group by their ranks and nodes, across patterns, backends and sizes
    _, _, groups = planned({"campaign": {"launches": 1}, "kv": {"enabled": False},
                            "io": {"patterns": ["sfsw", "mfmw"], "backends": ["posix"], "ranks": [1, 2],
                                   "size_per_proc": ["1MiB"], "launch_groups": True}})
    assert sorted((g.name, len(g.members)) for g in groups["io"]) == [("nodes~1/ranks~1/launch~0", 2),
                                                                       ("nodes~1/ranks~2/launch~0", 2)]


def write(work: Path, config: dict) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(json.dumps(config))
    return work


def metas(results: Path) -> dict[str, dict]:
    raw = results / "raw" / "shuffle"
    return {p.relative_to(raw).as_posix().removesuffix(".meta.json"): json.loads(p.read_text())
            for p in raw.rglob("*.meta.json")}


@pytest.mark.pipeline
@pytest.mark.mpi
def test_a_launch_group_measures_its_points_in_one_launch_each_with_its_own_records(tmp_path, monkeypatch, capsys):
    sizes = ["1KiB", "2KiB", "4KiB"]
    work = write(tmp_path / "work", {
        "campaign": {"name": "groups", "results_dir": "results", "launches": 2, "repetitions": 2, "warmups": 1,
                     "launch_order_seed": 3},
        "shuffle": {**STREAM, "message_sizes": sizes, "launch_groups": True}})
    dry = snakemake(work, "--dry-run")
    assert "rule shuffle_group_nodes1_ranks2_launch0:" in dry.stdout and "rule shuffle_point:" not in dry.stdout
    snakemake(work)
    results = work / "results"
    found = metas(results)
    assert len(found) == 6  # 3 points x 2 launches, each its own records and meta
    by_launch: dict[int, list[dict]] = {}
    for path, meta in found.items():
        assert meta["launch_group"]["size"] == 3 and meta["launch"] == (1 if "launch~1" in path else 0)
        by_launch.setdefault(meta["launch"], []).append(meta)
    for launch, group in by_launch.items():
        # one launch: one command, one start; the points ran one after another in it, each once
        assert len({m["launch_start"] for m in group}) == 1 and len({m["command"] for m in group}) == 1
        assert sorted(m["launch_group"]["position"] for m in group) == [0, 1, 2]
        kernel_ends = [m["kernel_end"] for m in sorted(group, key=lambda m: m["launch_group"]["position"])]
        assert kernel_ends == sorted(kernel_ends)
        assert group[0]["launch_group"]["name"] == f"nodes~1/ranks~2/launch~{launch}"
    log = (results / "logs" / "shuffle" / "groups" / "nodes~1" / "ranks~2" / "launch~0.log").read_text()
    assert log.count("records in") == 3 and "(launch group nodes~1/ranks~2/launch~0, 3 points)" in log
    table = pd.read_parquet(results / "tables" / "shuffle.parquet")
    assert table["point"].nunique() == 3 and sorted(table["launch"].unique()) == [0, 1]
    # each launch's records name its job, one for the three points measured in it: the report pairs their ratios
    jobs = table.groupby("launch")["launch_job"].unique()
    assert [len(j) for j in jobs] == [1, 1] and jobs[0][0] != jobs[1][0]
    assert jobs[0][0].startswith("nodes~1/ranks~2/launch~0@")
    first, second = sorted(table["point"].unique())[:2]
    assert ratio(table, second, first, "bandwidth_Bps").paired
    assert (pd.read_csv(results / "tables" / "shuffle_summary.csv")["launches"] == 2).all()
    assert not list((results / ".kept").rglob("*.jsonl"))  # a launch group that finished keeps no copies
    assert "shuffle_group" not in snakemake(work, "--dry-run").stdout  # done: a rerun runs nothing
    # the fixed cost is a launch's, shared by its points
    monkeypatch.chdir(work)
    assert main(["--configfile", "config.yaml", "efficiency"]) == 0
    out = capsys.readouterr().out
    inside = next(x for x in out.splitlines() if x.startswith("inside launches"))
    assert 0 < float(inside.split()[2]) <= float(out.split("campaign wall time")[1].split()[0]), inside
    line = next(x for x in out.splitlines() if x.strip().startswith("shuffle") and "[" in x)
    assert line.rstrip().endswith("2, 6"), line
    per_launch, per_point = (float(x) for x in re.findall(r"(-?\d+\.\d+) s \[", line))
    assert per_point == pytest.approx(per_launch / 3, abs=0.01)
    # and its four parts: start, set-up between points, untimed inside them, end
    parts = [float(x) for x in out.split("where a launch's fixed cost goes")[1].split("shuffle")[1].split()[:4]]
    assert all(p >= 0 for p in parts) and parts[0] > 0 and parts[1] > 0, parts
    assert sum(parts) == pytest.approx(per_launch, abs=0.03)  # medians of 2 launches: each part and their sum
    # a point an earlier run measured (the results folder keeps it) is not this run's
    old = next((results / "raw" / "shuffle").rglob("*.meta.json"))
    earlier = old.with_name("message_size~512")
    earlier.mkdir()
    run_start = json.loads((results / "campaign_run.json").read_text())["start"]
    (earlier / "window~1.meta.json").write_text(json.dumps({**json.loads(old.read_text()),
                                                            "launch_start": run_start - 600}))
    (earlier / "window~1.jsonl").write_text(old.with_name(old.name.replace(".meta.json", ".jsonl")).read_text())
    assert main(["--configfile", "config.yaml", "efficiency"]) == 0
    again = capsys.readouterr().out
    assert "(1 point-launches in results/raw were not measured by this run: left out)" in again
    assert again.replace(again.splitlines()[1] + "\n", "") == out


KILLER = """#!{python}
# An MPI launcher that runs mpiexec and stops it as soon as the launch group's first point has written its meta.
import json, os, signal, subprocess, sys, time
first = json.load(open(sys.argv[-1]))["group"][0]["meta"]
proc = subprocess.Popen(["mpiexec", *sys.argv[1:]], start_new_session=True)
while proc.poll() is None:
    if os.path.exists(first):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        sys.exit(3)
    time.sleep(0.01)
sys.exit(proc.returncode)
"""


@pytest.mark.pipeline
@pytest.mark.mpi
def test_a_failed_member_loses_none_of_its_group_and_the_rerun_measures_only_the_rest(tmp_path):
    work = write(tmp_path / "work", {
        "campaign": {"name": "groups", "results_dir": "results", "launches": 1, "repetitions": 3, "warmups": 1},
        "shuffle": {**STREAM, "message_sizes": ["1KiB", "2KiB", "4KiB"], "iterations": "auto",
                    "repetition_time": 0.2, "launch_groups": True}})
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER.format(python=sys.executable))
    killer.chmod(0o755)
    first = snakemake(work, "--set-resources", f"shuffle_group_nodes1_ranks2_launch0:mpi='{killer}'", check=False)
    assert first.returncode != 0
    results = work / "results"
    kept = {p.relative_to(results / ".kept" / "shuffle").as_posix() for p in (results / ".kept").rglob("*.jsonl")}
    failed = {p.relative_to(results / "failed" / "shuffle").as_posix() for p in (results / "failed").rglob("*.json")}
    assert len(kept) == 1 and len(failed) == 2 and not (kept & {f.replace(".json", ".jsonl") for f in failed})
    kept_meta = json.loads((results / ".kept" / "shuffle" / next(iter(kept)).replace(".jsonl", ".meta.json"))
                           .read_text())
    record = json.loads((results / "failed" / "shuffle" / next(iter(failed))).read_text())
    assert "kernel exited with status 3" in record["error"] and record["launch_group"]["size"] == 3
    snakemake(work)
    log = (results / "logs" / "shuffle" / "groups" / "nodes~1" / "ranks~2" / "launch~0.log").read_text()
    assert log.count("finished in an earlier run that was not booked") == 1 and log.count("records in") == 2
    found = metas(results)
    assert len(found) == 3 and not list((results / "failed").rglob("*.json"))
    restored = found[next(iter(kept)).removesuffix(".jsonl")]
    assert restored["launch_start"] == kept_meta["launch_start"]  # the finished point was not measured again
    others = [m for path, m in found.items() if path + ".jsonl" not in kept]
    assert all(m["launch_start"] > restored["launch_start"] for m in others)
    # the rerun's launch held the two points still missing
    assert len({m["launch_start"] for m in others}) == 1 and len(others[0]["launch_group"]["order"]) == 2
    assert not list((results / ".kept").rglob("*.jsonl"))


@pytest.mark.pipeline
@pytest.mark.dragon
@pytest.mark.skipif(not Path(sys.executable).with_name("dragon").exists(), reason="dragonhpc is not installed")
def test_kv_points_run_in_one_dragon_launch_through_snakemake_and_reach_the_report(tmp_path):
    work = write(tmp_path / "work", {
        "campaign": {"name": "kv-groups", "results_dir": "results", "launches": 1, "repetitions": 2, "warmups": 1},
        "kv": {"operations": ["put", "get"], "value_sizes": ["1KiB"], "clients_per_node": [1], "total_mem": "32MiB",
               "keys_per_client": 20, "iterations": 2}})
    dry = snakemake(work, "--dry-run")
    assert "rule kv_group_nodes1_clients_per_node1_managers_per_node1_launch0:" in dry.stdout
    assert "rule kv_point:" not in dry.stdout
    snakemake(work)
    raw = work / "results" / "raw" / "kv"
    found = sorted(json.loads(p.read_text())["point"]["operation"] for p in raw.rglob("*.meta.json"))
    assert found == ["get", "put"]
    by_position = sorted((json.loads(p.read_text()) for p in raw.rglob("*.meta.json")),
                         key=lambda m: m["launch_group"]["position"])
    first, second = by_position
    assert first["launch_start"] == second["launch_start"] and first["launch_group"]["size"] == 2
    # Dragon started once: the group's first point carries its start-up, the second found it running
    assert first["dragon_startup_s"] > 0 and second["dragon_startup_s"] == 0.0
    # ddict_per_group is on by default: the first point made the DDict, the second found it (and the clients)
    assert not first["ddict_reused"] and second["ddict_reused"] and second["clients_reused"]
    html = (work / "results" / "report.html").read_text()
    assert "Data: bytes (movebench" in html and "only after a run with data_format: numpy" in html
