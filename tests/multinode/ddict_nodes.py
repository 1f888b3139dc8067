"""A DDict across the nodes of a Dragon run, for the namespace cluster's tests: run as

    dragon -t tcp -N 2 python tests/multinode/ddict_nodes.py [--managers-per-node 1] [--clients-per-node 1]

Managers on every node (DDict(managers_per_node, nodes, ...)), clients placed on every node by host name.
Each client puts its keys, waits for all the others, then gets every other client's keys and checks each value
byte for byte. Prints one JSON line: where the head, the managers and the clients ran (host name and address),
how many gets came back right, which transport agent ran on each client's node, and Dragon's view of the nodes.
"""

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys

VALUE_BYTES = 4096


def here() -> dict:
    host = socket.gethostname()
    return {"host": host, "addr": socket.gethostbyname(host), "pid": os.getpid()}


def transport_agents() -> list[str]:
    """Dragon's transport agents on this node: `dragon-tcp` without --infrastructure (that one is the overlay
    network), or `dragon-hsta`. Nodes share this host's /proc, so only processes in this node's network namespace."""
    mine = os.readlink("/proc/self/ns/net")
    found = []
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or os.readlink(f"/proc/{entry.name}/ns/net") != mine:
                continue
            cmd = open(f"/proc/{entry.name}/cmdline", "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "dragon-hsta" in " ".join(cmd) or ("dragon-tcp" in cmd and "--infrastructure" not in cmd):
            found.append("dragon-hsta" if "dragon-hsta" in " ".join(cmd) else "dragon-tcp")
    return sorted(found)


def value(client: int, key: int) -> bytes:
    return bytes([(client * 31 + key) % 256]) * VALUE_BYTES


def client_main(ddict, me, clients, keys, barrier, results):
    try:
        for k in range(keys):
            ddict[f"c{me}k{k}"] = value(me, k)
        barrier.wait(120)
        right = wrong = 0
        for other in range(clients):
            if other == me:
                continue
            for k in range(keys):
                if ddict[f"c{other}k{k}"] == value(other, k):
                    right += 1
                else:
                    wrong += 1
        results.put({"client": me, **here(), "gets_right": right, "gets_wrong": wrong, "agents": transport_agents()})
    except BaseException as exc:  # said, so that the head does not wait for a dead client
        results.put({"client": me, **here(), "error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        ddict.detach()


def main() -> int:
    import dragon  # noqa: F401  (registers the "dragon" start method)
    from dragon.data.ddict.ddict import DDict
    from dragon.infrastructure.policy import Policy
    from dragon.native.machine import Node, System

    p = argparse.ArgumentParser()
    p.add_argument("--managers-per-node", type=int, default=1)
    p.add_argument("--clients-per-node", type=int, default=1)
    p.add_argument("--keys", type=int, default=20)
    a = p.parse_args()
    mp.set_start_method("dragon")
    nodes = [Node(h) for h in System().nodes]
    hosts = [n.hostname for n in nodes]
    clients = len(hosts) * a.clients_per_node
    ddict = DDict(a.managers_per_node, len(hosts), len(hosts) * 64 * 2**20)
    procs = []
    try:
        managers = [{"manager": s.manager_id, "host": s.hostname} for s in ddict.stats]
        barrier, results = mp.Barrier(clients), mp.Queue()
        for c in range(clients):
            proc = mp.Process(target=client_main, args=(ddict, c, clients, a.keys, barrier, results))
            with Policy(placement=Policy.Placement.HOST_NAME, host_name=hosts[c % len(hosts)]):
                proc.start()
            procs.append(proc)
        reports = sorted((results.get(timeout=180) for _ in procs), key=lambda r: r["client"])
        for proc in procs:
            proc.join(60)
    finally:
        ddict.destroy()
    print(json.dumps({"head": here(), "nodes": [{"host": n.hostname, "addrs": list(n.ip)} for n in nodes],
                      "managers": managers, "clients": reports}), flush=True)
    return 0 if all("error" not in r and r["gets_wrong"] == 0 for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
