"""Persistent-request streams (movebench.core.p2p) under real mpiexec: data verified, requests reusable."""

import json

import pytest

from conftest import mpirun

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [2, 4])
def test_persistent_streams_deliver_verified_data(ranks):
    result = json.loads(mpirun(ranks, "tests/mpi/p2p_streams.py").stdout)
    assert set(result) == {f"{p}-{s}" for p in ("uni", "bidi") for s in (1, 1000, 4096, 70000)}
    for case, runs in result.items():
        reps, pending, flipped, peer = runs[:3], runs[3], runs[4], runs[5]
        assert all(r["verified"] and r["same_elapsed"] and r["elapsed"] > 0 for r in reps), case
        assert pending == {"pending": False}, case
        assert flipped == {"flipped_verified": False}, case
        assert peer["holds_peer_pattern"] and peer["not_own_pattern"], case


def test_odd_ranks_are_refused():
    proc = mpirun(3, "tests/mpi/p2p_streams.py", check=False)
    assert proc.returncode != 0 and "3 ranks is odd" in proc.stderr
