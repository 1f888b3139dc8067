"""kv under the real `dragon -s` launcher, through movebench.engine.launch as a point rule runs it.

Each test starts Dragon (a few seconds each). Every run is marked with an
environment variable so that the processes it left, if any, can be found by
their environment, and /dev/shm is compared before and after.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, make_task
from movebench.core.records import read_jsonl
from movebench.engine.launchers.dragon import named_pids

pytestmark = [pytest.mark.dragon, pytest.mark.skipif(not Path(sys.executable).with_name("dragon").exists(),
                                                     reason="dragonhpc is not installed beside this Python")]

KEYS, VALUE, PASSES = 20, 512, 2


def marked_processes(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
            except OSError:
                continue
    return found


def dragon_segments() -> set[str]:
    """Dragon segments in /dev/shm, less those of another Dragon run still alive (they name its live processes)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith("_dragon_")
            and not any(Path(f"/proc/{pid}").exists() for pid in named_pids(n))}


def launch_point(tmp_path, operation, timeout=120, repetitions=3, data_format=None, **extra_settings):
    """python -m movebench.engine.launch for one kv point; returns (returncode, records, meta, failure, seconds)."""
    marker = f"MOVEBENCH_TEST_RUN={uuid.uuid4().hex}"
    point = {"operation": operation, "nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "value_size": VALUE}
    if data_format:
        point["data_format"] = data_format
    settings = {"streams_per_manager": 5, "total_mem": 32 * 2**20, "iterations": PASSES, "keys_per_client": KEYS,
                **extra_settings}
    task = make_task("kv", point, settings, repetitions=repetitions, warmups=1)
    out, meta, failed = tmp_path / "r.jsonl", tmp_path / "m.json", tmp_path / "failed.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **dict([marker.split("=")]))
    before = dragon_segments()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()),
                           "--timeout", str(timeout), "--out", str(out), "--meta", str(meta), "--failed", str(failed)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout + 60)
    seconds = time.monotonic() - started
    assert marked_processes(marker.split("=")[1]) == [], "processes of the run are still alive"
    assert dragon_segments() - before == set(), "the run left /dev/shm segments"
    recs = read_jsonl(out) if out.exists() else []
    meta_json = json.loads(meta.read_text()) if meta.exists() else None
    failure = json.loads(failed.read_text()) if failed.exists() else None
    if proc.returncode == 0:
        assert failure is None
    return proc, recs, meta_json, failure, seconds


def test_an_adaptive_rule_is_told_to_the_clients_round_by_round(tmp_path):
    proc, recs, meta, _, _ = launch_point(tmp_path, "frozen_get", repetitions={"min": 2, "max": 4, "ci_target": 1e-9})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(r["rep"], r["warmup"]) for r in recs] == [(0, True), (0, False), (1, False), (2, False), (3, False)]
    assert all(r["ok"] and r["verified"] for r in recs)
    assert {(r["stop_reason"], r["repetitions_run"]) for r in recs} == {("max_repetitions", 4)}
    assert len(meta["clients"]) == 2 * len(recs) and meta["repetitions"]["max"] == 4


@pytest.mark.parametrize("operation", ["put", "batch_put", "get", "frozen_get"])
def test_every_operation_round_trips_its_values(tmp_path, operation):
    proc, recs, meta, _, _ = launch_point(tmp_path, operation)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [r["warmup"] for r in recs] == [True, False, False, False]
    for r in recs:
        assert r["ok"] and r["verified"] and r["variant"] == operation and r["clients"] == 2
        # every record says how many passes its round timed, and counts the bytes of all of them
        assert r["iterations"] == PASSES and r["keys_per_client"] == KEYS
        assert r["bytes"] == 2 * KEYS * VALUE * PASSES and r["ops"] == 2 * KEYS * PASSES
        assert r["bandwidth_Bps"] >= r["bandwidth_slowest_Bps"] > 0
        assert r["client_elapsed_max_s"] == r["elapsed_s"] >= r["client_elapsed_min_s"] > 0
    assert len(meta["clients"]) == 2 * len(recs)
    assert sum(s["num_keys"] for s in meta["ddict_stats"]) == 2 * KEYS
    launch = meta["dragon_launch"]
    assert launch["returncode"] == 0 and launch["killed_pids"] == [] and launch["removed_segments"] == []
    assert 0 < launch["runtime_startup_s"] < launch["wall_s"] and 0 < launch["runtime_teardown_s"] < launch["wall_s"]
    # the launch's one DDict was left to the runtime's teardown, which ended it: the sweep found nothing (above)
    assert meta["ddict_create_s"] > 0 and meta["ddict_destroy_s"] is None
    assert meta["packages"]["dragonhpc"]
    # the fingerprint keeps Dragon's tuning knobs, not the descriptors and ids it exports anew every run
    fingerprint = meta["fingerprint"]
    assert fingerprint["packages"]["dragonhpc"] and fingerprint["mpi_library"] is None
    per_run = {"DRAGON_INF_PD", "DRAGON_MY_PUID", "DRAGON_RT_UID"}
    assert per_run <= set(meta["environment"]) and not per_run & set(fingerprint["env"])
    assert fingerprint["env"]["DRAGON_DEFAULT_SEG_SZ"] == meta["environment"]["DRAGON_DEFAULT_SEG_SZ"]


@pytest.mark.parametrize("operation", ["batch_put", "frozen_get"])
def test_gups_ddicts_numpy_data_round_trips(tmp_path, operation):
    proc, recs, meta, _, _ = launch_point(tmp_path, operation, data_format="numpy")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(recs) == 4 and all(r["ok"] and r["verified"] and r["data_format"] == "numpy" for r in recs)
    assert all(r["bytes"] == 2 * KEYS * VALUE * PASSES for r in recs)  # the value's float64s: VALUE bytes
    assert sum(s["num_keys"] for s in meta["ddict_stats"]) == 2 * KEYS


@pytest.mark.parametrize(("operation", "read"), [("put", "puts"), ("get", "gets")])
def test_a_value_damaged_in_the_ddict_fails_the_point(tmp_path, operation, read):
    # one read-back, after the point's last round, speaks for all its rounds: it must see one damaged key
    proc, recs, _, failure, _ = launch_point(tmp_path, operation, fault="corrupt-value")
    assert proc.returncode == 1 and recs == [], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"1 keys read back after the {read} differ from the values put" in failure["error"], failure["error"]


def test_a_client_that_raises_fails_the_point_and_leaves_nothing(tmp_path):
    proc, recs, _, failure, seconds = launch_point(tmp_path, "get", timeout=90, fault_round=1)
    assert proc.returncode != 0 and recs == []
    assert failure["ok"] is False and "kernel exited with status" in failure["error"]
    assert any("fault injected in client 0, round 1" in line for line in failure["log_tail"]), failure["log_tail"]
    assert seconds < 90


HANGING_HEAD = """
import time
import multiprocessing as mp
import dragon
from dragon.data.ddict.ddict import DDict

def client(d):
    d["k"] = b"v"
    time.sleep(3600)

if __name__ == "__main__":
    mp.set_start_method("dragon")
    d = DDict(1, 1, 16 * 2**20)
    procs = [mp.Process(target=client, args=(d,)) for _ in range(2)]
    [p.start() for p in procs]
    print("ready", flush=True)
    [p.join() for p in procs]
"""


def test_a_hanging_run_is_stopped_at_its_timeout_and_cleaned_up(tmp_path):
    (tmp_path / "hang.py").write_text(HANGING_HEAD)
    marker = uuid.uuid4().hex
    before = dragon_segments()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "movebench.engine.launchers.dragon", "--timeout", "25", "--grace", "3",
                           "--",
                           str(Path(sys.executable).with_name("dragon")), "-s", "hang.py"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=90,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), MOVEBENCH_TEST_RUN=marker))
    assert proc.returncode == 124 and "timed out after 25 s" in proc.stderr, proc.stderr[-2000:]
    assert "ready" in proc.stdout, proc.stdout[-2000:]
    assert time.monotonic() - started < 60
    assert marked_processes(marker) == []
    assert dragon_segments() - before == set()
