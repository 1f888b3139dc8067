"""The transport a point ran over, read from the MPI libraries' own reports (movebench.core.transport).

The lines are UCX 1.20.1's and MPICH 5.0.2's, as printed on the namespace test cluster (4 ranks on n1 and n2,
`UCX_LOG_LEVEL=info`; the ofi netmod with `MPIR_CVAR_DEBUG_SUMMARY=1`).
"""

from __future__ import annotations

from movebench.core.transport import TransportLog, parse_lanes, probe_env

TWO_NODES = """\
[1795455034.468934] [n2:4543 :0]     ucp_context.c:2463 UCX  INFO  Version 1.20.1 (loaded from /v/lib/mpich/libucp.so.0)
[1795455034.477242] [n1:4546 :0]     ucp_context.c:2463 UCX  INFO  Version 1.20.1 (loaded from /v/lib/mpich/libucp.so.0)
[1795455034.533656] [n2:4543 :0]          parser.c:2364 UCX  INFO  UCX_* env variable: UCX_LOG_LEVEL=info
[1795455034.534499] [n2:4543 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 self cfg#0 tag(self/memory cma/memory)  rma(self/memory)  am(self/memory cma/memory)
[1795455034.575486] [n1:4546 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 self cfg#0 tag(self/memory cma/memory)  rma(self/memory)  am(self/memory cma/memory)
[1795455034.615121] [n2:4543 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 inter-node cfg#1 tag(tcp/eth0)  rma_am(tcp/eth0)  am(tcp/eth0)
[1795455034.612714] [n1:4546 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 inter-node cfg#1 tag(tcp/eth0)  rma_am(tcp/eth0)  am(tcp/eth0)
[1795455034.671395] [n1:4546 :0]      ucp_worker.c:1912 UCX  INFO    ucp_context_0 intra-node cfg#2 tag(sysv/memory cma/memory)  rma(sysv/memory posix/memory)  am(sysv/memory cma/memory)
{"rank": 0, "bandwidth": 1.0}
[1795455034.700000] [n1:4546 :0]          ucp_ep.c:1234 UCX  WARN  something the user must see
"""  # noqa: E501


def feed(text: str) -> tuple[TransportLog, list[str]]:
    log, kept = TransportLog(), []
    for line in text.splitlines(keepends=True):
        if not log.feed(line):
            kept.append(line.rstrip("\n"))
    return log, kept


def test_ucx_lanes_per_kind_of_peer_and_host():
    log, kept = feed(TWO_NODES)
    got = log.summary()
    assert got["netmod"] == "ucx" and got["ucx_version"] == "1.20.1" and got["ucx_processes"] == 2
    assert got["ucx"] == {"inter-node": ["tcp/eth0"], "intra-node": ["cma/memory", "posix/memory", "sysv/memory"],
                          "self": ["cma/memory", "self/memory"]}
    assert got["ucx_by_host"]["n1"]["inter-node"] == ["tag(tcp/eth0) rma_am(tcp/eth0) am(tcp/eth0)"]
    assert set(got["ucx_by_host"]) == {"n1", "n2"} and "intra-node" not in got["ucx_by_host"]["n2"]
    assert got["ofi"] is None


def test_the_log_keeps_everything_but_ucx_info_and_gets_one_line_per_host_and_kind():
    log, kept = feed(TWO_NODES)
    # the kernel's own output and UCX's warnings stay; its INFO lines go
    assert kept == ['{"rank": 0, "bandwidth": 1.0}', TWO_NODES.splitlines()[-1]]
    lines = log.log_lines()
    assert lines[0].startswith("movebench: UCX 1.20.1 in 2 processes chose")
    assert "movebench:   n1 inter-node: tag(tcp/eth0) rma_am(tcp/eth0) am(tcp/eth0)" in lines
    assert len(lines) == 1 + 5  # n1: self, inter-node, intra-node; n2: self, inter-node


def test_mpich_ofi_provider_from_the_debug_summary():
    text = ("provider: tcp;ofi_rxm, score = 4, pref = 0, FI_SOCKADDR_IN [16] 198.18.0.11\n"
            "==== Capability set configuration ====\n"
            "libfabric provider: sockets - 198.18.0.0/24\n")
    log, kept = feed(text)
    assert log.summary()["netmod"] == "ofi"
    assert log.summary()["ofi"] == {"provider": "sockets", "network": "198.18.0.0/24"}
    assert kept == ["==== Capability set configuration ====", "libfabric provider: sockets - 198.18.0.0/24"]


def test_no_report_says_so():
    log, kept = feed("plain output\n")
    assert log.summary()["netmod"] is None and log.log_lines() == [] and kept == ["plain output"]


def test_probe_variables_never_override_the_users():
    assert probe_env({}) == {"UCX_LOG_LEVEL": "info"}
    assert probe_env({"UCX_LOG_LEVEL": "warn"}) == {}
    assert probe_env({"MPIR_CVAR_CH4_NETMOD": "ofi"}) == {"UCX_LOG_LEVEL": "info", "MPIR_CVAR_DEBUG_SUMMARY": "1"}


def test_lanes():
    assert parse_lanes("tag(tcp/eth0 tcp/eth1)  am(tcp/eth0)") == {"tag": ["tcp/eth0", "tcp/eth1"], "am": ["tcp/eth0"]}


def test_the_logging_knobs_stay_out_of_the_fingerprint():
    from movebench.core.envinfo import fingerprint

    env = {"UCX_LOG_LEVEL": "info", "MPIR_CVAR_DEBUG_SUMMARY": "1", "UCX_TLS": "tcp"}
    assert fingerprint({"environment": env})["env"] == {"UCX_TLS": "tcp"}
