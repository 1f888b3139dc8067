"""The test cluster's pieces that need no root: link shapes, node counts, addresses, files it writes."""

from __future__ import annotations

import ipaddress

import pytest

from movebench_testcluster import netns
from movebench_testcluster.netns import LinkShape, NetworkError
from movebench_testcluster.slurm import LocalSlurmCluster, SlurmClusterError, read_nodes


@pytest.mark.parametrize(
    ("text", "rate_bps", "delay_s", "shown"),
    [
        ("rate=5gbit", 5 * 10**9, None, "rate=5gbit"),
        ("rate=1.5gbit delay=20us", 1_500_000_000, 20e-6, "rate=1500mbit delay=20us"),
        ("rate=100mbps", 800 * 10**6, None, "rate=800mbit"),  # tc's mbps: megabytes per second
        ("delay=2ms", None, 2e-3, "delay=2000us"),
    ],
)
def test_link_shapes_read_as_tc_reads_them(text, rate_bps, delay_s, shown):
    shape = LinkShape.parse(text)
    assert (shape.rate_bps, shape.delay_s, str(shape)) == (rate_bps, pytest.approx(delay_s) if delay_s else None,
                                                            shown)  # fmt: skip
    assert LinkShape.parse(str(shape)) == shape


@pytest.mark.parametrize(("text", "names"), [("rate=5", "rate='5'"), ("speed=1gbit", "'speed=1gbit'"),
                                             ("rate=-1gbit", "rate='-1gbit'"), ("rate", "'rate'"),
                                             ("delay=2parsecs", "delay='2parsecs'")])  # fmt: skip
def test_a_bad_link_shape_is_one_line_naming_it_and_what_is_valid(text, names):
    with pytest.raises(NetworkError) as err:
        LinkShape.parse(text)
    message = str(err.value)
    assert "\n" not in message and f"LINK={text!r}" in message and names in message and "valid: rate=" in message


def test_no_link_shape_is_none():
    assert LinkShape.parse(None) is None and LinkShape.parse("  ") is None


def test_tbf_bucket_holds_a_gso_packet_and_1_ms_and_the_queue_20_ms():
    assert LinkShape.parse("rate=1gbit").tbf_args() == ["tbf", "rate", "1000000000bit", "burst", "125000",
                                                        "limit", "2500000"]  # fmt: skip
    slow = LinkShape.parse("rate=10mbit").tbf_args()
    assert slow[slow.index("burst") + 1] == "65536" and slow[slow.index("limit") + 1] == str(4 * 65536)


@pytest.mark.parametrize("value", ["0", "-2", "many", "201", ""])
def test_a_bad_node_count_is_one_line(value):
    with pytest.raises(SlurmClusterError, match=r"^NODES=.*: the test cluster takes 1 to 200 nodes$"):
        read_nodes(value)


def test_nodes_addresses_and_hosts_file():
    nodes = netns.node_names(3)
    assert nodes == ["n1", "n2", "n3"]
    assert [netns.node_addr(n) for n in nodes] == ["198.18.0.11", "198.18.0.12", "198.18.0.13"]
    hosts = netns.hosts_text(nodes)
    assert "198.18.0.1\tmovebench-head" in hosts and "198.18.0.13\tn3" in hosts and "127.0.0.1\tlocalhost" in hosts
    assert all(ipaddress.ip_address(netns.node_addr(n)) in netns.BLOCK for n in netns.node_names(netns.MAX_NODES))
    assert netns.nsswitch_text().splitlines()[-1] == "hosts: files"


def test_the_configuration_names_each_node_by_its_own_address(tmp_path):
    conf = LocalSlurmCluster(tmp_path / "state", nodes=3, install=False).render_conf(ctld_port=12345)
    assert "SlurmctldHost=localhost(198.18.0.1)" in conf
    for i in (1, 2, 3):
        assert f"NodeName=n{i} NodeHostname=n{i} NodeAddr=198.18.0.1{i} Port=6818 " in conf
    assert "MaxNodes=3" in conf and "OverSubscribe=EXCLUSIVE" in conf and "JobRequeue=0" in conf
    assert "TaskPlugin=task/affinity" in conf
