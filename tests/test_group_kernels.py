"""Launch groups: several points of one family in one launch (core.runner's docstring), run for real.

A group file is written here by hand, as launch will write it, and its kernel started with the command
`Runtime.group_command` builds: mpiexec for shuffle and bcast, Dragon's launcher for kv.
"""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import MPIEXEC, make_task
from movebench.core import records, runner
from movebench.core.task import Task
from movebench.engine import launchers
from movebench.families import load as family_of


def write_group(tasks, folder: Path) -> tuple[list[Task], Path]:
    """The group file: each task with its own records and meta paths in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    group = [Task.from_dict({**t.to_dict(), "out": str(folder / f"{i}.jsonl"), "meta": str(folder / f"{i}.meta.json")})
             for i, t in enumerate(tasks)]
    path = folder / "group.json"
    path.write_text(json.dumps({"group": [t.to_dict() for t in group]}, indent=2))
    return group, path


def point_of(rec: dict, task: Task) -> dict:
    """The record's point (its keys are the record's first columns after the family and variant)."""
    return {k: rec.get(k) for k in task.point}


def run_group(tasks, folder: Path, timeout=120, env=None):
    """The group's kernel in one launch; returns (process, [(records or None, meta or None) per task])."""
    group, path = write_group(tasks, folder)
    runtime = launchers.runtime(group[0])
    argv = runtime.group_command(group, path, MPIEXEC)
    env = runtime.environment(group[0], dict(os.environ, **(env or {})))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    done = [(records.read_jsonl(t.out) if Path(t.out).exists() else None,
             json.loads(Path(t.meta).read_text()) if Path(t.meta).exists() else None) for t in group]
    return proc, done


def test_a_task_file_is_one_task_or_a_group(tmp_path):
    tasks = [make_task("shuffle", {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": size, "window": 1},
                       {"iterations": 2, "repetition_time": 0.5}) for size in (64, 128)]
    group, path = write_group(tasks, tmp_path)
    assert runner.load_tasks([str(path)]) == group
    with pytest.raises(SystemExit, match="holds a launch group"):
        runner.load_task([str(path)])
    single = tmp_path / "one.json"
    single.write_text(json.dumps(group[1].to_dict()))
    assert runner.load_tasks([str(single)]) == [group[1]] and runner.load_task([str(single)]) == group[1]
    path.write_text(json.dumps({"group": [group[0].to_dict(), group[0].to_dict()]}))
    with pytest.raises(ValueError, match="distinct files"):
        runner.load_tasks([str(path)])


def test_group_commands_place_the_first_task_and_size_dragon_for_the_largest(tmp_path):
    shuffle = [make_task("shuffle", {"pattern": "uni", "nodes": 1, "ranks": 4, "message_size": 64, "window": 1}, {})]
    group, path = write_group(shuffle, tmp_path / "mpi")
    assert launchers.runtime(group[0]).group_command(group, path, "mpiexec")[-6:] == [
        "-n", "4", sys.executable, "-m", "movebench.families.shuffle.kernel", str(path)]
    kv = [kv_task("put", size) for size in (512, 2**20, 4096)]
    group, path = write_group(kv, tmp_path / "kv")
    argv = launchers.runtime(group[0]).group_command(group, path)
    largest = family_of("kv").runtime_options(group[1])
    wrapper = argv[:argv.index("--")]
    assert wrapper[wrapper.index("--shm-bytes") + 1] == str(largest["shm_bytes"])
    assert f"DRAGON_DEFAULT_SEG_SZ={largest['env']['DRAGON_DEFAULT_SEG_SZ']}" in wrapper
    assert [wrapper[i + 1] for i, a in enumerate(wrapper) if a == "--meta"] == [t.meta for t in group]


# --- MPI families ---


@pytest.mark.mpi
def test_a_shuffle_group_writes_each_points_records_and_meta(tmp_path):
    streams = {"iterations": 3, "repetition_time": 0.5}
    points = [({"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 4}, streams),
              ({"pattern": "bidi", "nodes": 1, "ranks": 2, "message_size": 1024, "window": 2}, streams),
              ({"pattern": "shuffle", "nodes": 1, "ranks": 2, "message_size": 2048, "window": 3, "skew": 0.0},
               {"tuples_per_rank": 2000, "tuple_size": 32, "seed": 7})]
    tasks = [make_task("shuffle", point, settings, repetitions=2, warmups=1) for point, settings in points]
    proc, done = run_group(tasks, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for position, (task, (recs, meta)) in enumerate(zip(tasks, done, strict=True)):
        assert [(r["rep"], r["warmup"]) for r in recs] == [(0, True), (0, False), (1, False)]
        assert all(r["ok"] and point_of(r, task) == task.point and r["variant"] == task.variant for r in recs)
        assert meta["point"] == task.point and meta["settings"] == task.settings
        assert (meta["group_position"], meta["group_size"]) == (position, 3)
    assert done[2][0][0]["verified"] and "partition_s" in done[2][0][0]


@pytest.mark.mpi
def test_an_io_group_writes_verifies_and_removes_each_points_files(tmp_path):
    from io_support import io_task

    tasks = [io_task(2, "sfsw", "posix", tmp_path, size=40000), io_task(2, "mfmw", "mpiio", tmp_path, size=70000)]
    proc, done = run_group(tasks, tmp_path / "group")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for position, (task, (recs, meta)) in enumerate(zip(tasks, done, strict=True)):
        assert [(r["rep"], r["warmup"]) for r in recs] == [(0, True), (0, False), (1, False)]
        assert all(r["ok"] and r["verified"] is True and point_of(r, task) == task.point for r in recs)
        assert recs[-1]["bytes"] == 2 * task.point["size_per_proc"]
        assert (meta["group_position"], meta["group_size"]) == (position, 2)
    target = tmp_path / "target"
    assert not target.exists() or not list(target.rglob("*"))  # each point removed what it wrote


@pytest.mark.mpi
@pytest.mark.parametrize("probe", ["memcpy", "fio"])
def test_a_calibration_group_measures_each_probe_point_in_one_launch(tmp_path, probe):
    if probe == "memcpy":
        tasks = [make_task("calibration", {"probe": "memcpy", "ranks": 2, "size": size},
                           {"iterations": 4, "repetition_time": 0.01}, repetitions=2) for size in (4096, 65536)]
    else:
        tasks = [make_task("calibration", {"probe": "fio", "pattern": pattern, "ranks": 2, "size_per_proc": 65536},
                           {"fio_path": str(tmp_path / "fio")}, repetitions=2) for pattern in ("sfsw", "mfmw")]
    proc, done = run_group(tasks, tmp_path / "group")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for position, (task, (recs, meta)) in enumerate(zip(tasks, done, strict=True)):
        assert [(r["rep"], r["warmup"]) for r in recs] == [(0, True), (0, False), (1, False)]
        assert all(r["ok"] and point_of(r, task) == task.point and r["bytes"] > 0 for r in recs)
        assert (meta["group_position"], meta["group_size"]) == (position, 2)
        # where its repetitions began (fio's: before its first fio process), for efficiency's set-up and untimed
        assert meta["kernel_start"] < meta["kernel_end"]
        assert meta["kernel_end"] - meta["kernel_start"] >= sum(r["elapsed_s"] for r in recs)
    assert done[0][1]["kernel_end"] <= done[1][1]["kernel_start"]
    if probe == "fio":
        assert not list((tmp_path / "fio").iterdir())  # each point removed its fio folder


@pytest.mark.mpi
def test_bcast_memory_of_a_point_is_its_own_in_a_group(tmp_path):
    """8 MiB pickled first, then the in-place point: its figures stay those it has alone
    (tests/test_bcast.py, test_receiver_memory_pickle_twice_in_place_once), and the pickled one's after it too."""
    def task(method):
        point = {"kind": "dense", "method": method, "nodes": 1, "ranks": 2, "shape": "1024x1024", "dtype": "float64"}
        return make_task("bcast", point, {"seed": 2024}, repetitions=3, warmups=1)

    proc, done = run_group([task("pickle"), task("buffer"), task("pickle")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (pickled, _), (in_place, meta), (again, _) = done
    payload = pickled[0]["payload_bytes"]
    for rec in pickled[1:] + again[1:]:
        assert rec["rss_hwm_delta_bytes"] > 1.8 * payload and rec["tracemalloc_peak_bytes"] >= 2 * payload
        # the root's stream and copy: without its memory handed back before the baseline, the earlier point's
        # freed heap held half of it (8 MiB instead of 16)
        assert rec["root_rss_hwm_delta_bytes"] > 1.7 * payload
    for rec in in_place[1:]:
        assert 0.9 * payload < rec["rss_hwm_delta_bytes"] < 1.3 * payload
        assert rec["root_rss_hwm_delta_bytes"] < 0.3 * payload
    assert (meta["group_position"], meta["group_size"]) == (1, 3)


@pytest.mark.mpi
def test_a_bcast_points_memory_does_not_depend_on_its_place_in_the_group(tmp_path):
    """The same 320 kB point first and third: without the launch's rehearsal (bcast.kernel.rehearse) the first
    showed ~1.1 MB more RSS high-water mark per receiver, the process's first pass through the code; with one
    rehearsal pass 140-270 kB more, in every launch (docs/notes/kernels.md, sections 12 and 13).

    A place effect shows in every launch. Under load, one launch in several can charge one of its points for a late
    receiver's unexpected-message copy (section 13), so a second launch is asked for before failing: a place
    effect fails both."""
    point = {"kind": "dense", "method": "buffer", "nodes": 1, "ranks": 2, "shape": "200x200", "dtype": "float64"}
    other = {**point, "method": "pickle"}
    gaps = []
    for attempt in range(2):
        tasks = [make_task("bcast", p, {"seed": 2024}, repetitions=3, warmups=1) for p in (point, other, point)]
        proc, done = run_group(tasks, tmp_path / f"launch-{attempt}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (first, _), _, (third, _) = done
        payload = first[0]["payload_bytes"]
        first_delta = max(r["rss_hwm_delta_bytes"] for r in first[1:])
        third_delta = max(r["rss_hwm_delta_bytes"] for r in third[1:])
        gaps.append((first_delta, third_delta))
        if abs(first_delta - third_delta) < 0.5 * payload:
            return
    raise AssertionError(f"first and third point's RSS high-water deltas, two launches: {gaps}; bound {0.5 * payload}")


# --- kv: one Dragon run for the group ---

KEYS, PASSES = 20, 2


def kv_task(operation, value_size, repetitions=2, **extra_settings):
    point = {"operation": operation, "nodes": 1, "clients_per_node": 2, "managers_per_node": 1,
             "value_size": value_size}
    settings = {"streams_per_manager": 5, "total_mem": 32 * 2**20, "iterations": PASSES, "keys_per_client": KEYS,
                **extra_settings}
    return make_task("kv", point, settings, repetitions=repetitions, warmups=1)


def run_kv_group(tasks, folder, reuse=False):
    """The group under Dragon; nothing of the run may be left (processes marked by the run, /dev/shm)."""
    from test_kv_dragon import dragon_segments, marked_processes

    marker = uuid.uuid4().hex
    before = dragon_segments()
    env = {"MOVEBENCH_TEST_RUN": marker}
    for task in tasks:
        task.settings["ddict_per_group"] = reuse
    proc, done = run_group(tasks, folder, timeout=150, env=env)
    assert marked_processes(marker) == [], "processes of the run are still alive"
    assert dragon_segments() - before == set(), "the run left /dev/shm segments"
    return proc, done


dragon = pytest.mark.skipif(not Path(sys.executable).with_name("dragon").exists(),
                            reason="dragonhpc is not installed beside this Python")


@pytest.mark.dragon
@dragon
@pytest.mark.parametrize("reuse", [False, True])
def test_a_kv_group_runs_its_points_in_one_dragon_runtime(tmp_path, reuse):
    tasks = [kv_task("put", 512), kv_task("get", 1024)]
    proc, done = run_kv_group(tasks, tmp_path, reuse)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (first, first_meta), (second, second_meta) = done
    for task, (recs, meta) in zip(tasks, done, strict=True):
        assert len(recs) == 3 and all(r["ok"] and r["verified"] and point_of(r, task) == task.point
                                       for r in recs)
        assert all(r["bytes"] == 2 * KEYS * task.point["value_size"] * PASSES for r in recs)
        assert meta["group_size"] == 2
        assert sum(s["num_keys"] for s in meta["ddict_stats"]) == 2 * KEYS
        assert meta["dragon_launch"]["returncode"] == 0
    assert (first_meta["group_position"], second_meta["group_position"]) == (0, 1)
    # the runtime started once: its start is the first point's, in its meta and records
    assert first_meta["dragon_startup_s"] > 0 and second_meta["dragon_startup_s"] == 0.0
    assert {r["dragon_startup_s"] for r in second} == {0.0}
    assert first_meta["head_end"] < second_meta["head_end"]
    # each point's repetitions began after its clients and DDict were ready (efficiency's set-up and untimed)
    assert first_meta["head_start"] < first_meta["kernel_start"] < first_meta["kernel_end"] \
        <= second_meta["kernel_start"] < second_meta["kernel_end"]
    assert first_meta["dragon_launch"] == second_meta["dragon_launch"]  # one launch, one record
    # a DDict per point, or one made for the first and cleared for the second (its keys only in the stats)
    # the last point's DDict is left to the runtime's teardown, which leaves nothing for the sweep
    assert not first_meta["ddict_reused"] and first_meta["ddict_create_s"] > 0
    assert second_meta["ddict_destroy_s"] is None
    assert second_meta["dragon_launch"]["killed_pids"] == [] and second_meta["dragon_launch"]["removed_segments"] == []
    assert second_meta["ddict_reused"] is reuse and (second_meta["ddict_create_s"] == 0.0) is reuse
    assert (first_meta["ddict_destroy_s"] == 0.0) is reuse and (first_meta["ddict_destroy_s"] > 0) is not reuse
    assert (second_meta["ddict_clear_s"] > 0) is reuse
    assert {r["ddict_clear_s"] for r in second} == {second_meta["ddict_clear_s"]}
    # the clients too, as gups_ddict's Pool: started for the first point, handed the second
    assert not first_meta["clients_reused"] and second_meta["clients_reused"]
    assert [p["host"] for p in first_meta["client_placement"]] == [p["host"] for p in second_meta["client_placement"]]


@pytest.mark.dragon
@dragon
def test_a_kv_point_that_fails_leaves_no_files_and_the_next_point_runs(tmp_path):
    """Even when the group reuses its DDict, the point after a failed one gets a fresh one."""
    tasks = [kv_task("get", 512, fault_round=1), kv_task("put", 512)]
    proc, done = run_kv_group(tasks, tmp_path, reuse=True)
    assert proc.returncode != 0
    assert "movebench.kv: 1 of the launch's points failed: get 512 B (ClientFailed)" in proc.stderr
    assert "fault injected in client 0, round 1" in proc.stdout + proc.stderr
    assert done[0] == (None, None)
    recs, meta = done[1]
    assert len(recs) == 3 and all(r["ok"] and r["verified"] for r in recs)
    assert meta["group_position"] == 1 and meta["dragon_startup_s"] == 0.0 and not meta["ddict_reused"]
    assert not meta["clients_reused"]  # nor the failed point's clients: fresh ones
