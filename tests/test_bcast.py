"""bcast: the grid, the checks before launch, the arrays, and every method under real mpiexec."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from conftest import MPIEXEC, PYTHON, make_task, mpirun, run_kernel
from movebench import families
from movebench.core.task import point_path_of
from movebench.engine import admission, plan
from movebench.engine import config as campaign_config
from movebench.families import bcast as spec
from movebench.families.bcast import kernel
from movebench.families.bcast import report as bcast_report

DENSE_SHAPE = "128x96"  # 96 KiB of float64: above the metadata's size, small enough to be quick
SPARSE_SHAPE = "400x300"  # ~290 KiB at density 0.2


def run_point(tmp_path, ranks, kind, method, shape, density=None, repetitions=2, warmups=1, fault=None,
              memory_mode=None):
    point = {"kind": kind, "method": method, "nodes": 1, "ranks": ranks, "shape": shape}
    if kind == "sparse":
        point["density"] = density
    point["dtype"] = "float64"
    if memory_mode:
        point["memory_mode"] = memory_mode
    settings = {"seed": 2024, **({"fault": fault} if fault else {})}
    folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    _, recs, meta = run_kernel(make_task("bcast", point, settings, repetitions, warmups), folder, timeout=60)
    return recs, meta


def validate(section, campaign=None):
    return campaign_config.validate({"campaign": campaign or {}, "bcast": section})


def problems_of(section, campaign=None):
    with pytest.raises(campaign_config.ConfigError) as info:
        validate(section, campaign)
    return info.value.problems, info.value.message()


# --- config and grid ---


def test_grid_sweeps_density_for_sparse_only():
    cfg = validate(
        {
            "kinds": ["dense", "sparse"],
            "methods": ["pickle", "buffer"],
            "shapes": [[10, 20]],
            "densities": [0.01, 0.5],
            "ranks": [2, 4],
        }
    )
    points = spec.FAMILY.points(cfg["bcast"])
    dense = [p for p in points if p["kind"] == "dense"]
    sparse = [p for p in points if p["kind"] == "sparse"]
    assert len(dense) == 2 * 2 and len(sparse) == 2 * 2 * 2
    assert all("density" not in p for p in dense)
    assert list(sparse[0]) == ["kind", "method", "nodes", "ranks", "shape", "density", "dtype",
                              "mpi_thread_level", "memory_mode", "stack", "env"]
    assert {p["shape"] for p in points} == {"10x20"}
    assert sparse[0]["density"] == 0.01 and isinstance(sparse[0]["density"], float)


def test_the_rule_finds_each_point_by_its_path():
    """No decoding of paths: the point's task, point and settings included, is looked up by its path."""
    dense = validate({"kinds": ["dense"], "methods": ["rma"], "shapes": [[131072], [30, 40]]})
    sparse = validate({"kinds": ["sparse"], "methods": ["rma"], "shapes": [[30, 40]], "densities": [0.0008, 1]})
    for cfg in (dense, sparse):
        grid = plan.grid(cfg)
        tasks = plan.tasks(cfg, grid)["bcast"]
        assert list(dict.fromkeys(point_path_of(p) for p in tasks)) == [families.point_path(p) for p in grid["bcast"]]
        for point in grid["bcast"]:
            task = tasks[families.point_path(point)]
            assert task.point == point and task.settings == {"seed": 2024}
            assert task.variant == "rma" and task.ranks == 2 and task.nodes == 1


def test_osu_is_a_method_of_every_kind_and_a_default():
    cfg = validate({"kinds": ["dense", "sparse"], "methods": ["osu"], "shapes": [[10, 20]], "densities": [0.5]})
    points = spec.FAMILY.points(cfg["bcast"])
    assert [(p["kind"], p["method"]) for p in points] == [("dense", "osu"), ("sparse", "osu")]
    assert "osu" in validate({})["bcast"]["methods"]


def test_osu_counts_are_osu_bcasts():
    """osu_bcast: 1000 timed after 200 skipped up to 8 KiB (LARGE_MESSAGE_SIZE), 100 after 10 above."""
    assert kernel.osu_counts(8) == kernel.osu_counts(8192) == (1000, 200)
    assert kernel.osu_counts(8193) == kernel.osu_counts(4 << 20) == (100, 10)


@pytest.mark.parametrize(
    ("section", "path", "words"),
    [
        ({"methods": ["pickle", "mmap"]}, "bcast.methods[1]", "must be one of pickle, buffer, pkl5, p2p, rma, osu"),
        ({"kinds": ["banded"]}, "bcast.kinds[0]", "must be one of dense, sparse"),
        ({"densities": [0.5, 0]}, "bcast.densities[1]", "must be > 0"),
        ({"densities": [1.5]}, "bcast.densities[0]", "must be <= 1"),
        ({"shapes": [[10, 0]]}, "bcast.shapes[0][1]", "must be >= 1"),
        ({"shapes": [[10, 10, 10]]}, "bcast.shapes[0]", "sparse arrays are 2-D"),
        ({"ranks": [1]}, "bcast.ranks[0]", "must be >= 2"),
    ],
)
def test_bad_input_is_refused_with_key_value_and_hint(section, path, words):
    problems, message = problems_of(section)
    assert [p[0] for p in problems] == [path]
    assert words in message and path in message


def refused(section):
    """Admission's lines for the config's points on this machine (what onstart checks before any job)."""
    config = validate(section)
    return admission.problems(config, plan.grid(config), admission.local_capacity())


def test_shape_too_large_for_memory_is_refused_before_launch():
    available = admission.mem_available()
    side = int((available / 8) ** 0.5) + 1  # one dense float64 array larger than all available memory
    lines = refused({"kinds": ["dense"], "methods": ["buffer"], "shapes": [[100, 100], [side, side]]})
    assert len(lines) == 1 and f"shape~{side}x{side}" in lines[0]
    assert "memory_fraction" in lines[0] and "MemAvailable" in lines[0]


def test_memory_refusal_counts_ranks_and_method():
    """A shape that fits for buffer at 2 ranks is refused for pickle at many ranks: bytes x ranks."""
    budget = 0.8 * admission.mem_available()
    side = int((budget / 8 / 6) ** 0.5)  # payload ~ budget / 6
    assert refused({"kinds": ["dense"], "methods": ["buffer"], "shapes": [[side, side]], "ranks": [2]}) == []
    lines = refused({"kinds": ["dense"], "methods": ["buffer", "pickle"], "shapes": [[side, side]], "ranks": [2, 4]})
    assert [line.split(":")[0] for line in lines] == [
        f"bcast kind~dense/method~pickle/nodes~1/ranks~4/shape~{side}x{side}/dtype~float64"]


def test_memory_plan_follows_each_method():
    payload = 1000
    base = spec.BASE_RANK_BYTES
    assert spec.rank_bytes("pickle", payload) == (base + 3000, base + 2000)
    for method in ("buffer", "pkl5", "p2p", "rma", "osu"):
        assert spec.rank_bytes(method, payload) == (base + 1000, base + 1000)
    point = {"kind": "dense", "method": "buffer", "ranks": 4, "nodes": 2, "shape": "125", "dtype": "float64"}
    assert spec.FAMILY.node_memory_bytes(point, {}) == 2 * (base + 1000)


# --- the arrays ---


def test_csr_is_valid_seeded_and_near_its_density():
    import scipy.sparse

    a = kernel.make_csr((400, 300), 0.05, "float64", seed=7)
    b = kernel.make_csr((400, 300), 0.05, "float64", seed=7)
    assert isinstance(a, scipy.sparse.csr_array)
    a.check_format(full_check=True)
    assert a.has_sorted_indices
    assert abs(a.nnz / (400 * 300) - 0.05) < 0.005
    assert kernel.checksum(a) == kernel.checksum(b)
    assert kernel.checksum(a) != kernel.checksum(kernel.make_csr((400, 300), 0.05, "float64", seed=8))
    expected = spec.payload_bytes("sparse", (400, 300), "float64", 0.05)
    actual = sum(x.nbytes for x in kernel.buffers_of(a))
    assert abs(actual - expected) / expected < 0.1


def test_dense_payload_and_dtypes():
    for dtype in spec.ITEM_BYTES:
        array = kernel.make_dense((30, 20), dtype, seed=1)
        assert array.dtype == np.dtype(dtype) and array.shape == (30, 20)
        assert spec.payload_bytes("dense", (30, 20), dtype, None) == array.nbytes


def test_checksum_sees_one_flipped_byte():
    array = kernel.make_dense((64, 64), "float64", seed=3)
    before = kernel.checksum(array)
    kernel.flip_one_byte(array)
    assert kernel.checksum(array) != before


def test_vmhwm_reset_works_here():
    """The per-repetition RSS peak relies on clear_refs 5 resetting VmHWM."""
    grown = np.ones(64 * 2**20 // 8)
    del grown
    assert kernel.rss_peak_bytes() - kernel.rss_bytes() > 32 * 2**20
    kernel.reset_rss_peak()
    assert kernel.rss_peak_bytes() - kernel.rss_bytes() < 8 * 2**20


# --- every method under mpiexec ---

KIND = {"dense": ("dense", DENSE_SHAPE, None), "sparse": ("sparse", SPARSE_SHAPE, 0.2)}


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("method", kernel.METHODS)
def test_method_delivers_the_roots_array(tmp_path, method, kind, ranks):
    kind_, shape, density = KIND[kind]
    recs, meta = run_point(tmp_path, ranks, kind_, method, shape, density)
    assert len(recs) == 3 and [r["warmup"] for r in recs] == [True, False, False]
    for rec in recs:
        assert rec["ok"] and rec["verified"] and rec["error"] is None, rec
        assert rec["variant"] == method and rec["ranks"] == ranks and rec["kind"] == kind
        assert rec["bytes"] == rec["payload_bytes"] * (ranks - 1)
        assert rec["elapsed_s"] > 0 and rec["bandwidth_Bps"] == pytest.approx(rec["bytes"] / rec["elapsed_s"])
        # What each method allocates on a receiver while timed: the payload (new objects) or only metadata.
        if method in kernel.IN_PLACE:
            assert rec["tracemalloc_peak_bytes"] < rec["payload_bytes"] / 4
        else:
            assert rec["tracemalloc_peak_bytes"] >= rec["payload_bytes"]
    payload = spec.payload_bytes(kind, spec.parse_shape(recs[0]["shape"]), "float64", recs[0].get("density"))
    if kind == "dense":
        assert recs[0]["payload_bytes"] == payload
    else:
        assert recs[0]["nnz"] > 0 and recs[0]["density"] == 0.2
    assert meta["buffers_reused"] == (method in kernel.IN_PLACE)


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("kind", "method", "ranks"),
    [("dense", "buffer", 2), ("sparse", "pickle", 2), ("sparse", "rma", 4), ("dense", "p2p", 4), ("dense", "pkl5", 2),
     ("dense", "osu", 2), ("sparse", "osu", 4)],
)
def test_corrupted_receive_fails_verification(tmp_path, kind, method, ranks):
    kind_, shape, density = KIND[kind]
    recs, _ = run_point(tmp_path, ranks, kind_, method, shape, density, fault="corrupt-receive")
    for rec in recs:
        assert rec["ok"] is False and rec["verified"] is False
        assert f"rank {ranks - 1}: CRC-32" in rec["error"]
        assert "rank 1:" not in rec["error"] or ranks == 2


@pytest.mark.mpi
def test_corrupted_point_is_marked_failed_by_the_launcher(tmp_path):
    point = {"kind": "dense", "method": "buffer", "nodes": 1, "ranks": 2, "shape": DENSE_SHAPE, "dtype": "float64"}
    task = make_task("bcast", point, {"seed": 2024, "fault": "corrupt-receive"}, repetitions=1, warmups=0)
    out, failed = tmp_path / "r.jsonl", tmp_path / "failed.json"
    done = subprocess.run(
        [PYTHON, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()), "--launcher", MPIEXEC, "--out",
         str(out), "--meta", str(tmp_path / "m.json"), "--failed", str(failed)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1 and not out.exists()
    assert "verification failed" in json.loads(failed.read_text())["error"]


@pytest.mark.mpi
def test_receiver_memory_pickle_twice_in_place_once(tmp_path):
    """8 MiB: pickle's receiver holds the stream and the new object, buffer's only its reused array."""
    pickled, _ = run_point(tmp_path, 2, "dense", "pickle", "1024x1024", repetitions=3)
    in_place, _ = run_point(tmp_path, 2, "dense", "buffer", "1024x1024", repetitions=3)
    payload = pickled[0]["payload_bytes"]
    assert payload == 8 * 2**20
    for rec in pickled[1:]:
        assert rec["rss_hwm_delta_bytes"] > 1.8 * payload and rec["tracemalloc_peak_bytes"] >= 2 * payload
        assert rec["root_tracemalloc_peak_bytes"] >= 2 * payload  # the stream and mpi4py's unpickled copy
    for rec in in_place[1:]:
        assert 0.9 * payload < rec["rss_hwm_delta_bytes"] < 1.3 * payload
        assert rec["root_rss_hwm_delta_bytes"] < 0.3 * payload


@pytest.mark.mpi
@pytest.mark.parametrize(("kind", "shape", "counts"), [("dense", "1", (1000, 200)), ("dense", DENSE_SHAPE, (100, 10)),
                                                       ("sparse", SPARSE_SHAPE, (100, 10))])
def test_osu_records_say_how_they_were_timed(tmp_path, kind, shape, counts):
    _, _, density = KIND[kind]
    recs, meta = run_point(tmp_path, 2, kind, "osu", shape, density, repetitions=3)
    assert [r["warmup"] for r in recs] == [True, False, False, False]  # no rows beyond the repetitions
    for rec in recs:
        assert (rec["iterations"], rec["skip"]) == counts
        assert rec["ok"] and rec["verified"] and rec["bytes"] == rec["payload_bytes"]
        assert rec["elapsed_s"] > 0 and rec["bandwidth_Bps"] == pytest.approx(rec["bytes"] / rec["elapsed_s"])
        assert rec["timed_s"] == pytest.approx(rec["elapsed_s"] * counts[0])  # efficiency's seconds timed
        # memory comes from the probe broadcast: preallocated buffers, nothing the size of the payload allocated
        assert rec["tracemalloc_peak_bytes"] < max(rec["payload_bytes"] / 4, 16384)
        assert rec["rss_hwm_delta_bytes"] > 0 and rec["root_rss_hwm_delta_bytes"] > 0
    buffers = meta["memory"]["buffers"]
    expected = ["source", "rank 1 receive"] if kind == "dense" else [
        f"{side}.{name}" for side in ("source", "rank 1 receive") for name in ("data", "indices", "indptr")]
    assert sorted(buffers) == sorted(expected)
    assert meta["memory"]["memory_mode"] == "4k" and meta["memory_probe"].startswith("an untimed broadcast")
    for facts in buffers.values():
        assert facts["address_mod_4k"] == 0 and facts["huge_page_bytes"] in (0, None)


@pytest.mark.mpi
def test_memory_mode_of_the_point_places_every_timed_buffer(tmp_path):
    recs, meta = run_point(tmp_path, 2, "dense", "buffer", "512x512", memory_mode="thp")
    assert all(r["ok"] and r["verified"] and r["memory_mode"] == "thp" for r in recs)
    assert meta["memory"]["memory_mode"] == "thp"
    assert {name: facts["address_mod_2m"] for name, facts in meta["memory"]["buffers"].items()} == {
        "source": 0, "rank 1 receive": 0}


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_timed_broadcasts_run_without_memory_probes(ranks):
    """Each repetition: the timed broadcast (tracemalloc off, receive buffers zeroed), then an RSS reset and a
    probe broadcast under tracemalloc; and osu's figure is the average over ranks of each rank's mean round."""
    result = json.loads(mpirun(ranks, "tests/mpi/bcast_probes.py").stdout)
    for method, run in result["methods"].items():
        timed = "osu_loop" if method == "osu" else "broadcast"
        for rank, events in enumerate(run["events"]):
            calls = [(e["call"], e["tracing"]) for e in events]
            assert calls == [(timed, False), ("rss_reset", True), ("broadcast", True)] * 2, (method, rank)
            if rank != kernel.ROOT and method in kernel.IN_PLACE:
                assert [e["receive_zeroed"] for e in events[::3]] == [True, True]
        for rep in run["reps"]:
            assert rep["verified"] and not rep["tracing_after"] and rep["bytes"] == 8000 * (ranks - 1)
            assert (rep["iterations"], rep["skip"]) == ((1000, 200) if method == "osu" else (None, None))  # 8000 B
    # rank r's every round lasts (r + 1) ms: each rank's mean is (r + 1) ms, their average (ranks + 1) / 2 ms
    assert result["osu_fake_clock"] == pytest.approx((ranks + 1) / 2 * 1e-3)


# --- the report section ---


@pytest.mark.mpi
def test_report_finds_speedups_and_crossover(tmp_path):
    import pandas as pd

    frames = []
    for method in ("pickle", "buffer"):
        for density in (0.05, 0.5):
            recs, _ = run_point(tmp_path, 2, "sparse", method, "200x200", density)
            frames.append(pd.DataFrame(recs).assign(point=f"{method}/{density}"))  # as aggregate.load names it
    table = pd.concat(frames, ignore_index=True)
    medians = bcast_report.method_medians(table)
    assert len(medians) == 4 and medians["cold_s"].notna().all()
    buffer = medians[medians["method"] == "buffer"]
    assert np.allclose(buffer["speedup_vs_pickle"], buffer["pickle_s"] / buffer["time_s"])
    rows = bcast_report.crossover_rows(medians)
    assert [r["method"] for r in rows] == ["buffer"]
    assert rows[0]["in place vs pickle"].split()[0] in ("wins", "loses")
    assert "0.05: " in rows[0]["speed-up by density"] and "0.5: " in rows[0]["speed-up by density"]


@pytest.mark.mpi
def test_report_sets_the_pure_transfer_beside_buffer(tmp_path):
    import pandas as pd

    frames = []
    for method, shape in [("buffer", "1"), ("osu", "1"), ("buffer", DENSE_SHAPE), ("osu", DENSE_SHAPE),
                          ("pickle", DENSE_SHAPE)]:
        recs, _ = run_point(tmp_path, 2, "dense", method, shape, repetitions=3)
        frames.append(pd.DataFrame(recs).assign(point=f"{method}/{shape}"))
    table = pd.concat(frames, ignore_index=True)
    medians = bcast_report.method_medians(table)
    rows = {row["case"]: row for row in bcast_report.transfer_rows(medians)}
    assert sorted(rows) == ["dense 1 float64, 2 ranks", f"dense {DENSE_SHAPE} float64, 2 ranks"]
    for case, row in rows.items():
        shape = case.split()[1]
        times = {m: medians.loc[(medians["method"] == m) & (medians["shape"] == shape), "time_s"].item()
                 for m in ("buffer", "osu")}
        assert row["buffer"] == times["buffer"] and row["osu"] == times["osu"]
        assert row["buffer - osu"] == pytest.approx(times["buffer"] - times["osu"])
        assert row["buffer / osu"] == pytest.approx(times["buffer"] / times["osu"])
    ctx = bcast_report.REPORT.context(table, pd.DataFrame(), {})
    assert "buffer - osu" in ctx["transfer"] and "osu" not in ctx["speedups"] and "osu" in ctx["per_method"]
    lines = [text for text, _ in bcast_report.REPORT.headlines(table, pd.DataFrame())]
    assert any(line.startswith("dense 1 float64, 2 ranks: buffer") and "the time of osu" in line for line in lines)


def test_case_labels_name_every_factor_that_varies():
    # two stacks at two node counts: four cases, four labels (one label for two cases broke the report's tables)
    from movebench.families.bcast.report import _case_label

    base = {"kind": "dense", "shape": "100x100", "density": float("nan"), "dtype": "float64", "ranks": 2,
            "memory_mode": "4k", "mpi_thread_level": "multiple", "env": ""}
    labels = {_case_label({**base, "nodes": n, "stack": s}) for n in (1, 2) for s in ("mpich-ucx", "openmpi")}
    assert len(labels) == 4 and "dense 100x100 float64, 2 ranks on 2 nodes, openmpi" in labels
    assert _case_label({**base, "nodes": 1, "stack": "default"}) == "dense 100x100 float64, 2 ranks"
    assert _case_label({**base, "nodes": 1, "stack": "default", "env": "UCX_TLS~tcp"}).endswith(", UCX_TLS~tcp")
