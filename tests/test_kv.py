"""kv without Dragon running: keys per client, the aggregate, bad input, the launch command, segment names."""

import dataclasses
import math
import subprocess
import sys

import pytest

from movebench import families
from movebench.engine import config as cc
from movebench.engine import launchers, plan
from movebench.engine.launchers import dragon as dragonrun
from movebench.families.kv import FAMILY, benchit_passes, keys_per_client
from movebench.families.kv.kernel import KEY_BYTES, aggregate, make_data, make_keys, make_values, timed_passes, verify


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


def test_numpy_data_is_gups_ddicts_and_verify_compares_arrays():
    import pickle

    import numpy as np

    keys, values = make_data("numpy", 1, 10, 4096)
    assert all(k.dtype == np.float64 and k.nbytes == KEY_BYTES for k in keys)
    assert len({k.tobytes() for k in keys}) == 10
    # one array shared by every key of the client, value_size bytes of float64, as gups_ddict's
    assert all(v is values[0] for v in values) and values[0].dtype == np.float64 and values[0].nbytes == 4096
    assert make_data("numpy", 2, 1, 4096)[1][0].tobytes() != values[0].tobytes()
    # a numpy key must be hashable the way the DDict sees it: by its pickle (a dict here needs bytes)
    store = {pickle.dumps(k): pickle.loads(pickle.dumps(v)) for k, v in zip(keys, values, strict=True)}
    pickled = [pickle.dumps(k) for k in keys]
    assert verify(store, pickled, values) == 0
    store[pickled[3]] = values[0] + 1.0
    assert verify(store, pickled, values) == 1
    store[pickled[3]] = values[0].astype(np.float32)  # same numbers, another dtype: not the value put
    assert verify(store, pickled, values) == 1
    assert make_data("bytes", 3, 5, 64) == (make_keys(3, 5), make_values(3, 5, 64))


def test_data_format_is_an_axis_whose_default_keeps_the_path():
    config = cc.validate(base(operations=["get"], data_formats=["bytes", "numpy"]))
    paths = sorted(families.point_path(p) for p in plan.grid(config)["kv"])
    assert paths == ["operation~get/nodes~1/clients_per_node~2/managers_per_node~1/value_size~1024",
                     "operation~get/nodes~1/clients_per_node~2/managers_per_node~1/value_size~1024/data_format~numpy"]
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(base(data_format="numpy"))
    assert "kv.data_formats" in err.value.message()


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
    grid = plan.grid(config)
    points = grid["kv"]
    assert len(points) == 2 * 2 * 2
    assert FAMILY.placement(points[0]) == (2, 1)
    task = plan.tasks(config, grid)["kv"][families.point_path(points[0])]
    assert task.settings["keys_per_client"] == keys_per_client(config["kv"], 1, 2, 1024)
    kernel_task = dataclasses.replace(task, out="r.jsonl", meta="m.json")
    cmd = launchers.runtime(kernel_task).command(kernel_task, "task.json")
    python = [sys.executable, "-m", "movebench.families.kv.kernel", "task.json"]
    dragon_at = cmd.index("--") + 1
    assert cmd[:3] == [sys.executable, "-m", "movebench.engine.launchers.dragon"] and "--meta" in cmd[:dragon_at]
    assert cmd[dragon_at].endswith("dragon") and cmd[dragon_at + 1] == "-s" and cmd[dragon_at + 2:] == python
    assert any(a.startswith("DRAGON_DEFAULT_SEG_SZ=") for a in cmd[:dragon_at])
    assert cmd[cmd.index("--shm-sized-by") + 1] == "kv.total_mem"  # the setting the wrapper's advice names
    assert "transport" not in task.settings  # one node: no transport between nodes, no rerun when it changes
    four = dataclasses.replace(kernel_task, point={**task.point, "nodes": 4}, nodes=4,
                               settings={**task.settings, "transport": "tcp"})
    cmd = launchers.runtime(four).command(four, "task.json")
    dragon_at = cmd.index("--") + 1
    assert cmd[dragon_at + 1:dragon_at + 5] == ["-t", "tcp", "-N", "4"]
    assert cmd[cmd.index("--nodes") + 1] == "4"  # the Dragon launcher sweeps the 4 nodes after the run
    four.settings["transport"] = None  # Dragon's own choice: its dragon-config files, else TCP
    assert launchers.runtime(four).command(four, "task.json")[dragon_at + 1:dragon_at + 3] == ["-N", "4"]


def test_iterations_benchit_follows_gups_ddicts_schedule_by_value_size():
    # gups_ddict --benchit (iterations 1, max_iterations 4): 1 pass up to 2 MiB, then 2, 3, and 4 from 16 MiB
    assert [benchit_passes(2**k) for k in range(10, 27)] == [1] * 12 + [2, 3, 4, 4, 4]
    assert benchit_passes(100) == 1 and benchit_passes(3 * 1024**2) == 2  # between powers: the next one up
    config = cc.validate(base(iterations="benchit", operations=["put"], value_sizes=["1KiB", "4MiB"],
                              total_mem="64MiB", keys_per_client=2, clients_per_node=[1]))
    tasks = plan.tasks(config, plan.grid(config))["kv"].values()
    assert {(t.point["value_size"], t.settings["iterations"]) for t in tasks} == {(1024, 1), (4 * 1024**2, 2)}
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(base(iterations="often"))
    assert "kv.iterations = 'often'" in err.value.message() and "'benchit'" in err.value.message()


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
        ({"operations": ["scan"]}, "kv.operations[0]", "'scan'", "must be one of put, batch_put, get, frozen_get"),
        ({"mem_frac": 0.9}, "kv.mem_frac", "0.9", "must be <= 0.75"),
        ({"data_formats": ["numpy"], "value_sizes": [1000, 1020]}, "kv.value_sizes", "[1000, 1020]",
         "every value size must be a multiple of 8 bytes, not 1020B"),
        ({"data_formats": ["pickle"]}, "kv.data_formats[0]", "'pickle'", "must be one of bytes, numpy"),
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
    """Admission (the Snakefile's onstart) checks /dev/shm here; the Dragon launcher checks it again at launch."""
    from movebench.engine import admission

    config = cc.validate(base(total_mem="1TiB", keys_per_client=1, operations=["put"], value_sizes=["1KiB"]))
    lines = admission.problems(config, plan.grid(config), admission.local_capacity())
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
    proc = subprocess.run([sys.executable, "-m", "movebench.engine.launchers.dragon", "--shm-bytes", str(need),
                           "--shm-sized-by", "kv.total_mem", "--", "sh", "-c", "echo launched"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "launched" not in proc.stdout
    assert "refusing to launch" in proc.stderr and "/dev/shm has" in proc.stderr
    assert "lower kv.total_mem, DRAGON_DEFAULT_SEG_SZ or DRAGON_INF_SEG_SZ" in proc.stderr


def test_report_keeps_data_formats_apart_and_old_records_read_as_bytes(tmp_path):
    import json

    from movebench.engine import aggregate
    from movebench.families.kv import report

    case = {"nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "value_size": 4096}
    # batch_put is 2x put on bytes, 3x on numpy; the bytes records predate the axis: no data_format field
    rates = {("put", "bytes"): 1e7, ("batch_put", "bytes"): 2e7, ("put", "numpy"): 1e7, ("batch_put", "numpy"): 3e7}
    paths = []
    for (operation, data_format), rate in rates.items():
        point = {"operation": operation, **case} | ({"data_format": data_format} if data_format == "numpy" else {})
        path = tmp_path / "raw" / "kv" / f"{families.point_path(point)}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        recs = [{"family": "kv", "variant": operation, **point, "rep": rep, "warmup": rep == 0, "ok": True,
                 "bandwidth_Bps": rate * (1 + rep / 100), "elapsed_s": 1.0} for rep in range(6)]
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        paths.append(path)
    table = aggregate.load("kv", paths)
    assert table.groupby("point")["data_format"].first().to_dict() == {
        families.point_path({"operation": op, **case, "data_format": fmt}): fmt for op, fmt in rates}
    summary = aggregate.summarize("kv", table)
    lines = [text for text, _ in report.REPORT.headlines(table, summary)]
    assert len(lines) == 1 and lines[0].startswith("batch_put / put")
    parts = lines[0].split("; ")
    assert "bytes data): 2" in parts[0] and "numpy data): 3" in parts[1]
    ratios = report.speedups(summary[summary["measure"] == "bandwidth_Bps"])
    assert sorted(zip(ratios["data_format"], ratios["batch_put / put"], strict=True)) == [("bytes", 2.0),
                                                                                         ("numpy", 3.0)]


def test_the_report_says_beside_kv_figures_which_data_ran_and_what_it_means():
    from movebench.families.kv.report import data_note

    assert "set these beside gups_ddict's or the DDict study's only after a run with data_format: numpy" in data_note(
        ["bytes"])
    assert "may be set beside gups_ddict's" in data_note(["numpy"])
    assert "bytes and numpy" in data_note(["bytes", "numpy"]) and "only numpy's" in data_note(["bytes", "numpy"])
    assert data_note([]) is None
