"""dragonrun's sweep of a node: the run's processes found by the scratch path in their environment, killed after a
grace period, and the /dev/shm segments that name them (or only dead processes) removed; nothing else touched.
Across the nodes of a Slurm allocation: tests/test_multinode.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from movebench.engine.launchers import dragon as dragonrun


def start(env_extra: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, **env_extra})


def test_sweep_kills_the_runs_processes_and_removes_their_segments_only(tmp_path):
    scratch = f"/tmp/movebench-dragon-test-{uuid.uuid4().hex}"
    ours = [start({dragonrun.SCRATCH_ENV: scratch}) for _ in range(2)]
    other_run = start({dragonrun.SCRATCH_ENV: scratch + "-another"})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    shm = tmp_path / "shm"
    shm.mkdir()
    names = {
        "ours": f"_dragon_0_{ours[0].pid}__def_part0",
        "pool": f"_dragon_dragon_dict_pool__{ours[1].pid}_4294967299_0{ours[1].pid}_part0",
        "dead": f"_dragon_0_{dead.pid}__inf_manifest",
        "other": f"_dragon_0_{other_run.pid}__def_part0",
        "mpich": "mpich_shm_123",
    }
    for name in names.values():
        (shm / name).write_bytes(b"x")
    try:
        time.sleep(0.3)  # the children have exec'd python: their environment is readable
        t0 = time.monotonic()
        found = dragonrun.sweep(scratch, grace=0.5, shm=shm)
        took = time.monotonic() - t0
        assert sorted(found["killed_pids"]) == sorted(p.pid for p in ours)
        assert all(p.wait(5) == -9 for p in ours)
        assert other_run.poll() is None  # another run's process: alive
        assert sorted(found["removed_segments"]) == sorted([names["ours"], names["pool"], names["dead"]])
        assert sorted(os.listdir(shm)) == sorted([names["other"], names["mpich"]])
        assert took < 5
    finally:
        for p in [*ours, other_run]:
            p.kill()
            p.wait()


def test_a_clean_run_leaves_nothing_to_sweep_and_costs_no_grace(tmp_path):
    t0 = time.monotonic()
    found = dragonrun.sweep(f"/tmp/movebench-dragon-test-{uuid.uuid4().hex}", grace=5, shm=tmp_path)
    assert found["killed_pids"] == [] and found["removed_segments"] == []
    assert time.monotonic() - t0 < 2


def test_without_an_allocation_the_other_nodes_are_not_swept_and_it_says_so(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert dragonrun.sweep_nodes("/tmp/x", 2, 1.0) == {"error": "no Slurm allocation: the other nodes were not swept"}
