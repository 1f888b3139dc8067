"""kv: Dragon's distributed dictionary under GUPS-style load (definitions: kernel.py's docstring)."""

from __future__ import annotations

import math

from movebench.core.sizes import expand_sizes, format_size, parse_size
from movebench.spec import BANDWIDTH, ELAPSED, HIGHER, LOWER, Axis, Family, Measure, Setting, Storage

# Dragon's DDict refuses a manager pool below 3 MB (DDICT_MIN_SIZE) and needs room beyond the data for its
# own bookkeeping; Dragon's docs suggest ~30 % more than the data.
DDICT_MIN_MANAGER_BYTES = 3 * 1024**2
DDICT_HEADROOM = 1.3
# Resident memory of one Dragon Python process (client, manager, infrastructure), planned with a margin over
# what was measured (docs/notes/hardening.md, "Admission").
PROCESS_RSS_BYTES = 120 * 1024**2
INFRA_PROCESSES = 5
KEY_BYTES = 128  # the kernel's; kept here too so that planning never imports the kernel


def keys_per_client(section: dict, nodes: int, clients_per_node: int, value_size: int) -> int:
    """Explicit keys_per_client, else gups_ddict's share of the DDict's memory."""
    if section.get("keys_per_client"):
        return int(section["keys_per_client"])
    total_mem = parse_size(section["total_mem"]) * nodes
    clients = nodes * clients_per_node
    share = section["mem_frac"] * total_mem / (clients * (KEY_BYTES + value_size))
    return int(min(section["max_keys"], math.floor(share)))


def benchit_passes(value_size: int) -> int:
    """The passes gups_ddict's --benchit times at `value_size` (examples/benchmarks/gups_ddict.py, DDictGUPS.driver
    with iterations 1 and max_iterations 4): 1 at 1 KiB, and at every doubling int(0.7 x passes), at least 1, plus
    int(0.7 x k) at the k-th size above 1 MiB, at most 4. Its timer also covers one pass more than it counts
    (kernel.py's docstring); this is the count, as movebench times exactly that many."""
    passes, above, size = 1, 1, 1024
    while size < value_size:
        size *= 2
        passes = max(1, int(passes * 0.7))
        if size > 1024**2:
            passes += int(above * 0.7)
            above += 1
        passes = min(passes, 4)
    return passes


def shm_bytes(total_mem_per_node: int, value_size: int, clients_per_node: int) -> int:
    """What one node's /dev/shm must hold: the kernel's sizing of the DDict's pools and Dragon's segments."""
    from movebench.families.kv.kernel import shm_bytes as kernel_shm_bytes

    return kernel_shm_bytes(total_mem_per_node, value_size, clients_per_node)


def node_memory_bytes(point: dict, section: dict) -> int:
    """A node's plan: its DDict share, Dragon's segments, every process, two copies of each client's values."""
    total_mem = parse_size(section["total_mem"])
    keys = keys_per_client(section, point["nodes"], point["clients_per_node"], point["value_size"])
    clients, managers = point["clients_per_node"], point["managers_per_node"]
    data = 2 * clients * keys * (KEY_BYTES + point["value_size"])
    processes = (clients + managers + INFRA_PROCESSES) * PROCESS_RSS_BYTES
    return shm_bytes(total_mem, point["value_size"], clients) + data + processes


class KV(Family):
    name = "kv"
    runtime = "dragon"
    variant = "operation"
    # what one launch fixes (the runtime's start, the DDict and its clients)
    launch_group_axes = ("nodes", "clients_per_node", "managers_per_node", "data_format")
    # Dragon's start costs seconds a point: kv's points share launches unless the section says not
    launch_groups = True
    axes = (
        Axis("operation", "operations"),
        Axis("nodes", "nodes"),
        Axis("clients_per_node", "clients_per_node"),
        Axis("managers_per_node", "managers_per_node"),
        Axis("value_size", "value_sizes", expand_sizes),
        Axis("data_format", "data_formats", implicit="bytes"),
    )
    settings = (Setting("streams_per_manager"), Setting("total_mem", parse_size), Setting("iterations"),
                Setting("ddict_per_group"),
                Setting("transport", when=lambda point: point["nodes"] > 1))
    measures = (
        BANDWIDTH,
        ELAPSED,
        Measure("ops_per_s", "1/s", HIGHER, "operations per second, summed over clients"),
        Measure("bandwidth_slowest_Bps", "B/s", HIGHER, "bytes / the slowest client's time"),
        Measure("imbalance", "1", LOWER, "slowest / mean client time"),
    )
    kernel_sources = ("kernel.py",)
    # per client and the DDict's own statistics: the .meta.json keeps them
    bulky_meta = ("clients", "ddict_stats")

    def check(self, section, campaign):
        problems = []
        try:
            sizes = expand_sizes(section["value_sizes"])
        except (ValueError, KeyError) as exc:
            return [("value_sizes", section.get("value_sizes"), str(exc))]
        if any(s < 1 for s in sizes):
            problems.append(("value_sizes", section["value_sizes"], "every value size must be at least 1 byte"))
            return problems
        odd = [s for s in sizes if s % 8]
        if "numpy" in section["data_formats"] and odd:
            problems.append(("value_sizes", section["value_sizes"], f"data format numpy stores a value as float64s: "
                             f"every value size must be a multiple of 8 bytes, not {format_size(odd[0])} "
                             "(or drop numpy from data_formats)"))
        try:
            total_mem = parse_size(section["total_mem"])
        except ValueError as exc:
            return problems + [("total_mem", section["total_mem"], str(exc))]
        for managers in section["managers_per_node"]:
            per_manager = total_mem / managers
            if per_manager < DDICT_MIN_MANAGER_BYTES:
                problems.append(("total_mem", section["total_mem"], f"{managers} managers per node get "
                                 f"{format_size(int(per_manager))} each; a DDict manager needs at least 3MiB: "
                                 f"use total_mem >= {format_size(managers * DDICT_MIN_MANAGER_BYTES)}"))
            largest = max(sizes)
            if (KEY_BYTES + largest) * DDICT_HEADROOM > per_manager:
                need = _round_up_mib(managers * (KEY_BYTES + largest) * DDICT_HEADROOM)
                problems.append(("total_mem", section["total_mem"], f"a {format_size(largest)} value does not fit "
                                 f"a manager's {format_size(int(per_manager))} pool ({managers} managers per node): "
                                 f"use total_mem >= {format_size(need)}"))
        explicit = section.get("keys_per_client")
        # clients per CPU: admission's, against the cores of where the points run (this machine, the partition
        # or the allocation), not the cores of the machine that validates a cluster's campaign
        for nodes in section["nodes"]:
            for cpn in section["clients_per_node"]:
                for size in sizes:
                    keys = keys_per_client(section, nodes, cpn, size)
                    data = nodes * cpn * keys * (KEY_BYTES + size)
                    if keys < 1:
                        problems.append(("total_mem", section["total_mem"], f"mem_frac x total_mem leaves no key for "
                                         f"each of {nodes * cpn} clients at value size {format_size(size)}: raise "
                                         "total_mem or mem_frac, or lower clients_per_node"))
                    elif explicit and data * DDICT_HEADROOM > total_mem * nodes:
                        need = _round_up_mib(data * DDICT_HEADROOM / nodes)
                        problems.append(("total_mem", section["total_mem"], f"{nodes * cpn} clients x {keys} keys x "
                                         f"(128 B key + {format_size(size)} value) need {format_size(need)} per node "
                                         f"with DDict's 30% headroom: use total_mem >= {format_size(need)} or fewer "
                                         "keys_per_client"))
        return _unique(problems)

    def kernel_settings(self, point, section, campaign):
        settings = super().kernel_settings(point, section, campaign)
        settings["keys_per_client"] = keys_per_client(section, point["nodes"], point["clients_per_node"],
                                                      point["value_size"])
        if settings["iterations"] == "benchit":
            settings["iterations"] = benchit_passes(point["value_size"])
        return settings

    def placement(self, point):
        return int(point["nodes"]) * int(point["clients_per_node"]), int(point["nodes"])

    def node_memory_bytes(self, point, section):
        return node_memory_bytes(point, section)

    def storage(self, point, section):
        """The DDict's pools and Dragon's segments live in each node's /dev/shm (checked again at launch)."""
        need = shm_bytes(parse_size(section["total_mem"]), point["value_size"], point["clients_per_node"])
        return [Storage("/dev/shm", need, "needs for its DDict pools and Dragon's segments", node_local=True)]

    def runtime_options(self, task):
        """Room in each node's /dev/shm (checked again before Dragon starts: Dragon hangs without it), the sizes
        of Dragon's segments for the point's values, and the transport between nodes."""
        from movebench.families.kv.kernel import segment_env

        point, settings = task.point, task.settings
        return {"shm_bytes": shm_bytes(settings["total_mem"], point["value_size"], point["clients_per_node"]),
                "env": segment_env(point["value_size"], point["clients_per_node"]),
                "transport": settings.get("transport"), "shm_sized_by": "kv.total_mem"}

    def group_runtime_options(self, tasks):
        """One Dragon run for the group's points: /dev/shm room and segments for the largest need among them
        (they differ by value size only; nodes, clients, managers, the DDict's memory and the transport are the
        group's own)."""
        every = [self.runtime_options(task) for task in tasks]
        env = {name: str(max(int(o["env"][name]) for o in every)) for name in every[0]["env"]}
        return {**every[0], "shm_bytes": max(o["shm_bytes"] for o in every), "env": env}


def _round_up_mib(nbytes) -> int:
    return int(-(-nbytes // 2**20)) * 2**20


def _unique(problems):
    seen, out = set(), []
    for p in problems:
        key = (p[0], repr(p[1]), p[2])
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


FAMILY = KV()
