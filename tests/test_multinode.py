"""Every family across the namespace cluster's hosts, through `snakemake --profile slurm` (issue 9).

The cluster runs with 4 nodes for this module (`resized(4)`, back to 2 after). Runs, each what a user types plus
the test cluster's overlay (tests/test_slurm_campaign.py):

- one campaign with every family on 2 nodes (shuffle alltoall and shuffle with 4 ranks, bcast, io posix and
  mpiio on a folder every node sees, kv under `dragon -t tcp -N 2`) and shuffle alltoall and shuffle on 4 nodes,
  packed into one allocation (`--groups ... --group-components`: one job start instead of eight) and without
  tables and report (`--omit-from aggregate`: tests/test_slurm_campaign.py renders one from a 1- and 2-node
  campaign);
- an io point on a path each node has its own of (/dev/shm) fails at once and names the nodes that miss it;
- the ground truth: the links shaped to 1 Gbit/s, the 2-node uni figure at 1 MiB and 4 MiB through the shuffle
  kernel lands within 80-100% of the rate and never above it;
- a node's slurmd killed while a point runs on it: that point fails (NODE_FAIL), the others complete on the other
  nodes, Snakemake ends instead of waiting, and a rerun completes the failed point.

uni and bidi on 2 nodes, and the intra- vs inter-node report, are in tests/test_slurm_campaign.py's campaign.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import slurm_client_env
from movebench.core.records import read_jsonl
from test_slurm_campaign import jobs_of, run_id, run_snakemake, snakemake_cmd

pytestmark = [pytest.mark.slurm, pytest.mark.netns, pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]

FAMILIES = ("shuffle", "bcast", "io", "kv")
# kv's one point is its launch group's job (kv's points share launches), named after the group
KV_GROUP = "kv_group_nodes2_clients_per_node1_managers_per_node1_launch0"
ONE_JOB = ["--groups", *(f"{f}_point=multinode" for f in FAMILIES if f != "kv"), f"{KV_GROUP}=multinode",
           "--group-components", "multinode=20"]
POINTS_ONLY = ["--omit-from", "aggregate"]


def campaign_config(workdir: Path) -> dict:
    return {
        "campaign": {"name": "multinode", "results_dir": "results",
                     "launches": 1, "repetitions": 3, "warmups": 1, "timeout": 120},
        "shuffle": {"patterns": ["alltoall", "shuffle"], "ranks": [4], "nodes": [2, 4], "message_sizes": ["64KiB"],
                    "windows": [8], "iterations": 5, "tuples_per_rank": 2000, "tuple_size": 32, "skew": [0]},
        "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[100, 100]], "dtypes": ["float64"],
                  "ranks": [2], "nodes": [2]},
        # The nodes share the host's file systems (their mount namespaces replace /etc files, /dev/shm and /sys
        # only): the campaign's folder is one every node sees, as a cluster's parallel file system is.
        "io": {"patterns": ["sfmw"], "backends": ["posix", "mpiio"], "size_per_proc": ["1MiB"],
               "ranks": [2], "nodes": [2], "posix": {"path": str(workdir / "io")}},
        "kv": {"operations": ["put"], "nodes": [2], "clients_per_node": [1], "managers_per_node": [1],
               "value_sizes": ["4KiB"], "total_mem": "64MiB", "keys_per_client": 20, "iterations": 1},
    }


def write(workdir: Path, config: dict) -> None:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def metas(workdir: Path, family: str) -> dict[str, dict]:
    raw = workdir / "results" / "raw" / family
    return {str(p.relative_to(raw)).removesuffix(".meta.json"): json.loads(p.read_text())
            for p in raw.rglob("*.meta.json")}  # fmt: skip


def node_leftovers(cluster) -> dict:
    """Every node's processes (but slurmd) and /dev/shm entries, once finished job steps have gone."""
    deadline = time.monotonic() + 15
    while True:
        left = {n: (cluster.node_processes(n), sorted(os.listdir(cluster.node_shm(n)))) for n in cluster.nodes}
        left = {n: v for n, v in left.items() if v[0] or v[1]}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.3)


@pytest.fixture(scope="module")
def four_nodes(slurm_cluster):
    with slurm_cluster.resized(4):
        yield slurm_cluster


@pytest.fixture(scope="module")
def campaign(four_nodes, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("multinode")
    write(workdir, campaign_config(workdir))
    proc, took = run_snakemake(workdir, slurm_client_env(four_nodes), *ONE_JOB, *POINTS_ONLY, timeout=480)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    print(f"\nevery family across nodes (8 points, one allocation of 4 nodes): {took:.1f} s")
    return {"dir": workdir, "jobs": jobs_of(four_nodes, run_id(proc.stderr + proc.stdout))}


def test_every_mpi_point_names_its_hosts_their_addresses_and_the_network_transport(campaign, four_nodes):
    assert [(j["state"], j["nodes"]) for j in campaign["jobs"]] == [("COMPLETED", "4")]
    addr = four_nodes.node_addr
    seen = 0
    for family in ("shuffle", "bcast", "io"):
        for point, meta in metas(campaign["dir"], family).items():
            nodes = int(point.split("nodes~")[1].split("/")[0])
            ranks = meta["ranks"]
            expected = [f"n{1 + r * nodes // ranks}" for r in range(ranks)]  # srun's block distribution
            assert meta["rank_nodes"] == meta["hostnames"] == expected, (point, meta["rank_nodes"])
            assert meta["rank_addrs"] == [addr(n) for n in expected], point
            assert {h: ifs["eth0"] for h, ifs in meta["host_interfaces"].items()} == {n: addr(n) for n in expected}
            transport = meta["transport"]
            assert transport["netmod"] == "ucx" and transport["ucx_processes"] == ranks, (point, transport)
            # UCX's own report: peers on other hosts over TCP on eth0, nothing else; on every host
            assert transport["ucx"]["inter-node"] == ["tcp/eth0"], (point, transport)
            assert {h for h, kinds in transport["ucx_by_host"].items() if "inter-node" in kinds} == set(expected)
            seen += 1
    assert seen == 4 + 1 + 2


def test_io_on_two_nodes_reads_back_what_every_rank_wrote(campaign):
    for family in ("shuffle", "bcast", "io"):
        records = sorted((campaign["dir"] / "results" / "raw" / family).rglob("*.jsonl"))
        assert records
        for path in records:
            recs = read_jsonl(path)
            assert len(recs) == 4 and all(r["ok"] for r in recs), path
            if family in ("shuffle", "io"):  # io: CRC-32 of each rank's part read back; shuffle: every tuple home
                assert all(r["verified"] for r in recs if "verified" in r), path
    io = metas(campaign["dir"], "io")
    assert len(io) == 2 and {m["storage"]["path"] for m in io.values()} == {str(campaign["dir"] / "io")}


def test_kv_on_two_nodes_has_managers_and_clients_on_both_and_leaves_nothing_on_any_node(campaign, four_nodes):
    (meta,) = metas(campaign["dir"], "kv").values()
    # Dragon picks its 2 nodes of the 4-node allocation itself (not necessarily n1 and n2)
    hosts = {c["host"] for c in meta["client_placement"]}
    assert len(hosts) == 2 and hosts <= set(four_nodes.nodes), meta["client_placement"]
    assert sorted(s["hostname"] for s in meta["ddict_stats"]) == sorted(hosts)  # a manager on each node
    assert all(c["addr"] == four_nodes.node_addr(c["host"]) for c in meta["client_placement"])
    assert all(c["agents"] == ["dragon-tcp"] for c in meta["client_placement"])  # Dragon's TCP agent, no HSTA
    assert meta["dragon_transport"] == "tcp" and meta["head_host"] in hosts
    assert meta["fingerprint"]["hosts"] == sorted(hosts)  # what a claim over nodes counts as a host per node
    assert " -t tcp -N 2 " in meta["command"]
    launch = meta["dragon_launch"]
    assert launch["returncode"] == 0
    # the Dragon launcher swept every node of the allocation after Dragon; a clean run left it nothing to do
    assert set(launch["nodes_swept"]) == set(four_nodes.nodes), launch["nodes_swept"]
    assert all(v == {"killed_pids": [], "removed_segments": []} for v in launch["nodes_swept"].values())
    records = read_jsonl(next((campaign["dir"] / "results" / "raw" / "kv").rglob("*.jsonl")))
    assert len(records) == 4 and all(r["ok"] and r["verified"] for r in records)
    # and nothing of the campaign (Dragon, MPI) is left on any node: no process, nothing in /dev/shm
    assert node_leftovers(four_nodes) == {}


def test_io_on_a_path_each_node_has_its_own_fails_at_once_and_says_why(four_nodes, tmp_path):
    # /dev/shm is every node's own (as /tmp is on most clusters): rank 1 on n2 cannot see rank 0's folder on n1.
    from movebench import families
    from movebench.engine import launch

    settings = {"fsync": True, "verify": True, "cleanup": True, "name_prefix": "mbio-nodelocal", "transfer_size":
                1 << 20, "path": "/dev/shm/movebench-io-test"}  # fmt: skip
    for backend in ("posix", "mpiio"):
        task = families.load("io").task({"pattern": "mfmw", "backend": backend, "nodes": 2, "ranks": 2,
                                       "size_per_proc": 1 << 20}, settings, repetitions=1, warmups=0)  # fmt: skip
        proc, recs, meta = launch.run_kernel(task, tmp_path / backend, "srun --mpi=pmi2 -N {nodes} -n {ranks}",
                                             timeout=120, env=slurm_client_env(four_nodes))  # fmt: skip
        text = proc.stdout + proc.stderr
        assert proc.returncode != 0 and recs is None, text[-3000:]
        assert "posix.path /dev/shm/movebench-io-test: the run folder rank 0 made on n1 is not there on n2" in text
    # rank 0 removed its run folder on the way out
    assert os.listdir(four_nodes.node_shm("n1") / "movebench-io-test") == []
    shutil.rmtree(four_nodes.node_shm("n1") / "movebench-io-test")


def test_shaped_link_two_node_uni_lands_at_80_to_100_percent_of_the_rate(four_nodes, tmp_path):
    # The ground truth: the links shaped to 1 Gbit/s (125 MB/s; TCP payload tops out at 1448/1514 = 95.6% of it
    # on 1500-byte frames), the shuffle kernel's osu_bw between two nodes through the campaign's own path.
    config = {"campaign": {"name": "ground-truth", "results_dir": "results",
                           "launches": 1, "repetitions": 5, "warmups": 1,
                           "timeout": 120},
              "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [2], "message_sizes": ["1MiB", "4MiB"],
                          "windows": [8], "iterations": 3, "tuples_per_rank": 2000, "tuple_size": 32, "skew": [0]}}
    write(tmp_path, config)
    with four_nodes.shaped("rate=1gbit") as shape:
        proc, took = run_snakemake(tmp_path, slurm_client_env(four_nodes), "--group-components", "shuffle=2",
                                   *POINTS_ONLY)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rate = shape.rate_Bps
    for size in (1 << 20, 4 << 20):
        path = f"pattern~uni/nodes~2/ranks~2/message_size~{size}/window~8"
        raw = tmp_path / "results" / "raw" / "shuffle"
        bws = [r["bandwidth_Bps"] for r in read_jsonl(raw / f"{path}.jsonl") if not r["warmup"]]
        meta = json.loads((raw / f"{path}.meta.json").read_text())
        assert meta["rank_nodes"] == ["n1", "n2"] and meta["transport"]["ucx"]["inter-node"] == ["tcp/eth0"]
        share = statistics.median(bws) / rate
        print(f"\nuni {size >> 20} MiB over a 1 Gbit/s link: median {statistics.median(bws) / 1e6:.1f} MB/s = "
              f"{share:.1%} of the rate (repetitions {min(bws) / rate:.1%}-{max(bws) / rate:.1%})")
        assert len(bws) == 5 and 0.8 <= share <= 1.0, bws
        assert max(bws) <= rate, bws
    print(f"ground-truth campaign: {took:.1f} s")


def test_a_node_whose_slurmd_dies_mid_campaign_fails_its_point_and_a_rerun_completes_it(four_nodes, tmp_path):
    # Two 2-node points side by side on the 4 nodes. The links shaped to 100 Mbit/s make the 1 MiB point last
    # about a minute: long enough for the controller to declare its node dead while it runs (SlurmdTimeout=20);
    # unshaped, for the rerun, it takes a second.
    config = {"campaign": {"name": "node-failure", "results_dir": "results",
                           "launches": 1, "repetitions": 3, "warmups": 1,
                           "timeout": 240},
              "shuffle": {"patterns": ["uni"], "ranks": [2], "nodes": [2], "message_sizes": ["64KiB", "1MiB"],
                          "windows": [8], "iterations": 24, "tuples_per_rank": 2000, "tuple_size": 32, "skew": [0]}}
    write(tmp_path, config)
    env = slurm_client_env(four_nodes)
    long_point = "pattern~uni/nodes~2/ranks~2/message_size~1048576/window~8"
    log = tmp_path / "results" / "logs" / "shuffle" / f"{long_point}.log"
    out = tmp_path / "snakemake.out"
    victim = None
    try:
        with four_nodes.shaped("rate=100mbit"), out.open("w") as sink:
            smk = subprocess.Popen(snakemake_cmd(tmp_path, *POINTS_ONLY), cwd=Path(__file__).resolve().parents[1],
                                   env=env, stdout=sink, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 120
                while not (log.exists() and "movebench: srun" in log.read_text()):  # the long point's kernel runs
                    assert smk.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
                    time.sleep(0.3)
                time.sleep(3)  # its ranks are streaming
                victim = rank_node_without_batch(four_nodes, "message_size~1048576/")
                jobs = jobs_of(four_nodes, run_id(out.read_text()))
                (job,) = [j for j in jobs if j["state"] == "RUNNING" and victim in expand(four_nodes, j["nodelist"])]
                os.kill(four_nodes.node_pid(victim), 9)
                t_kill = time.monotonic()
                smk.wait(timeout=240)
                took = time.monotonic() - t_kill
            finally:
                if smk.poll() is None:
                    smk.kill()
                    smk.wait()
        text = out.read_text()
        assert smk.returncode != 0, text[-3000:]
        states = {j["id"]: j["state"] for j in jobs_of(four_nodes, run_id(text))}
        assert states[job["id"]] == "NODE_FAIL" and sorted(states.values()) == ["COMPLETED", "NODE_FAIL"], states
        raw, failed = tmp_path / "results" / "raw" / "shuffle", tmp_path / "results" / "failed" / "shuffle"
        assert (raw / "pattern~uni/nodes~2/ranks~2/message_size~65536/window~8.jsonl").exists()
        assert not (raw / f"{long_point}.jsonl").exists()
        failure = json.loads((failed / f"{long_point}.json").read_text())
        assert failure["nodes"] == 2 and failure["error"], failure
        print(f"\n{victim}'s slurmd killed: snakemake ended {took:.1f} s later; the point failed with "
              f"{failure['error']!r}")
    finally:
        if victim:
            four_nodes.restart_node(victim)  # the node boots again (its orphaned job step goes with it)
    assert four_nodes.node_states() == {n: "idle" for n in four_nodes.nodes}
    assert four_nodes.node_processes(victim) == {}
    proc, took = run_snakemake(tmp_path, env, *POINTS_ONLY)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(read_jsonl(raw / f"{long_point}.jsonl")) == 4
    assert not list(failed.rglob("*.json"))
    assert [j["state"] for j in jobs_of(four_nodes, run_id(proc.stderr + proc.stdout))] == ["COMPLETED"]
    print(f"rerun of the failed point: {took:.1f} s")


def rank_node_without_batch(cluster, point_part: str) -> str:
    """The node where a rank of the point runs but not its batch script (launch stays alive to record the failure)."""
    ranks, batch = set(), set()
    for node in cluster.nodes:
        for cmd in cluster.node_processes(node).values():
            if point_part in cmd:
                (batch if "movebench.engine.launch" in cmd else ranks).add(node)
    (victim,) = ranks - batch
    return victim


def expand(cluster, nodelist: str) -> list[str]:
    return cluster.run("scontrol", "show", "hostnames", nodelist).stdout.split()
