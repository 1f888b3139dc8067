"""MPI facts for a point's meta: library, thread level, where each rank ran (host, node, address)."""

from __future__ import annotations

import fcntl
import os
import socket
import struct

_THREAD_LEVELS = {0: "single", 1: "funneled", 2: "serialized", 3: "multiple"}


def mpi_meta(comm) -> dict | None:
    """Gathered on every rank; rank 0 gets the dict, the others None."""
    from mpi4py import MPI

    host = socket.gethostname()
    where = (host, os.environ.get("SLURMD_NODENAME"), host_address(host), interface_addresses())
    placed = comm.gather(where, root=0)
    if comm.rank != 0:
        return None
    hosts = [h for h, _, _, _ in placed]
    nodes = [n or h for h, n, _, _ in placed]
    level = MPI.Query_thread()
    library = MPI.Get_library_version().replace("\x00", "").strip()  # Open MPI's ends in a NUL
    return {
        "ranks": comm.size,
        "hostnames": hosts,
        "rank_nodes": nodes,
        "nodes": sorted(set(nodes)),
        # the address each rank's host name resolves to, and each host's IPv4 interfaces: the devices UCX names
        # in meta["transport"] (e.g. tcp/eth0) map to addresses here
        "rank_addrs": [a for _, _, a, _ in placed],
        "host_interfaces": {h: ifs for h, _, _, ifs in sorted(placed, key=lambda p: p[0])},
        "mpi_library": library.splitlines()[0],
        # the whole of what the library says it is (MPICH: version, device and netmods, configure line)
        "mpi_library_version": library,
        "mpi_vendor": "{} {}".format(MPI.get_vendor()[0], ".".join(map(str, MPI.get_vendor()[1]))),
        "mpi_version": "{}.{}".format(*MPI.Get_version()),
        # Thread level matters: MPICH at "single" busy-polls and collapses when ranks outnumber cores
        # (docs/notes/kernels.md, section 4).
        "mpi_thread_level": _THREAD_LEVELS.get(level, str(level)),
    }


def host_address(host: str) -> str | None:
    """The IPv4 address `host` resolves to here (hosts file or DNS), or None."""
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError:
        return None


_SIOCGIFADDR = 0x8915


def interface_addresses() -> dict[str, str]:
    """IPv4 address of every interface of this host but loopback (Linux: SIOCGIFADDR; {} elsewhere)."""
    found = {}
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return found
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address
            addr = socket.inet_ntoa(packed[20:24])
            if not addr.startswith("127."):
                found[name] = addr
    return found
