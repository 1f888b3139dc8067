"""kv without Dragon running: keys per client, the aggregate, bad input, the launch command, segment names."""

import math
import subprocess
import sys

import pytest

from movebench import config as cc
from movebench import dragonrun, families, launch
from movebench.families.kv import FAMILY, keys_per_client
from movebench.families.kv.kernel import KEY_BYTES, aggregate, make_keys, make_values, timed_passes, verify


def base(**kv):
    return {"campaign": {"name": "t"}, "kv": {"value_sizes": ["1KiB"], **kv}}


def test_keys_per_client_follows_gups_ddict_or_the_explicit_count():
    section = {"total_mem": "64MiB", "mem_frac": 0.1, "max_keys": 10**9, "keys_per_client": None}
    expected = math.floor(0.1 * 2 * 64 * 2**20 / (2 * 3 * (KEY_BYTES + 4096)))
    assert keys_per_client(section, 2, 3, 4096) == expected
    assert keys_per_client(dict(section, max_keys=7), 2, 3, 4096) == 7
    assert keys_per_client(dict(section, keys_per_client=42), 2, 3, 4096) == 42


def test_aggregate_is_the_sum_of_each_clients_own_rate():
    rounds = [{"elapsed_s": 0.5, "ops": 100}, {"elapsed_s": 2.0, "ops": 100}]
    elapsed, nbytes, extras = aggregate(rounds, 1000)
    assert elapsed == 2.0 and nbytes == 200 * 1000
    assert extras["bandwidth_Bps"] == pytest.approx((200 + 50) * 1000)  # gups_ddict: 100/0.5 + 100/2 ops/s
    assert extras["bandwidth_slowest_Bps"] == pytest.approx(200 * 1000 / 2.0)
    assert extras["ops_per_s"] == pytest.approx(250) and extras["imbalance"] == pytest.approx(2.0 / 1.25)


def test_keys_are_128_bytes_and_values_differ_per_key():
    keys, values = make_keys(3, 50), make_values(3, 50, 4096)
    assert {len(k) for k in keys} == {KEY_BYTES} and len(set(keys)) == 50
    assert {len(v) for v in values} == {4096} and len(set(values)) == 50
    assert make_keys(3, 1) != make_keys(4, 1)
    assert [len(v) for v in make_values(0, 3, 1)] == [1, 1, 1]


class CountingDict(dict):
    """A dict that counts its gets: the timed loop's own work, without Dragon (tests/test_kv_dragon.py runs it)."""

    gets = 0

    def __getitem__(self, key):
        self.gets += 1
        return super().__getitem__(key)


def test_timed_passes_run_every_pass_and_verify_catches_a_wrong_value():
    keys, values = make_keys(0, 5), make_values(0, 5, 64)
    store = CountingDict()
    assert timed_passes(store, "put", keys, values, 3) > 0
    assert dict(store) == dict(zip(keys, values, strict=True)) and store.gets == 0
    assert timed_passes(store, "get", keys, values, 3) > 0 and store.gets == 15
    assert verify(store, keys, values) == 0 and store.gets == 20
    store[keys[2]] = values[3]
    assert verify(store, keys, values) == 1


def test_grid_and_launch_command():
    config = cc.validate(base(operations=["put", "frozen_get"], value_sizes=["1KiB", "4KiB"], clients_per_node=[2, 3]))
    grid = cc.grid(config)
    points = grid["kv"]
    assert len(points) == 2 * 2 * 2
    assert FAMILY.placement(points[0]) == (2, 1)
    task = cc.tasks(config, grid)["kv"][families.point_path(points[0])]
    assert task["settings"]["keys_per_client"] == keys_per_client(config["kv"], 1, 2, 1024)
    kernel_task = {**task, "out": "r.jsonl", "meta": "m.json"}
    cmd = launch.kernel_command(kernel_task, "task.json")
    python = [sys.executable, "-m", "movebench.families.kv.kernel", "task.json"]
    dragon_at = cmd.index("--") + 1
    assert cmd[:3] == [sys.executable, "-m", "movebench.dragonrun"] and "--meta" in cmd[:dragon_at]
    assert cmd[dragon_at].endswith("dragon") and cmd[dragon_at + 1] == "-s" and cmd[dragon_at + 2:] == python
    assert any(a.startswith("DRAGON_DEFAULT_SEG_SZ=") for a in cmd[:dragon_at])
    assert "transport" not in task["settings"]  # one node: no transport between nodes, no rerun when it changes
    four = {**kernel_task, "point": {**task["point"], "nodes": 4}, "settings": {**task["settings"], "transport": "tcp"}}
    cmd = launch.kernel_command(four, "task.json")
    dragon_at = cmd.index("--") + 1
    assert cmd[dragon_at + 1:dragon_at + 5] == ["-t", "tcp", "-N", "4"]
    assert cmd[cmd.index("--nodes") + 1] == "4"  # dragonrun sweeps the 4 nodes after the run
    four["settings"]["transport"] = None  # Dragon's own choice: its dragon-config files, else TCP
    assert launch.kernel_command(four, "task.json")[dragon_at + 1:dragon_at + 3] == ["-N", "4"]


@pytest.mark.parametrize(
    "kv, path, value, hint",
    [
        ({"value_sizes": [0]}, "kv.value_sizes", "[0]", "every value size must be at least 1 byte"),
        ({"value_sizes": ["big"]}, "kv.value_sizes", "[big]", "'big' is not a size"),
        ({"keys_per_client": 100000, "value_sizes": ["64KiB"], "total_mem": "64MiB"}, "kv.total_mem", "'64MiB'",
         "need 16282MiB per node with DDict's 30% headroom: use total_mem >= 16282MiB or fewer keys_per_client"),
        ({"value_sizes": ["16MiB"], "total_mem": "16MiB"}, "kv.total_mem", "'16MiB'",
         "a 16MiB value does not fit a manager's 16MiB pool"),
        ({"mem_frac": 0.001, "value_sizes": ["1MiB"], "total_mem": "8MiB"}, "kv.total_mem", "'8MiB'",
         "mem_frac x total_mem leaves no key"),
        ({"managers_per_node": [8], "total_mem": "16MiB"}, "kv.total_mem", "'16MiB'", "a DDict manager needs at least"),
        ({"clients_per_node": [1000]}, "kv.clients_per_node", "1000", "at most"),
        ({"operations": ["scan"]}, "kv.operations[0]", "'scan'", "must be one of put, batch_put, get, frozen_get"),
        ({"mem_frac": 0.9}, "kv.mem_frac", "0.9", "must be <= 0.75"),
    ],
)
def test_bad_input_is_refused_before_launch(kv, path, value, hint):
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(base(**kv))
    message = err.value.message()
    line = next((ln for ln in message.splitlines() if ln.strip().startswith(path + " ")), None)
    assert line is not None, message
    assert f"{path} = {value}" in line and hint in line, message


def test_a_dev_shm_too_small_for_the_pools_is_refused_before_any_job():
    """Admission (the Snakefile's onstart) checks /dev/shm here; dragonrun checks it again at launch."""
    from movebench import admission

    config = cc.validate(base(total_mem="1TiB", keys_per_client=1, operations=["put"], value_sizes=["1KiB"]))
    lines = admission.problems(config, cc.grid(config), admission.local_capacity())
    shm = [line for line in lines if line.startswith("/dev/shm: its largest point (kv operation~put")]
    assert len(shm) == 1 and "needs for its DDict pools and Dragon's segments" in shm[0], lines
    assert "but the filesystem of /dev/shm has" in shm[0]


def test_segment_names_of_the_run_and_only_those():
    names = ["_dragon_0_30487__def_part0", "_dragon_dragon_dict_pool__29998_4294967299_030487_manifest",
             "_dragon_0_17559_1_def_part0", "_dragon_0_55555__inf_part0", "mpich_shm_30487_0"]
    alive = {55555}.__contains__  # another user's live Dragon run
    assert dragonrun.run_segments(names, {30487}, user="0", alive=alive) == [
        "_dragon_0_17559_1_def_part0", "_dragon_0_30487__def_part0",
        "_dragon_dragon_dict_pool__29998_4294967299_030487_manifest"]
    assert dragonrun.named_pids("_dragon_dragon_dict_pool__29998_4294967299_root30487_part0", "root") == {
        29998, 30487}


def test_dragonrun_refuses_when_dev_shm_is_too_small():
    need = dragonrun.shm_free_bytes() + 2**30
    proc = subprocess.run([sys.executable, "-m", "movebench.dragonrun", "--shm-bytes", str(need), "--",
                           "sh", "-c", "echo launched"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "launched" not in proc.stdout
    assert "refusing to launch" in proc.stderr and "/dev/shm has" in proc.stderr
