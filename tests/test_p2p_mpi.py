"""Persistent-request streams (movebench.core.p2p) under real mpiexec: data verified, requests reusable."""

import json

import pytest

from conftest import mpirun

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [2, 4])
def test_persistent_streams_deliver_verified_data(ranks):
    result = json.loads(mpirun(ranks, "tests/mpi/p2p_streams.py").stdout)
    assert set(result) == {f"{k}-{p}-{s}" for k in ("bytes", "numpy") for p in ("uni", "bidi")
                           for s in (1, 1000, 4096, 70000)}
    for case, runs in result.items():
        reps, pending, flipped, peer = runs[:3], runs[3], runs[4], runs[5]
        assert all(r["verified"] and r["same_elapsed"] and r["elapsed"] > 0 for r in reps), case
        assert pending == {"pending": False}, case
        assert flipped == {"flipped_verified": False}, case
        assert peer["holds_peer_bytes"] and peer["not_own_bytes"], case


def test_odd_ranks_are_refused():
    proc = mpirun(3, "tests/mpi/p2p_streams.py", check=False)
    assert proc.returncode != 0 and "3 ranks is odd" in proc.stderr


@pytest.mark.parametrize(("pattern", "ranks", "numpy_expected"),
                         [("uni", 2, False), ("bidi", 2, False), ("alltoall", 3, False), ("shuffle", 2, True)])
def test_streaming_ranks_never_load_numpy(tmp_path, pattern, ranks, numpy_expected):
    """numpy in a rank is most of a point's fixed cost (docs/notes/kernels.md, section 8): only the data-dependent
    shuffle, whose tuples are numpy arrays, may load it; the records still verify the data."""
    point = {"pattern": pattern, "nodes": 1, "ranks": ranks, "message_size": 4096, "window": 4}
    settings = {"iterations": 20}
    if pattern == "shuffle":
        point["skew"] = 0.0
        settings.update(tuples_per_rank=1000, tuple_size=16, seed=1)
    task = {"family": "shuffle", "variant": pattern, "point": point, "settings": settings, "repetitions": 2,
            "warmups": 1, "ranks": ranks, "nodes": 1, "out": str(tmp_path / "p.jsonl"),
            "meta": str(tmp_path / "p.meta.json")}
    (tmp_path / "task.json").write_text(json.dumps(task))
    result = json.loads(mpirun(ranks, "tests/mpi/stream_imports.py", tmp_path / "task.json").stdout)
    assert result["numpy_loaded"] == [numpy_expected] * ranks
    recs = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(r["ok"] for r in recs)
    if pattern != "alltoall":  # alltoall's buffers carry no pattern to check
        assert all(r["verified"] for r in recs)
    meta = json.loads((tmp_path / "p.meta.json").read_text())
    if not numpy_expected:
        assert meta["memory"]["buffers"]["send"]["address_mod_4k"] == 0
