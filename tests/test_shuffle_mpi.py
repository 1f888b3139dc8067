"""The shuffle kernels under real mpiexec at tiny sizes."""

import json
import os

import pytest

from conftest import make_task, mpirun, run_kernel
from movebench import families
from movebench.engine import launchers
from movebench.families.shuffle.kernel import stream_bytes

pytestmark = pytest.mark.mpi


def run_point(tmp_path, ranks, pattern, size, window, check=True, **settings):
    point = {"pattern": pattern, "nodes": 1, "ranks": ranks, "message_size": size, "window": window}
    if pattern == "shuffle":
        point["skew"] = settings.pop("skew")
    settings = {"iterations": 5, "repetition_time": 0.5, **settings}
    proc, recs, meta = run_kernel(make_task("shuffle", point, settings), tmp_path, check=check)
    return (recs, meta) if check else proc


@pytest.mark.parametrize("ranks, pattern", [(2, "uni"), (2, "bidi"), (4, "uni"), (4, "bidi"), (2, "alltoall"),
                                            (4, "alltoall")])
def test_streaming_patterns(tmp_path, ranks, pattern):
    recs, meta = run_point(tmp_path, ranks, pattern, 4096, 4)
    assert [r["warmup"] for r in recs] == [True, False, False, False]
    assert [r["rep"] for r in recs] == [0, 0, 1, 2]
    for r in recs:
        assert r["ok"] and r["variant"] == pattern and r["ranks"] == ranks and r["iterations"] == 5
        assert r["bytes"] == stream_bytes(pattern, 4096, 4, 5, ranks)
        assert r["elapsed_s"] > 0 and r["bandwidth_Bps"] == pytest.approx(r["bytes"] / r["elapsed_s"])
    assert meta["ranks"] == ranks and len(meta["hostnames"]) == ranks
    assert meta["mpi_library"].startswith("MPICH") and meta["mpi_thread_level"] == "multiple"


def test_calibrated_iterations_are_recorded(tmp_path):
    recs, _ = run_point(tmp_path, 2, "bidi", 65536, 8, iterations="auto", repetition_time=0.05)
    iterations = {r["iterations"] for r in recs}
    assert len(iterations) == 1 and iterations.pop() >= 1
    assert all(0.005 < r["elapsed_s"] < 5.0 for r in recs)  # loose: a loaded machine stretches it


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("skew", [0.0, 1.2])
def test_data_dependent_shuffle_verifies(tmp_path, ranks, skew):
    recs, _ = run_point(tmp_path, ranks, "shuffle", 2048, 3, tuples_per_rank=4000, tuple_size=32, seed=12345,
                        skew=skew)
    for r in recs:
        assert r["ok"] and r["verified"] and r["error"] is None
        # about (n-1)/n of every rank's tuples cross to another rank
        total = ranks * 4000 * 32
        assert 0.3 * total * (ranks - 1) / ranks < r["bytes"] < 1.7 * total * (ranks - 1) / ranks
        assert r["imbalance"] >= 1.0 and r["partition_s"] > 0 and r["exchange_s"] == r["elapsed_s"]
    if skew > 0:
        assert recs[-1]["imbalance"] > 1.05  # hot keys land on few ranks


def test_misrouted_or_corrupted_tuples_fail_verification():
    proc = mpirun(4, "tests/mpi/shuffle_routes.py")
    result = json.loads(proc.stdout)
    assert result["good"]["verified"] is True and "error" not in result["good"]
    assert result["bad"]["verified"] is False and result["bad"]["ok"] is False
    assert "1 tuples landed on a rank that does not own their key" in result["bad"]["error"]
    assert result["flipped"]["verified"] is False
    assert "checksum" in result["flipped"]["error"]


def test_odd_ranks_refused_for_paired_patterns(tmp_path):
    proc = run_point(tmp_path, 3, "uni", 64, 4, check=False)
    assert proc.returncode != 0 and "needs an even number of ranks" in proc.stderr


def test_the_point_is_the_records_identity_verbatim(tmp_path):
    recs, meta = run_point(tmp_path, 2, "uni", 1000, 2)
    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 1000, "window": 2}
    assert all({k: r[k] for k in point} == point for r in recs)
    assert list(recs[0])[:7] == ["family", "variant", *point]  # in the point's own order
    assert meta["point"] == point and meta["settings"]["iterations"] == 5


@pytest.mark.parametrize("level, mode", [("single", "thp"), ("multiple", "4k")])
def test_thread_level_and_memory_mode_are_factors_of_the_point(tmp_path, level, mode):
    point = {"pattern": "bidi", "nodes": 1, "ranks": 2, "message_size": 4 << 20, "window": 2,
             "mpi_thread_level": level, "memory_mode": mode}
    proc, recs, meta = run_kernel(make_task("shuffle", point, {"iterations": 2, "repetition_time": 0.5}), tmp_path)
    assert all(r["ok"] and r["verified"] and r["mpi_thread_level"] == level and r["memory_mode"] == mode
               for r in recs)
    # what MPI granted and what the pages are, as measured in the ranks, not as asked
    assert meta["mpi_thread_level"] == level and meta["request_mode"] == "persistent"
    facts = meta["memory"]
    assert facts["memory_mode"] == mode and facts["page_size"] > 0
    assert set(facts["buffers"]) == {"send", "recv"}
    for buffer in facts["buffers"].values():
        assert buffer["nbytes"] == 4 << 20 and buffer["address_mod_4k"] == 0
        if mode == "4k":
            assert buffer["huge_page_bytes"] == 0
        elif facts["thp_enabled"] in ("always", "madvise"):
            assert buffer["address_mod_2m"] == 0



def test_a_one_node_point_runs_without_ucx_memory_hooks_unless_the_user_sets_them(tmp_path):
    """UCX's memory hooks (40 ms per rank when libucs loads) serve RDMA between nodes: a one-node MPI point runs
    with UCX_MEM_EVENTS=no and its meta's environment says so; a user's value wins; a point on several nodes and
    a Dragon point are left as they are."""
    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 2}
    settings = {"iterations": 5, "repetition_time": 0.5}
    env = {k: v for k, v in os.environ.items() if k != "UCX_MEM_EVENTS"}
    for given, expected in ((None, "no"), ("yes", "yes")):
        run_env = env if given is None else {**env, "UCX_MEM_EVENTS": given}
        _, recs, meta = run_kernel(make_task("shuffle", point, settings), tmp_path / str(given), env=run_env)
        assert all(r["ok"] and r["verified"] for r in recs)
        assert meta["environment"]["UCX_MEM_EVENTS"] == expected
        assert meta["fingerprint"]["env"]["UCX_MEM_EVENTS"] == expected
    two_nodes = families.load("shuffle").task({**point, "nodes": 2}, settings)
    dragon = families.load("kv").task({"operation": "get", "nodes": 1, "clients_per_node": 2}, {})
    assert "UCX_MEM_EVENTS" not in launchers.runtime(two_nodes).environment(two_nodes, env)
    assert "UCX_MEM_EVENTS" not in launchers.runtime(dragon).environment(dragon, env)
