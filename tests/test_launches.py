"""Launches as the unit of replication: each point measured in `launches` jobs of its own, interleaved round by
round in a seeded random order, every record saying which launch it came from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import snakemake
from movebench.core import adaptive_launches, records
from movebench.core.task import Task, launch_path, point_path_of
from movebench.engine import aggregate, launch, plan
from movebench.engine import config as cc

STREAM = {"patterns": ["uni"], "message_sizes": ["4KiB", "64KiB"], "windows": [4], "iterations": 20}


def tasks_of(campaign: dict, section: dict | None = None):
    config = cc.validate({"campaign": campaign, "shuffle": {**STREAM, **(section or {})}})
    return config, plan.tasks(config, plan.grid(config))["shuffle"]


def test_three_launches_by_default_each_a_task_of_its_own():
    config, tasks = tasks_of({})
    assert config["shuffle"]["launches"] == 3
    paths = list(tasks)
    assert len(paths) == 2 * 3
    point = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~4"
    assert paths[:3] == [point, f"{point}/launch~1", f"{point}/launch~2"]
    assert [tasks[p].launch for p in paths[:3]] == [0, 1, 2]
    assert all(tasks[p].point == tasks[point].point for p in paths[:3])  # one point, three launches
    assert [point_path_of(p) for p in paths[:3]] == [point] * 3


def test_one_launch_keeps_the_paths_and_tasks_of_before():
    _, tasks = tasks_of({"launches": 1})
    assert all("launch" not in path for path in tasks)
    assert all("launch" not in task.to_dict() and "launches" not in task.to_dict() for task in tasks.values())


def test_raising_the_launches_leaves_the_measured_launches_tasks_as_they_were():
    """A task is its rule's params, a rerun trigger: launches 3 -> 4 adds launch~3 and reruns nothing else."""
    _, three = tasks_of({"launches": 3})
    _, four = tasks_of({"launches": 4})
    assert set(four) - set(three) == {p for p in four if p.endswith("launch~3")}
    assert all(three[p].to_dict() == four[p].to_dict() for p in three)
    _, one = tasks_of({"launches": 1})
    assert all(one[p].to_dict() == three[p].to_dict() for p in one)  # launch 0 keeps its one-launch task


def test_the_family_section_overrides_the_campaign_and_a_bad_rule_is_refused():
    config, _ = tasks_of({"launches": 5}, {"launches": 2})
    assert config["shuffle"]["launches"] == 2
    with pytest.raises(cc.ConfigError) as error:
        tasks_of({"launches": {"min": 4, "max": 3}})
    assert "campaign.launches = {min: 4, max: 3, ci_target: 0.1}: min 4 is above max 3" in error.value.message()
    with pytest.raises(cc.ConfigError) as error:
        tasks_of({"launches": 0})
    assert "campaign.launches = 0" in error.value.message()
    config, tasks = tasks_of({"launches": {"max": 4}})
    assert config["shuffle"]["launches"] == {"min": 2, "max": 4, "ci_target": 0.1} and len(tasks) == 2 * 4


def test_launches_run_round_by_round_in_a_seeded_shuffled_order():
    config = cc.validate({"campaign": {}, "shuffle": {**STREAM, "message_sizes": ["1KiB", "2KiB", "4KiB", "8KiB"]},
                          "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[8, 8]]}})
    tasks = plan.tasks(config, plan.grid(config))
    order = plan.launch_order(tasks, seed=7)
    assert sorted(order) == sorted((f, p) for f, by in tasks.items() for p in by)
    rounds = [tasks[f][p].launch for f, p in order]
    assert rounds == sorted(rounds)  # round k of every point before round k+1 of any
    within = [[(f, point_path_of(p)) for f, p in order if tasks[f][p].launch == k] for k in range(3)]
    assert len({tuple(r) for r in within}) > 1  # each round shuffled on its own
    assert order == plan.launch_order(tasks, seed=7) != plan.launch_order(tasks, seed=8)
    priority = plan.priorities(order)
    assert [priority[f][p] for f, p in order] == sorted((priority[f][p] for f, p in order), reverse=True)


def test_records_without_a_launch_are_launch_0_and_launch_files_tabulate_as_one_point(tmp_path):
    raw = tmp_path / "raw" / "shuffle"
    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 4}
    path = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~4"
    files = []
    for k in range(3):
        recs = [records.record("shuffle", "uni", point, rep, False, elapsed_s=0.01 * (1 + k), nbytes=1000)
                for rep in range(3)]
        if k:
            for rec in recs:
                rec["launch"] = k
        target = raw / f"{launch_path(path, k)}.jsonl"
        records.write_jsonl(target, recs)
        files.append(target)
    table = aggregate.load("shuffle", files)
    assert set(table["point"]) == {path} and sorted(table["launch"].unique()) == [0, 1, 2]
    summary = aggregate.summarize("shuffle", table)
    row = summary[summary["measure"] == "elapsed_s"].iloc[0]
    assert row["launches"] == 3 and row["n"] == 9 and row["median"] == pytest.approx(0.02)


def _records(path: Path, values: list[float]) -> None:
    point = {"pattern": "uni"}
    records.write_jsonl(path, [records.record("shuffle", "uni", point, i, False, elapsed_s=v, nbytes=1)
                               for i, v in enumerate(values)])


def test_an_adaptive_rule_skips_a_launch_once_the_earlier_ones_are_precise_enough(tmp_path):
    point = {"pattern": "uni"}
    rule = {"min": 2, "max": 4, "ci_target": 0.05}
    raw = tmp_path / "raw" / "shuffle"
    task = Task("shuffle", "uni", point, {}, 3, 1, 2, 1, launch=2, launches=rule)
    out = raw / f"{launch_path('pattern~uni', 2)}.jsonl"
    _records(raw / "pattern~uni.jsonl", [1.00, 1.01, 0.99])
    assert launch.adaptive_launch(task, out, launch_path("pattern~uni", 2)) == (None, None)  # launch 1 not there
    _records(raw / "pattern~uni" / "launch~1.jsonl", [1.30, 1.31, 1.29])
    assert launch.adaptive_launch(task, out, launch_path("pattern~uni", 2))[0] is None  # 2 launches 30% apart
    for meta in ("pattern~uni.meta.json", "pattern~uni/launch~1.meta.json"):
        records.write_json(raw / meta, {"launch_wall_s": 10.0})
    # the spread is between launches and a launch costs 7 s of 3 s repetitions: one repetition per launch
    assert launch.adaptive_launch(task, out, launch_path("pattern~uni", 2)) == (None, 1)
    # spread within launches as much as between: the repetitions a launch is worth depend on what it costs
    _records(raw / "pattern~uni.jsonl", [1.0, 1.3, 0.8])
    _records(raw / "pattern~uni" / "launch~1.jsonl", [1.5, 1.2, 1.8])
    assert launch.adaptive_launch(task, out, launch_path("pattern~uni", 2)) == (None, 2)  # 6 s a launch
    for meta in ("pattern~uni.meta.json", "pattern~uni/launch~1.meta.json"):
        records.write_json(raw / meta, {"launch_wall_s": 38.0, "launch_group": {"name": "g", "size": 10}})
    # in a launch group of 10 the wall is the group's: the member's share (3 s) is its own repetitions, the launch
    # costs it next to nothing, and one repetition a launch is best
    assert launch.adaptive_launch(task, out, launch_path("pattern~uni", 2)) == (None, 1)
    _records(raw / "pattern~uni" / "launch~1.jsonl", [1.001, 1.0, 1.002])
    why, _ = launch.adaptive_launch(task, out, launch_path("pattern~uni", 2))
    assert why and why.startswith("launches.ci_target 0.05 reached after 2 launches")
    below_min = Task("shuffle", "uni", point, {}, 3, 1, 2, 1, launch=1, launches=rule)
    assert launch.adaptive_launch(below_min, out, launch_path("pattern~uni", 1)) == (None, None)
    fixed = Task("shuffle", "uni", point, {}, 3, 1, 2, 1, launch=2, launches=3)
    assert launch.adaptive_launch(fixed, out, launch_path("pattern~uni", 2)) == (None, None)


@pytest.mark.pipeline
@pytest.mark.mpi
def test_a_campaign_runs_its_launches_interleaved_and_reports_them(tmp_path):
    """From the run's own records: every launch of round k started before any launch of round k+1, in the order
    results/launch_order.json recorded with its seed; no point's launches ran back to back."""
    work = tmp_path / "work"
    work.mkdir()
    config = {"campaign": {"name": "launches", "results_dir": "results", "launches": 3, "repetitions": 2,
                           "warmups": 0, "launch_order_seed": 11},
              "shuffle": {**STREAM, "message_sizes": ["1KiB", "2KiB", "4KiB"], "iterations": 5}}
    (work / "config.yaml").write_text(json.dumps(config))
    snakemake(work, "--cores", "2")
    results = work / "results"
    recorded = json.loads((results / "launch_order.json").read_text())
    assert recorded["seed"] == 11 and len(recorded["order"]) == 9
    started = []
    for meta_file in (results / "raw" / "shuffle").rglob("*.meta.json"):
        meta = json.loads(meta_file.read_text())
        path = meta_file.relative_to(results / "raw" / "shuffle").as_posix().removesuffix(".meta.json")
        assert meta["launch"] == int(path.rsplit("launch~", 1)[1]) if "launch~" in path else meta["launch"] == 0
        assert meta["launch_order_seed"] == 11
        started.append((meta["launch_start"], meta["launch"], point_path_of(path), path))
    started.sort()
    assert [launch_ for _, launch_, _, _ in started] == sorted(launch_ for _, launch_, _, _ in started)
    assert [["shuffle", path] for *_, path in started] == recorded["order"]
    points = [point for _, _, point, _ in started]
    assert all(a != b for a, b in zip(points, points[1:], strict=False))  # never one point's launches in a row
    table = pd.read_parquet(results / "tables" / "shuffle.parquet")
    assert sorted(table["launch"].unique()) == [0, 1, 2] and table["point"].nunique() == 3
    summary = pd.read_csv(results / "tables" / "shuffle_summary.csv")
    assert (summary["launches"] == 3).all()
    assert (pd.read_csv(results / "tables" / "shuffle_points.csv")["status"] == "ok").all()
    # Snakemake's default rate limit was dropped before the first job (tests/test_profiles.py): the
    # run went without its timers, and (the snakemake call above returning at all) exited.
    assert json.loads((results / "campaign_run.json").read_text())["scheduler_rate_limit"] is None
    dry = snakemake(work, "--dry-run")
    assert "shuffle_point" not in dry.stdout  # every launch is done: a rerun runs nothing


def _launches(raw: Path, point_path: str, launches: list[list[float]]) -> None:
    for k, values in enumerate(launches):
        _records(raw / f"{launch_path(point_path, k)}.jsonl", values)


def test_an_mdc_target_stops_a_quiet_point_and_runs_a_noisy_one_up_to_max(tmp_path):
    """A point stops adding launches once a comparison with a rerun would find a change of mdc_target; one whose own
    launches spread too far runs every launch up to max, the rule's budget."""
    rng = np.random.default_rng(5)
    raw = tmp_path / "raw" / "shuffle"
    rule = {"min": 3, "max": 6, "mdc_target": 0.15}
    # the family: 8 quiet points (2% launch spread) and the point under test
    for i in range(8):
        _launches(raw, f"pattern~bidi/message_size~{i}",
                  [list(np.exp(rng.normal(0, 0.02) + rng.normal(0, 0.005, 3))) for _ in range(3)])

    def decide(spread: float, launch_index: int):
        path = "pattern~uni"  # the path of the task's point
        _launches(raw, path, [list(np.exp(rng.normal(0, spread) + rng.normal(0, 0.005, 3)))
                              for _ in range(launch_index)])
        task = Task("shuffle", "uni", {"pattern": "uni"}, {}, 3, 1, 2, 1, launch=launch_index, launches=rule)
        where = launch_path(path, launch_index)
        return launch.adaptive_launch(task, raw / f"{where}.jsonl", where)

    why, _ = decide(0.02, 3)
    assert why and why.startswith("launches.mdc_target 0.15 reached after 3 launches")
    for index in (3, 4, 5):  # 60% between launches: never reached, so every launch up to max runs
        assert decide(0.6, index)[0] is None
    mdc = adaptive_launches.detectable_change([[1.0, 1.0], [1.5, 1.5], [0.7, 0.7]], None)
    assert mdc > 1.0  # the point's own 3 launches, no prior: a large change only
