"""Admission: every family's points checked against a node's memory and cores and the free space they need.

The checks run in the Snakefile's onstart (tests/test_hardening.py runs them through snakemake);
here they run on capacities given by hand, so the refusals do not depend on this machine's size.
"""

import os
import subprocess

import pytest

from movebench.engine import admission, cluster, plan
from movebench.engine import config as cc
from movebench.families import shuffle as shuffle_spec

GiB = 2**30
NODE = admission.Capacity(where="a 16 GiB node", memory_bytes=16 * GiB, memory_source="MemAvailable", cores=4,
                          max_nodes=1, local_storage=True)


def refused(config, capacity=NODE):
    config = cc.validate(config, warn=lambda line: None)
    return admission.problems(config, plan.grid(config), capacity)


def shuffle(**section):
    return {"campaign": {}, "shuffle": {"patterns": ["uni"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4],
                                        **section}}


@pytest.mark.parametrize(
    "config, point",
    [
        (shuffle(message_sizes=["8GiB"]), "shuffle pattern~uni/nodes~1/ranks~2/message_size~8589934592/window~4"),
        (shuffle(patterns=["alltoall"], ranks=[8], message_sizes=["1GiB"]), "shuffle pattern~alltoall/nodes~1/ranks~8"),
        (shuffle(patterns=["shuffle"], tuples_per_rank=2**27, tuple_size=64), "shuffle pattern~shuffle"),
        ({"campaign": {}, "io": {"patterns": ["sfsw"], "backends": ["mpiio"], "size_per_proc": ["1GiB"], "ranks": [8]}},
         "io pattern~sfsw/backend~mpiio/nodes~1/ranks~8/size_per_proc~1073741824"),
        ({"campaign": {}, "io": {"patterns": ["mfmw"], "backends": ["posix"], "size_per_proc": ["4GiB"], "ranks": [2]}},
         "io pattern~mfmw/backend~posix"),
        ({"campaign": {}, "bcast": {"kinds": ["dense"], "methods": ["pickle"], "shapes": [[30000, 30000]]}},
         "bcast kind~dense/method~pickle/nodes~1/ranks~2/shape~30000x30000"),
        ({"campaign": {}, "kv": {"operations": ["put"], "total_mem": "16GiB"}}, "kv operation~put/nodes~1"),
    ],
)
def test_a_point_over_the_memory_budget_is_refused_with_its_estimate(config, point):
    lines = refused(config)
    assert lines and lines[0].startswith(point), lines
    assert "plans" in lines[0] and "on its busiest node" in lines[0]
    assert "campaign.memory_fraction 0.8 x MemAvailable 16.0 GiB = 12.8 GiB (a 16 GiB node)" in lines[0]


def test_the_shuffle_pattern_plans_its_receive_side_and_skew():
    """Zipf keys send the hottest key's share of every rank's tuples to one rank: more to receive than uniform."""
    point = {"pattern": "shuffle", "nodes": 1, "ranks": 8, "message_size": 4096, "window": 4}
    section = {"tuples_per_rank": 1_000_000, "tuple_size": 64}
    uniform = shuffle_spec.rank_bytes({**point, "skew": 0.0}, section)
    skewed = shuffle_spec.rank_bytes({**point, "skew": 2.0}, section)
    sent = 64_000_000
    assert 3 * sent < uniform < 5 * sent  # tuples, their partitioned copy, what arrives, a checksum temporary
    assert skewed > uniform + 2 * sent  # 61% of all 8 ranks' tuples land on the hottest key's rank
    assert shuffle_spec.zipf_top_share(2.0) == pytest.approx(6 / 3.14159265**2, rel=1e-3)


def test_blob_upload_buffers_and_sfsw_gather_count():
    from movebench.families.io import FAMILY as io

    section = {"verify": True, "block_size": "100MiB", "range_size": "4MiB", "blob": {"max_concurrency": 1}}
    point = {"pattern": "mfmw", "backend": "blob", "nodes": 1, "ranks": 2, "size_per_proc": 64 * 2**20}
    one = io.node_memory_bytes(point, section)
    four = io.node_memory_bytes(point, {**section, "blob": {"max_concurrency": 4}})
    assert four - one == 2 * 3 * 64 * 2**20  # two ranks, three more (object-sized) blocks in flight each
    sfsw = io.node_memory_bytes({**point, "pattern": "sfsw"}, section)
    assert sfsw - io.node_memory_bytes({**point, "pattern": "sfmw"}, section) == 2 * 64 * 2**20  # rank 0's gather


@pytest.mark.parametrize(
    "config, words",
    [
        (shuffle(ranks=[4096], message_sizes=["1KiB"]), "4096 ranks on one node, 1024 per core of its 4 cores"),
        ({"campaign": {}, "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[8, 8]], "ranks": [64]}},
         "64 ranks on one node, 16 per core"),
        ({"campaign": {"max_ranks_per_core": 2}, "io": {"backends": ["posix"], "ranks": [16], "size_per_proc": [1024]}},
         "more than campaign.max_ranks_per_core = 2"),
    ],
)
def test_far_more_ranks_than_cores_is_refused_with_the_reason(config, words):
    lines = refused(config)
    assert any(words in line for line in lines), lines
    assert "measures process scheduling, not the transfer" in lines[0]


def test_kv_clients_per_cpu_are_judged_against_where_the_points_run_not_the_validating_machine():
    kv = {"campaign": {}, "kv": {"operations": ["put"], "clients_per_node": [48], "value_sizes": ["1KiB"],
                                 "total_mem": "1GiB", "max_clients_per_cpu": 8}}
    lines = refused(kv)  # 48 clients on a 4-core node: 12 per core
    assert lines and "48 ranks on one node, 12 per core of its 4 cores" in lines[0]
    assert "more than kv.max_clients_per_cpu = 8" in lines[0]
    # a cluster's campaign validates on a small login node and fits its 128-core partition
    assert refused(kv, admission.Capacity("Slurm partition batch", 512 * GiB, "RealMemory", 128, None, False)) == []


def test_more_than_one_node_where_there_is_one_is_refused():
    lines = refused(shuffle(ranks=[2, 4], nodes=[1, 2]))
    assert len(lines) == 2 and all("nodes~2" in line and "2 nodes, but a 16 GiB node is 1 node" in line
                                   for line in lines)
    cluster_node = admission.Capacity("Slurm partition batch", 64 * GiB, "RealMemory", 32, None, False)
    assert refused(shuffle(ranks=[2, 4], nodes=[1, 2]), cluster_node) == []


def test_points_that_fit_are_admitted():
    assert refused(shuffle(patterns=["uni", "bidi", "alltoall", "shuffle"], ranks=[2, 4], windows=[1, 64])) == []


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs of our own (root only), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_posix_target_without_room_is_refused_with_its_free_space(small_fs):
    io = {"patterns": ["mfmw"], "backends": ["posix"], "ranks": [2], "posix": {"path": str(small_fs / "target")}}
    assert refused({"campaign": {}, "io": {**io, "size_per_proc": ["1MiB"]}}) == []
    lines = refused({"campaign": {}, "io": {**io, "size_per_proc": ["1MiB", "4MiB"]}})
    assert lines == [f"{small_fs / 'target'}: its largest point (io pattern~mfmw/backend~posix/nodes~1/ranks~2/"
                     f"size_per_proc~4194304) writes 8.0 MiB, but the filesystem of {small_fs} has 4.0 MiB free"]
    # cleanup: false keeps each point's last objects: they add up over the campaign's points.
    kept = refused({"campaign": {}, "io": {**io, "size_per_proc": ["512KiB", "1MiB"], "cleanup": False}})
    assert len(kept) == 1 and "the points leave 3.0 MiB there (cleanup: false)" in kept[0]


def test_a_results_dir_without_room_is_refused(small_fs):
    lines = refused({**shuffle(), "campaign": {"results_dir": str(small_fs / "results")}})
    assert lines == [f"campaign.results_dir {small_fs / 'results'}: 1 points and their tables need about 16.2 MiB, "
                     f"but the filesystem of {small_fs} has 4.0 MiB free"]


def test_kv_dev_shm_is_checked_here_and_left_to_the_launcher_on_other_nodes():
    from movebench.families.kv import FAMILY as kv

    section = cc.validate({"campaign": {}, "kv": {}}, warn=lambda line: None)["kv"]
    point = {"operation": "put", "nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "value_size": 4096}
    (room,) = kv.storage(point, section)
    assert room.path == "/dev/shm" and room.node_local and room.bytes > 256 * 2**20
    huge = {"campaign": {}, "kv": {"operations": ["put"], "total_mem": "1TiB"}}
    far = admission.Capacity("Slurm partition batch", 64 * 2**40, "RealMemory", 32, None, local_storage=False)
    assert refused(huge, far) == []  # another machine's /dev/shm: the Dragon launcher checks it there


SCONTROL_PARTITIONS = (
    "PartitionName=debug Default=YES MaxNodes=2 MaxTime=UNLIMITED MaxMemPerNode=UNLIMITED Nodes=n[1-2] TotalNodes=2\n"
    "PartitionName=small Default=NO MaxMemPerNode=1024 Nodes=n[1-2] TotalNodes=2\n"
)
SCONTROL_NODES = (
    "NodeName=n1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 RealMemory=3900 AllocMem=0 Sockets=2 "
    "State=IDLE Partitions=debug,small\n"
    "NodeName=n2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=4 RealMemory=7900 AllocMem=0 Sockets=2 "
    "State=IDLE Partitions=debug,small\n"
)


def scontrol(argv):
    text = SCONTROL_PARTITIONS if argv[2] == "partition" else SCONTROL_NODES
    return subprocess.CompletedProcess(argv, 0, text, "")


def test_a_slurm_partitions_node_is_its_smallest_node_capped_by_max_mem_per_node():
    node = cluster.partition_capacity(None, run=scontrol)
    assert (node.where, node.memory_bytes, node.memory_source, node.cores) == (
        "Slurm partition debug", 3900 * 2**20, "RealMemory", 2)
    assert node.max_nodes is None and not node.local_storage
    small = cluster.partition_capacity("small", run=scontrol)
    assert (small.memory_bytes, small.memory_source) == (1024 * 2**20, "MaxMemPerNode")
    assert cluster.partition_capacity("nosuch", run=scontrol) is None
    failing = cluster.partition_capacity(None, run=lambda argv: subprocess.CompletedProcess(argv, 1, "", "down"))
    assert failing is None
    lines = refused(shuffle(message_sizes=["2GiB"]), node)
    assert lines and "more than campaign.memory_fraction 0.8 x RealMemory 3.8 GiB" in lines[0]
    assert "(Slurm partition debug)" in lines[0]


def test_message_lists_the_first_points_and_counts_the_rest():
    lines = [f"point {i}" for i in range(25)]
    text = admission.message(lines, NODE)
    assert text.startswith("movebench: refused before any job: 25 points or folders do not fit a 16 GiB node:")
    assert "point 19" in text and "point 20" not in text and "... and 5 more" in text
