"""The test cluster's network: one network namespace per node on a bridge of its own.

Layout (addresses from 198.18.0.0/24, a block of the benchmarking range 198.18.0.0/15)::

    root namespace                 movebench-switch             movebench-n1 (UTS: n1)
    movebench0 198.18.0.1/24 ---- head  [br0]  n1 ------------- eth0 198.18.0.11/24
    (slurmctld, munged, clients)          n2 ------------------ movebench-n2: eth0 198.18.0.12/24
                                          ...

- The bridge lives in a namespace of its own (``movebench-switch``), so it is touched by no firewall
  or bridge hook of the host, and the host takes part only through its veth ``movebench0``.
- No namespace has a default route: each knows only the connected /24, and nothing is forwarded.
- No IPv6 (no link-local addresses either: ``addrgenmode none``), so nothing solicits routers.
- Name resolution: ``/etc/netns/<namespace>/{hosts,resolv.conf,nsswitch.conf}`` (and a machine-id),
  bind-mounted over /etc (as ``ip netns exec`` does): every node name in hosts, ``hosts: files`` only, and a
  resolver on the node's own loopback in case a program reads resolv.conf itself.
- A node's processes are started in the node's network namespace and new UTS and mount namespaces
  (``node_prefix``) and see the node's host name, its /etc files and a /dev/shm (tmpfs) of their own;
  every job step inherits them from slurmd. ``enter_prefix`` joins a running node (the net, UTS and
  mount namespaces of its slurmd).
- Links can be shaped (``LinkShape``): tbf on both ends of each node's veth, so each node sends and
  receives at most the rate, like a full-duplex NIC on a switch port.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

BLOCK = ipaddress.ip_network("198.18.0.0/24")
HEAD_ADDR = str(BLOCK[1])
FIRST_NODE_HOST = 11
MAX_NODES = 200
NS_PREFIX = "movebench-"
SWITCH_NS = f"{NS_PREFIX}switch"
HEAD_LINK = "movebench0"
HEAD_NAME = "movebench-head"
NODE_IF = "eth0"
BRIDGE = "br0"
NETNS_ETC = Path("/etc/netns")
NETNS_RUN = Path("/run/netns")


class NetworkError(RuntimeError):
    """The namespace network could not be built, shaped or removed."""


def node_names(count: int) -> list[str]:
    return [f"n{i}" for i in range(1, count + 1)]


def node_ns(node: str) -> str:
    return f"{NS_PREFIX}{node}"


def node_addr(node: str) -> str:
    index = int(node.removeprefix("n"))
    return str(BLOCK[FIRST_NODE_HOST - 1 + index])


# --------------------------------------------------------------------------- link shaping

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
               "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9}  # fmt: skip
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
LINK_HELP = "rate=<number><bit|kbit|mbit|gbit|bps|kbps|mbps|gbps> (as tc reads it), delay=<number><s|ms|us>"


@dataclass(frozen=True)
class LinkShape:
    """What ``LINK="rate=5gbit delay=20us"`` asks of every node's link.

    Units are tc's: ``gbit`` is 10**9 bit/s and ``mbps`` 10**6 *bytes*/s.
    """

    rate_bps: int | None = None  # bits per second
    delay_s: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> LinkShape | None:
        if text is None or not text.strip():
            return None
        rate = delay = None
        for item in text.split():
            key, sep, value = item.partition("=")
            if not sep or key not in ("rate", "delay"):
                raise NetworkError(f"LINK={text!r}: {item!r} is not a setting; valid: {LINK_HELP}")
            m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-z]+)", value.strip().lower())
            units = _RATE_UNITS if key == "rate" else _TIME_UNITS
            if not m or m.group(2) not in units or float(m.group(1)) <= 0:
                raise NetworkError(f"LINK={text!r}: {key}={value!r} is not valid; valid: {LINK_HELP}")
            number = float(m.group(1)) * units[m.group(2)]
            if key == "rate":
                rate = int(number)
            else:
                delay = number
        return cls(rate, delay)

    @property
    def rate_Bps(self) -> float | None:
        return None if self.rate_bps is None else self.rate_bps / 8

    def __str__(self) -> str:
        parts = []
        if self.rate_bps is not None:
            unit = next(u for u in ("tbit", "gbit", "mbit", "kbit", "bit") if self.rate_bps % _RATE_UNITS[u] == 0)
            parts.append(f"rate={self.rate_bps // _RATE_UNITS[unit]}{unit}")
        if self.delay_s is not None:
            parts.append(f"delay={self.delay_s * 1e6:g}us")
        return " ".join(parts)

    def tbf_args(self) -> list[str]:
        """tbf at the rate. The bucket holds 1 ms at the rate (at least 64 KiB, one GSO packet: a smaller bucket
        makes tbf cut every GSO packet in software) and the queue 20 ms, so that a TCP stream never loses a packet
        to the shaper (drops made 1-node-pair streams swing by 30%)."""
        rate_Bps = self.rate_bps / 8
        burst = max(65536, int(rate_Bps * 1e-3))
        limit = max(4 * burst, int(rate_Bps * 20e-3))
        return ["tbf", "rate", f"{self.rate_bps}bit", "burst", str(burst), "limit", str(limit)]


# --------------------------------------------------------------------------- commands


def _run(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", *(("-n", ns) if ns else ()), *args, check=check)


def _ip_batch(lines: list[str], ns: str | None = None) -> None:
    """Many `ip` commands in one process: a few ms instead of a few ms each."""
    r = subprocess.run(["ip", *(("-n", ns) if ns else ()), "-batch", "-"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    if r.returncode != 0:
        raise NetworkError(f"ip -batch ({'; '.join(lines)}) failed: {r.stderr.strip()}")


def missing_tools() -> list[str]:
    return [t for t in ("ip", "tc", "unshare", "nsenter", "mount") if shutil.which(t, path=_path()) is None]


def _path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])


def existing_namespaces() -> set[str]:
    try:
        return {p.name for p in NETNS_RUN.iterdir()}
    except FileNotFoundError:
        return set()


def _link_exists(name: str, ns: str | None = None) -> bool:
    return _ip("link", "show", "dev", name, ns=ns, check=False).returncode == 0


# --------------------------------------------------------------------------- build and remove


def hosts_text(nodes: list[str]) -> str:
    lines = ["127.0.0.1\tlocalhost", f"{HEAD_ADDR}\t{HEAD_NAME}"]
    lines += [f"{node_addr(n)}\t{n}" for n in nodes]
    return "# written by movebench_testcluster: the test cluster's hosts\n" + "\n".join(lines) + "\n"


def nsswitch_text() -> str:
    """The host's nsswitch.conf with host names from files only: a name not in hosts fails at once."""
    try:
        text = Path("/etc/nsswitch.conf").read_text()
    except OSError:
        text = "passwd: files\ngroup: files\nshadow: files\n"
    lines = [ln for ln in text.splitlines() if not re.match(r"\s*hosts\s*:", ln)]
    return "\n".join(["# written by movebench_testcluster", *lines, "hosts: files"]) + "\n"


RESOLV_TEXT = (
    "# written by movebench_testcluster: no resolver is reachable from a test node, by design.\n"
    "# nsswitch.conf says hosts: files; this is for programs that read resolv.conf themselves:\n"
    "# the node's own loopback refuses at once.\n"
    "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
)


def create(nodes: list[str]) -> dict:
    """Build the switch, the host's link and one namespace per node.  Returns what was made (for `remove`)."""
    if len(nodes) > MAX_NODES:
        raise NetworkError(f"nodes = {len(nodes)}: the test cluster's /24 holds at most {MAX_NODES} nodes")
    missing = missing_tools()
    if missing:
        raise NetworkError(f"missing tools for the namespace cluster: {', '.join(missing)} (Debian: iproute2, "
                           "util-linux, mount)")  # fmt: skip
    record = {"namespaces": [], "links": [], "etc": []}
    try:
        record["namespaces"].append(SWITCH_NS)
        _ip("netns", "add", SWITCH_NS)
        _ip_batch([f"link add {BRIDGE} type bridge", f"link set {BRIDGE} addrgenmode none",
                   f"link set {BRIDGE} up"], ns=SWITCH_NS)  # fmt: skip
        record["links"].append(HEAD_LINK)
        _ip("link", "add", HEAD_LINK, "type", "veth", "peer", "name", "head", "netns", SWITCH_NS)
        _ip_batch([f"link set {HEAD_LINK} addrgenmode none", f"addr add {HEAD_ADDR}/{BLOCK.prefixlen} dev {HEAD_LINK}",
                   f"link set {HEAD_LINK} up"])  # fmt: skip
        _ip_batch(["link set head addrgenmode none", f"link set head master {BRIDGE}", "link set head up"],
                  ns=SWITCH_NS)  # fmt: skip
        for node in nodes:
            ns = node_ns(node)
            record["namespaces"].append(ns)
            _ip("netns", "add", ns)
            etc = NETNS_ETC / ns
            record["etc"].append(str(etc))
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_text(nodes))
            (etc / "resolv.conf").write_text(RESOLV_TEXT)
            (etc / "nsswitch.conf").write_text(nsswitch_text())
            (etc / "machine-id").write_text(f"{uuid.uuid4().hex}\n")
            _ip("link", "add", NODE_IF, "netns", ns, "type", "veth", "peer", "name", node, "netns", SWITCH_NS)
            _ip_batch(["link set lo up", f"link set {NODE_IF} addrgenmode none",
                       f"addr add {node_addr(node)}/{BLOCK.prefixlen} dev {NODE_IF}", f"link set {NODE_IF} up"],
                      ns=ns)  # fmt: skip
            _ip_batch([f"link set {node} addrgenmode none", f"link set {node} master {BRIDGE}", f"link set {node} up"],
                      ns=SWITCH_NS)  # fmt: skip
    except BaseException:
        remove(record)
        raise
    return record


def namespace_pids(ns: str) -> list[int]:
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()] if r.returncode == 0 else []


def kill_namespace_processes(namespaces: list[str], grace: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL after `grace` s, every process inside the given namespaces (a job's orphans,
    a killed slurmd's steps). Only processes in our namespaces: the namespaces hold nothing else."""
    pids = [p for ns in namespaces if ns in existing_namespaces() for p in namespace_pids(ns)]
    pids = [p for p in pids if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < end and any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in pids):
            time.sleep(0.05)
    return pids


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def remove(record: dict) -> list[str]:
    """Remove what `create` made (by name), killing first any process left inside. Returns what was removed.

    Safe on a half-built or already removed network: every step checks that its thing still exists.
    """
    removed = []
    namespaces = list(record.get("namespaces", []))
    kill_namespace_processes([n for n in namespaces if n != SWITCH_NS])
    for link in record.get("links", []):
        if _link_exists(link):
            _ip("link", "del", link, check=False)
            removed.append(f"link {link}")
    present = existing_namespaces()
    for ns in namespaces:
        if ns in present:
            _ip("netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    for etc in record.get("etc", []):
        if Path(etc).is_dir() and Path(etc).parent == NETNS_ETC and Path(etc).name.startswith(NS_PREFIX):
            shutil.rmtree(etc, ignore_errors=True)
            removed.append(etc)
    try:
        NETNS_ETC.rmdir()  # only when empty: someone else's namespaces keep theirs
    except OSError:
        pass
    return removed


def leftover_record(nodes: list[str]) -> dict:
    """What a cluster of these nodes would have made, for a clean-up when its own record is lost."""
    return {"namespaces": [SWITCH_NS, *map(node_ns, nodes)], "links": [HEAD_LINK],
            "etc": [str(NETNS_ETC / node_ns(n)) for n in nodes]}  # fmt: skip


def set_link_state(node: str, up: bool) -> None:
    """Plug or pull a node's cable: both ends of its veth."""
    state = "up" if up else "down"
    _ip("link", "set", "dev", NODE_IF, state, ns=node_ns(node))
    _ip("link", "set", "dev", node, state, ns=SWITCH_NS)


# --------------------------------------------------------------------------- shaping


def apply_link(nodes: list[str], shape: LinkShape | None) -> None:
    """Shape (or with None: unshape) both directions of every node's link: tbf on the node's eth0 (what it
    sends) and on its switch port (what it receives); netem above the tbf for a delay, when the kernel has it."""
    check_link(shape)
    for node in nodes:
        for ns, dev in ((node_ns(node), NODE_IF), (SWITCH_NS, node)):
            _run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
            if shape is None:
                continue
            if shape.delay_s is not None:
                _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay",
                     f"{shape.delay_s * 1e6:.0f}us")  # fmt: skip
                if shape.rate_bps is not None:
                    _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                         *shape.tbf_args())  # fmt: skip
            elif shape.rate_bps is not None:
                _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", *shape.tbf_args())


def check_link(shape: LinkShape | None) -> None:
    """Refuse, before anything is built or stopped, a shape this kernel cannot make (netem for a delay)."""
    if shape is None or shape.delay_s is None:
        return
    probe = f"{NS_PREFIX}probe"
    _ip("netns", "add", probe)
    try:
        r = _run("tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us", check=False)
    finally:
        _ip("netns", "del", probe, check=False)
    if r.returncode != 0:
        raise NetworkError(f"LINK delay={shape.delay_s * 1e6:g}us: this kernel cannot delay packets (tc netem: "
                           f"{r.stderr.strip()}; CONFIG_NET_SCH_NETEM is needed); leave delay out, rate= works with "
                           "tbf alone")  # fmt: skip


def link_qdiscs(node: str) -> str:
    """`tc qdisc show` of a node's two link ends, for status and tests."""
    mine = _run("tc", "-n", node_ns(node), "qdisc", "show", "dev", NODE_IF, check=False).stdout.strip()
    port = _run("tc", "-n", SWITCH_NS, "qdisc", "show", "dev", node, check=False).stdout.strip()
    return f"{node} eth0: {mine}\nswitch port {node}: {port}"


# --------------------------------------------------------------------------- running on a node

# Runs as `sh -c SCRIPT sh <host name> <etc dir> <spare dir> <boot id file> <program> <args...>` inside the
# node's network namespace and fresh UTS, IPC and mount namespaces. What `ip netns exec` would do (its /etc files
# bind-mounted over /etc, a sysfs that shows the node's own network devices) but keeping the host's cgroup mounts,
# without which slurmd does not start ("No filesystem mounted on /sys/fs/cgroup": `ip netns exec` drops every
# mount under /sys); and a host name, a /dev/shm and a boot id of the node's own. The boot id is how Dragon
# (its host_id) and UCX (its system id) tell hosts apart: with the host's one, both take every node for the same
# host (Dragon's n1 then binds n2's address; UCX moves "inter-node" messages through shared memory).
_NODE_SCRIPT = """
set -e
hostname "$1"
for f in "$2"/*; do mount --bind "$f" "/etc/${f##*/}"; done
mount --bind "$4" /proc/sys/kernel/random/boot_id
mount -t tmpfs -o mode=1777,nosuid,nodev movebench-shm /dev/shm
if mountpoint -q /sys/fs/cgroup; then
    mount --rbind /sys/fs/cgroup "$3"
    mount -t sysfs movebench-sysfs /sys
    mount --rbind "$3" /sys/fs/cgroup
    umount -l "$3"
else
    mount -t sysfs movebench-sysfs /sys
fi
shift 4
exec "$@"
"""


def node_prefix(node: str, run_dir: Path) -> list[str]:
    """Command prefix that starts a program as node `node`: its network, its host name, its /etc files, its
    /dev/shm, a boot id of its own. `run_dir` (the cluster's) gets the boot id file and a spare mount point."""
    spare = run_dir / f"mnt.{node}"
    spare.mkdir(parents=True, exist_ok=True)
    boot_id = run_dir / f"boot_id.{node}"
    boot_id.write_text(f"{uuid.uuid4()}\n")
    return ["nsenter", f"--net={NETNS_RUN / node_ns(node)}", "--", "unshare", "--uts", "--ipc", "--mount",
            "--propagation", "slave", "--", "sh", "-c", _NODE_SCRIPT, "sh", node, str(NETNS_ETC / node_ns(node)),
            str(spare), str(boot_id)]  # fmt: skip


def enter_prefix(pid: int) -> list[str]:
    """Command prefix that runs a program beside process `pid` (a node's slurmd): same network, host name,
    mounts (/etc/hosts, /dev/shm) as the node's jobs."""
    return ["nsenter", "-t", str(pid), "-n", "-u", "-i", "-m", "--"]
