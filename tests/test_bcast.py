"""bcast: the grid, the checks before launch, the arrays, and every method under real mpiexec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from movebench import bcast
from movebench import config as campaign_config

MPIEXEC = Path(sys.executable).with_name("mpiexec")
SRC = Path(__file__).resolve().parents[1] / "src"
DENSE_SHAPE = "128x96"  # 96 KiB of float64: above the metadata's size, small enough to be quick
SPARSE_SHAPE = "400x300"  # ~290 KiB at density 0.2


def run_kernel(tmp_path, ranks, *args, repetitions=2, warmups=1, timeout=60):
    out = tmp_path / f"records-{ranks}-{os.getpid()}-{len(list(tmp_path.iterdir()))}.jsonl"
    meta = out.with_suffix(".meta.json")
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [
        str(MPIEXEC),
        "-n",
        str(ranks),
        sys.executable,
        "-m",
        "movebench.bcast",
        *args,
        "--repetitions",
        str(repetitions),
        "--warmups",
        str(warmups),
        "--out",
        str(out),
        "--meta",
        str(meta),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], json.loads(meta.read_text())


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
    points = bcast.FAMILY.points(cfg["bcast"], cfg["campaign"])
    dense = [p for p in points if p["kind"] == "dense"]
    sparse = [p for p in points if p["kind"] == "sparse"]
    assert len(dense) == 2 * 2 and len(sparse) == 2 * 2 * 2
    assert all("density" not in p for p in dense)
    assert list(sparse[0]) == ["kind", "method", "nodes", "ranks", "shape", "density", "dtype"]
    assert {p["shape"] for p in points} == {"10x20"}
    args = bcast.FAMILY.kernel_args(sparse[0], cfg["bcast"], cfg["campaign"])
    assert args[args.index("--density") + 1] == "0.01"


def test_points_survive_their_path():
    """The rule rebuilds a point from its path: a 1-D shape comes back as an int, a density as a float."""
    from movebench import family

    fam = bcast.FAMILY
    dense = validate({"kinds": ["dense"], "methods": ["rma"], "shapes": [[131072], [30, 40]]})
    sparse = validate({"kinds": ["sparse"], "methods": ["rma"], "shapes": [[30, 40]], "densities": [0.0008, 1]})
    for cfg in (dense, sparse):
        for point in fam.points(cfg["bcast"], cfg["campaign"]):
            parsed = family.parse_point_path(family.point_path(point))
            args = fam.kernel_args(parsed, cfg["bcast"], cfg["campaign"])
            assert args == fam.kernel_args(point, cfg["bcast"], cfg["campaign"])
            assert fam.payload(parsed) == fam.payload(point)


@pytest.mark.parametrize(
    ("section", "path", "words"),
    [
        ({"methods": ["pickle", "mmap"]}, "bcast.methods[1]", "must be one of pickle, buffer, pkl5, p2p, rma"),
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


def test_shape_too_large_for_memory_is_refused_before_launch():
    available = bcast.mem_available()
    side = int((available / 8) ** 0.5) + 1  # one dense float64 array larger than all available memory
    problems, message = problems_of({"kinds": ["dense"], "methods": ["buffer"], "shapes": [[100, 100], [side, side]]})
    assert [p[0] for p in problems] == ["bcast.shapes[1]"]
    assert "memory_fraction" in message and "MemAvailable" in message and "smaller shape" in message


def test_memory_refusal_counts_ranks_and_method():
    """A shape that fits for buffer at 2 ranks is refused for pickle at many ranks: bytes x ranks."""
    budget = 0.8 * bcast.mem_available()
    side = int((budget / 8 / 6) ** 0.5)  # payload ~ budget / 6
    fits = validate({"kinds": ["dense"], "methods": ["buffer"], "shapes": [[side, side]], "ranks": [2]})
    assert fits["bcast"]["shapes"] == [[side, side]]
    problems, message = problems_of(
        {"kinds": ["dense"], "methods": ["buffer", "pickle"], "shapes": [[side, side]], "ranks": [2, 4]}
    )
    assert [p[0] for p in problems] == ["bcast.shapes[0]"]
    assert "method pickle, 4 ranks" in message


def test_memory_plan_follows_each_method():
    payload = 1000
    assert bcast.rank_bytes("pickle", payload) == (bcast.BASE_RANK_BYTES + 3000, bcast.BASE_RANK_BYTES + 2000)
    for method in ("buffer", "pkl5", "p2p", "rma"):
        assert bcast.rank_bytes(method, payload) == (bcast.BASE_RANK_BYTES + 1000, bcast.BASE_RANK_BYTES + 1000)
    point = {"method": "buffer", "ranks": 4, "nodes": 2}
    assert bcast.node_bytes(point, payload) == 2 * (bcast.BASE_RANK_BYTES + 1000)


# --- the arrays ---


def test_csr_is_valid_seeded_and_near_its_density():
    import scipy.sparse

    a = bcast.make_csr((400, 300), 0.05, "float64", seed=7)
    b = bcast.make_csr((400, 300), 0.05, "float64", seed=7)
    assert isinstance(a, scipy.sparse.csr_array)
    a.check_format(full_check=True)
    assert a.has_sorted_indices
    assert abs(a.nnz / (400 * 300) - 0.05) < 0.005
    assert bcast.checksum(a) == bcast.checksum(b)
    assert bcast.checksum(a) != bcast.checksum(bcast.make_csr((400, 300), 0.05, "float64", seed=8))
    expected = bcast.payload_bytes("sparse", (400, 300), "float64", 0.05)
    actual = sum(x.nbytes for x in bcast.buffers_of(a))
    assert abs(actual - expected) / expected < 0.1


def test_dense_payload_and_dtypes():
    for dtype in bcast.DTYPES:
        array = bcast.make_dense((30, 20), dtype, seed=1)
        assert array.dtype == np.dtype(dtype) and array.shape == (30, 20)
        assert bcast.payload_bytes("dense", (30, 20), dtype, None) == array.nbytes


def test_checksum_sees_one_flipped_byte():
    array = bcast.make_dense((64, 64), "float64", seed=3)
    before = bcast.checksum(array)
    bcast.flip_one_byte(array)
    assert bcast.checksum(array) != before


def test_vmhwm_reset_works_here():
    """The per-repetition RSS peak relies on clear_refs 5 resetting VmHWM."""
    grown = np.ones(64 * 2**20 // 8)
    del grown
    assert bcast.rss_peak_bytes() - bcast.rss_bytes() > 32 * 2**20
    bcast.reset_rss_peak()
    assert bcast.rss_peak_bytes() - bcast.rss_bytes() < 8 * 2**20


# --- every method under mpiexec ---

KIND_ARGS = {
    "dense": ["--kind", "dense", "--shape", DENSE_SHAPE],
    "sparse": ["--kind", "sparse", "--shape", SPARSE_SHAPE, "--density", "0.2"],
}


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("method", bcast.METHODS)
def test_method_delivers_the_roots_array(tmp_path, method, kind, ranks):
    recs, meta = run_kernel(tmp_path, ranks, *KIND_ARGS[kind], "--method", method)
    assert len(recs) == 3 and [r["warmup"] for r in recs] == [True, False, False]
    for rec in recs:
        assert rec["ok"] and rec["verified"] and rec["error"] is None, rec
        assert rec["variant"] == method and rec["ranks"] == ranks and rec["kind"] == kind
        assert rec["bytes"] == rec["payload_bytes"] * (ranks - 1)
        assert rec["elapsed_s"] > 0 and rec["bandwidth_Bps"] == pytest.approx(rec["bytes"] / rec["elapsed_s"])
        # What each method allocates on a receiver while timed: the payload (new objects) or only metadata.
        if method in bcast.IN_PLACE:
            assert rec["tracemalloc_peak_bytes"] < rec["payload_bytes"] / 4
        else:
            assert rec["tracemalloc_peak_bytes"] >= rec["payload_bytes"]
    payload = bcast.payload_bytes(kind, bcast.parse_shape(recs[0]["shape"]), "float64", recs[0].get("density"))
    if kind == "dense":
        assert recs[0]["payload_bytes"] == payload
    else:
        assert recs[0]["nnz"] > 0 and recs[0]["density"] == 0.2
    assert meta["buffers_reused"] == (method in bcast.IN_PLACE)


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("kind", "method", "ranks"),
    [("dense", "buffer", 2), ("sparse", "pickle", 2), ("sparse", "rma", 4), ("dense", "p2p", 4), ("dense", "pkl5", 2)],
)
def test_corrupted_receive_fails_verification(tmp_path, kind, method, ranks):
    recs, _ = run_kernel(tmp_path, ranks, *KIND_ARGS[kind], "--method", method, "--corrupt")
    for rec in recs:
        assert rec["ok"] is False and rec["verified"] is False
        assert f"rank {ranks - 1}: CRC-32" in rec["error"]
        assert "rank 1:" not in rec["error"] or ranks == 2


@pytest.mark.mpi
def test_corrupted_point_is_marked_failed_by_the_launcher(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PATH": f"{MPIEXEC.parent}{os.pathsep}{os.environ['PATH']}",
    }
    out, failed = tmp_path / "r.jsonl", tmp_path / "failed.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "movebench.launch",
            "--family",
            "bcast",
            "--point",
            f"kind~dense/method~buffer/nodes~1/ranks~2/shape~{DENSE_SHAPE}/dtype~float64",
            "--ranks",
            "2",
            "--launcher",
            str(MPIEXEC),
            "--repetitions",
            "1",
            "--warmups",
            "0",
            "--kernel-args",
            f"--kind dense --method buffer --shape {DENSE_SHAPE} --corrupt",
            "--out",
            str(out),
            "--meta",
            str(tmp_path / "m.json"),
            "--failed",
            str(failed),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1 and not out.exists()
    assert "verification failed" in json.loads(failed.read_text())["error"]


@pytest.mark.mpi
def test_receiver_memory_pickle_twice_in_place_once(tmp_path):
    """8 MiB: pickle's receiver holds the stream and the new object, buffer's only its reused array."""
    shape = ["--kind", "dense", "--shape", "1024x1024"]
    pickled, _ = run_kernel(tmp_path, 2, *shape, "--method", "pickle", repetitions=3)
    in_place, _ = run_kernel(tmp_path, 2, *shape, "--method", "buffer", repetitions=3)
    payload = pickled[0]["payload_bytes"]
    assert payload == 8 * 2**20
    for rec in pickled[1:]:
        assert rec["rss_hwm_delta_bytes"] > 1.8 * payload and rec["tracemalloc_peak_bytes"] >= 2 * payload
        assert rec["root_tracemalloc_peak_bytes"] >= 2 * payload  # the stream and mpi4py's unpickled copy
    for rec in in_place[1:]:
        assert 0.9 * payload < rec["rss_hwm_delta_bytes"] < 1.3 * payload
        assert rec["root_rss_hwm_delta_bytes"] < 0.3 * payload


# --- the report section ---


@pytest.mark.mpi
def test_report_finds_speedups_and_crossover(tmp_path):
    import pandas as pd

    frames = []
    for method in ("pickle", "buffer"):
        for density in ("0.05", "0.5"):
            recs, _ = run_kernel(
                tmp_path, 2, "--kind", "sparse", "--shape", "200x200", "--density", density, "--method", method
            )
            frames.append(pd.DataFrame(recs))
    table = pd.concat(frames, ignore_index=True)
    medians = bcast.method_medians(table)
    assert len(medians) == 4 and medians["cold_s"].notna().all()
    buffer = medians[medians["method"] == "buffer"]
    assert np.allclose(buffer["speedup_vs_pickle"], buffer["pickle_s"] / buffer["time_s"])
    rows = bcast.crossover_rows(medians)
    assert [r["method"] for r in rows] == ["buffer"]
    assert rows[0]["in place vs pickle"].split()[0] in ("wins", "loses")
    assert "0.05: " in rows[0]["speed-up by density"] and "0.5: " in rows[0]["speed-up by density"]
