"""Admission: whether the points about to run fit the nodes and filesystems they run on.

Checked by the Snakefile's `onstart`, once Snakemake knows the executor and which points will
run (finished points are not checked again), and before the first job starts. Every family is
checked the same way, from what its spec declares:

- memory: `node_memory_bytes(point, section)` (the busiest node's plan) against
  `campaign.memory_fraction` of a node's memory: this machine's MemAvailable under the local
  executor, the partition's memory per node (`scontrol`) under Slurm, the allocation's
  (SLURM_MEM_PER_NODE, else its nodes' RealMemory) under `--profile allocation`;
- filesystems: `storage(point, section)` (e.g. io's target folder, kv's /dev/shm) against the
  free space there, plus the results folder;
- cores: more than `campaign.max_ranks_per_core` ranks per core of a node is refused (thousands of
  ranks on one node measure the scheduler, not the transfer);
- nodes: a point on more than one node under the local executor would record `nodes: 2` while every
  rank ran on this machine; under `--profile allocation`, a point on more nodes than the allocation has,
  and an MPI point with more ranks per node than the allocation's nodes have CPUs (an srun step does not
  oversubscribe them).

A refusal is one message naming each point, its estimate and what is available.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from movebench import families
from movebench.engine import launchers

#: Room one point's records, meta, log and failure record take in the results folder (measured:
#: 10-40 KiB per point here), planned with a margin; plus the tables and the report.
RESULTS_BYTES_PER_POINT = 256 * 1024
RESULTS_BASE_BYTES = 16 * 2**20
SHOWN = 20


@dataclass(frozen=True)
class Capacity:
    """One node of where the points run, as far as it can be known before they run."""

    where: str
    memory_bytes: int | None
    memory_source: str
    cores: int | None
    #: most nodes a point may span (1 under the local executor); None: no limit known here
    max_nodes: int | None
    #: whether node-local folders (/dev/shm) are this machine's
    local_storage: bool
    #: a Slurm allocation the campaign runs inside (--profile allocation): max_nodes is its size, not this host's
    allocation: bool = False


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is no such file)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+)\s+kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_capacity() -> Capacity:
    return Capacity(where=f"this machine ({socket.gethostname()})", memory_bytes=mem_available(),
                    memory_source="MemAvailable", cores=usable_cores(), max_nodes=1, local_storage=True)


def free_bytes(path) -> tuple[int, Path]:
    """Free bytes for this user in the filesystem of `path` (or of its nearest existing ancestor)."""
    probe = Path(path).expanduser().absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free, probe


def gib(n: float) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 1024:.0f} KiB"


def problems(config: dict, todo: dict[str, list[dict]], capacity: Capacity) -> list[str]:
    """One line per point (or folder) that does not fit `capacity`; empty when everything does."""
    campaign = config["campaign"]
    fraction = campaign["memory_fraction"]
    per_core = campaign["max_ranks_per_core"]
    lines: list[str] = []
    running: dict[str, list] = defaultdict(list)
    kept: dict[str, int] = defaultdict(int)
    for family, points in todo.items():
        fam, section = families.load(family), config[family]
        for point in points:
            where = f"{family} {families.point_path(point)}"
            ranks, nodes = fam.placement(point)
            if capacity.allocation and capacity.max_nodes is not None and nodes > capacity.max_nodes:
                lines.append(f"{where}: {nodes} nodes, but the allocation has {capacity.max_nodes}: its srun step "
                             f"would fail; run the campaign in a larger one (salloc -N {nodes}) or sweep nodes up to "
                             f"{capacity.max_nodes}")
                continue
            if capacity.max_nodes is not None and nodes > capacity.max_nodes:
                lines.append(f"{where}: {nodes} nodes, but {capacity.where} is {capacity.max_nodes} node: every "
                             f"rank would run here while its records say {nodes} nodes; run it under a cluster "
                             "profile (--profile slurm) or sweep nodes: [1]")
                continue
            per_node = -(-ranks // nodes)
            steps = launchers.of_family(family).step_tasks_per_node(ranks, nodes)
            if capacity.allocation and capacity.cores and steps > capacity.cores:
                # an srun step places one task per CPU of the allocation: --overcommit does not lift it for a
                # step, only for a job submitted with it
                lines.append(f"{where}: {per_node} ranks on one node, but the allocation's nodes have {capacity.cores} "
                             f"CPUs ({capacity.where}): its srun step would fail (\"More processors requested than "
                             f"permitted\"); sweep ranks up to {capacity.cores} x nodes, or spread them over more "
                             "nodes")
                continue
            # kv names its own limit (clients per CPU); every other family the campaign's ranks per core
            limit, key = ((section["max_clients_per_cpu"], f"{family}.max_clients_per_cpu")
                          if "max_clients_per_cpu" in section else (per_core, "campaign.max_ranks_per_core"))
            if capacity.cores and per_node > limit * capacity.cores:
                lines.append(f"{where}: {per_node} ranks on one node, {per_node / capacity.cores:.0f} per core of "
                             f"its {capacity.cores} cores ({capacity.where}), more than {key} "
                             f"= {limit}: that measures process scheduling, not the transfer")
                continue
            need = fam.node_memory_bytes(point, section)
            if capacity.memory_bytes is not None and need > fraction * capacity.memory_bytes:
                lines.append(f"{where}: plans {gib(need)} on its busiest node ({family}'s node_memory_bytes), more "
                             f"than campaign.memory_fraction {fraction:g} x {capacity.memory_source} "
                             f"{gib(capacity.memory_bytes)} = {gib(fraction * capacity.memory_bytes)} "
                             f"({capacity.where})")
            for room in fam.storage(point, section):
                if room.node_local and not capacity.local_storage:
                    # another node's /dev/shm: the launcher there checks it (movebench.engine.launchers.dragon)
                    continue
                if room.kept:
                    kept[room.path] += room.bytes
                running[room.path].append((room.bytes, where, room.what))
    for path in sorted(set(running) | set(kept)):
        free, probe = free_bytes(path)
        biggest = max(running[path], default=(0, "", ""))
        need = kept[path] + biggest[0]
        if need > free:
            detail = f"its largest point ({biggest[1]}) {biggest[2]} {gib(biggest[0])}"
            if kept[path]:
                detail += f", and the points leave {gib(kept[path])} there (cleanup: false)"
            lines.append(f"{path}: {detail}, but the filesystem of {probe} has {gib(free)} free")
    results = Path(campaign["results_dir"])
    count = sum(len(points) for points in todo.values())
    need = RESULTS_BASE_BYTES + count * RESULTS_BYTES_PER_POINT
    free, probe = free_bytes(results)
    if need > free:
        lines.append(f"campaign.results_dir {results}: {count} points and their tables need about {gib(need)}, "
                     f"but the filesystem of {probe} has {gib(free)} free")
    return lines


def message(lines: list[str], capacity: Capacity) -> str:
    shown = lines[:SHOWN]
    more = f"\n  ... and {len(lines) - SHOWN} more" if len(lines) > SHOWN else ""
    noun = "point or folder does" if len(lines) == 1 else "points or folders do"
    return (f"movebench: refused before any job: {len(lines)} {noun} not fit {capacity.where}:\n  "
            + "\n  ".join(shown) + more)
