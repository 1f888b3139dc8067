"""A sweep extended by one value measures only the new points, with launch groups on: the old records stay byte for
byte, the new point's launches are groups of their own, and removing the value again measures nothing. The same on
the test cluster: tests/test_slurm_campaign.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import copied_workflow, snakemake

pytestmark = [pytest.mark.pipeline, pytest.mark.mpi]

STREAM = {"patterns": ["uni"], "ranks": [2], "nodes": [1], "windows": [1], "iterations": 20, "launch_groups": True}


def config(sizes: list[str]) -> dict:
    return {"campaign": {"name": "sweep", "results_dir": "results", "launches": 2, "repetitions": 2, "warmups": 1,
                         "launch_order_seed": 5},
            "shuffle": {**STREAM, "message_sizes": sizes}}


def write(work: Path, sizes: list[str]) -> None:
    (work / "config.yaml").write_text(json.dumps(config(sizes)))


def raw_files(work: Path) -> dict[str, bytes]:
    raw = work / "results" / "raw"
    return {p.relative_to(raw).as_posix(): p.read_bytes() for p in sorted(raw.rglob("*")) if p.is_file()}


def scheduled(dry_run_stdout: str) -> dict[str, int]:
    """Rule -> jobs, from a dry run's job table."""
    table = dry_run_stdout.split("Job stats:")[1] if "Job stats:" in dry_run_stdout else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def new_outputs(dry_run_stdout: str) -> set[str]:
    """The launch paths whose records the dry run's shuffle jobs would write."""
    outputs = re.findall(r"rule shuffle_\w+:\n(?:.*\n)*?\s+output: (.*)", dry_run_stdout)
    return {m.group(1) for line in outputs for m in re.finditer(r"results/raw/shuffle/([^,\s]+)\.jsonl", line)}


def test_a_new_sweep_value_measures_only_its_points_and_the_old_records_stay_byte_for_byte(tmp_path):
    work = tmp_path
    write(work, ["1KiB", "4KiB"])
    snakemake(work)
    before = raw_files(work)
    assert len([p for p in before if p.endswith(".jsonl")]) == 4  # 2 points x 2 launches

    write(work, ["1KiB", "2KiB", "4KiB"])
    dry = snakemake(work, "--dry-run").stdout
    jobs = scheduled(dry)
    # one launch group per launch, each of the new point alone
    assert {rule: n for rule, n in jobs.items() if rule.startswith("shuffle_")} == {
        "shuffle_group_nodes1_ranks2_launch0": 1, "shuffle_group_nodes1_ranks2_launch1": 1}, dry[-3000:]
    new = {"pattern~uni/nodes~1/ranks~2/message_size~2048/window~1",
           "pattern~uni/nodes~1/ranks~2/message_size~2048/window~1/launch~1"}
    assert new_outputs(dry) == new, dry[-3000:]

    snakemake(work)
    after = raw_files(work)
    assert {path: after[path] for path in before} == before  # every old file, byte for byte
    added = {p.removesuffix(".jsonl").removeprefix("shuffle/") for p in set(after) - set(before)
             if p.endswith(".jsonl")}
    assert added == new
    for path in new:
        meta = json.loads(after[f"shuffle/{path}.meta.json"])
        assert meta["launch_group"]["size"] == 1 and meta["launched_as"]
    assert "shuffle_group" not in snakemake(work, "--dry-run").stdout  # done: nothing left

    # the value removed again: nothing to measure (the tables follow the grid), nothing deleted
    write(work, ["1KiB", "4KiB"])
    dry = snakemake(work, "--dry-run").stdout
    assert not [rule for rule in scheduled(dry) if rule.startswith("shuffle_")], dry[-3000:]
    snakemake(work)
    assert raw_files(work) == after


def test_a_changed_task_measures_its_launches_again_in_groups(tmp_path):
    """The records stand only for the task and kernel they were measured with: more repetitions measure again."""
    work = tmp_path
    write(work, ["1KiB", "4KiB"])
    snakemake(work)
    changed = config(["1KiB", "4KiB"])
    changed["campaign"]["repetitions"] = 3
    (work / "config.yaml").write_text(json.dumps(changed))
    jobs = scheduled(snakemake(work, "--dry-run").stdout)
    assert {rule: n for rule, n in jobs.items() if rule.startswith("shuffle_")} == {
        "shuffle_group_nodes1_ranks2_launch0": 1, "shuffle_group_nodes1_ranks2_launch1": 1}


def test_a_kernel_edit_measures_a_grouped_familys_launches_again_and_a_report_edit_does_not(tmp_path):
    """A measured launch is in no job, so the workflow itself notices its kernel changed (the meta's
    `launched_as`); the campaign runs from a copy of the package, whose files the test edits."""
    from test_reruns import edit

    repo = tmp_path / "repo"
    work = tmp_path / "work"
    work.mkdir()
    write(work, ["1KiB", "4KiB"])
    copied = copied_workflow(repo, work)

    def run(*args):
        return copied(*args).stdout

    run()
    edit(repo / "src/movebench/families/shuffle/report.py")
    assert not [rule for rule in scheduled(run("--dry-run")) if rule.startswith("shuffle_")]
    edit(repo / "src/movebench/families/shuffle/kernel.py")
    dry = run("--dry-run")
    assert {rule: n for rule, n in scheduled(dry).items() if rule.startswith("shuffle_")} == {
        "shuffle_group_nodes1_ranks2_launch0": 1, "shuffle_group_nodes1_ranks2_launch1": 1}
    assert len(new_outputs(dry)) == 4  # every launch of both points, again in groups
