"""kv: Dragon's distributed dictionary (DDict) under GUPS-style load.

After Dragon's `gups_ddict.py` (its DDict performance page, v0.12.1), itself after
HPCC RandomAccess: clients put or get their own unique set of key/value pairs in
a DDict sharded over `managers_per_node` managers on each of `nodes` nodes.

One point = one operation at one value size, clients per node, managers per node
and node count, run as one Dragon job (`python -m movebench.dragonrun -- dragon -s
python -m movebench.kv ...`, see dragonrun.py for why the wrapper):

- The head creates `DDict(managers_per_node, nodes, total_mem x nodes,
  streams_per_manager=...)` and starts `nodes x clients_per_node` clients with
  Dragon's multiprocessing start method. Dragon's start-up, the DDict's creation,
  the clients' start and the DDict's destruction are timed apart and kept out of
  every bandwidth.
- Keys are 128-byte `bytes`, unique per client; values are `bytes` of
  `value_size`, distinct per key (the key's index is stamped into the value's
  first 8 bytes), built before anything is timed. Keys per client =
  `keys_per_client` when set, else gups_ddict's
  min(max_keys, floor(mem_frac x total_mem x nodes / (clients x (128 + value_size)))).
- A repetition is one round: the clients and the head meet at a barrier, then
  every client times (perf_counter) `iterations` passes over its
  keys: put (`d[k] = v`), batch_put (`start_batch_put()`, the puts,
  `end_batch_put()`, all timed), get (`d[k]`), frozen_get (the same gets; the
  head calls `freeze()` before the round and `unfreeze()` after, untimed). get and
  frozen_get put every key once first, untimed. put and batch_put overwrite
  their keys from the second round on (the first round inserts them).
- Aggregate bandwidth, as gups_ddict defines it: sum over clients of
  ops_i / t_i x value_size, where t_i is client i's own round time. Key bytes are
  not counted. `elapsed_s` is the slowest client's time and `bytes` the values
  moved by all clients, so `bandwidth_slowest_Bps` = bytes / elapsed_s is the
  stricter figure next to it; `ops_per_s` = sum of ops_i / t_i.
- Differs from gups_ddict: its first timed round is meant to be skipped but is
  not. Here every round is recorded and the first `warmups` rounds (the
  campaign's warm-ups, default 2) are flagged and left out of the statistics, so
  the put family's cold first round (inserting, not overwriting) and the first
  touch of pool memory never count; with `warmups: 0` every round counts, as in
  gups_ddict.
- Verification: the gets keep the values they received (a reference, no copy)
  and compare them with what was put once the timer stopped; puts are read back
  once, untimed, after the last round. A mismatch makes the records not ok.
- dragonhpc 0.12.3 (pinned): the DDict API of the study's 0.12.1 with its fixes. From 0.13 on, the DDict's
  orchestrator runs its managers in a ProcessGroup whose exception-queue monitor thread polls a queue whose
  poll(timeout) returns at once: it spins one CPU for the whole run (measured here on an idle DDict: 0.13.2,
  0.14.2, 0.15.0 burn 25-80 % of a core, 0.11.1, 0.12.1, 0.12.3 under 1 %), which on 2 cores slows every
  operation several-fold. 0.14.2 also fails to import without numpy.
- Records: one per round with the aggregate; each client's per-round times go to
  the meta (`clients`), with the DDict's own `stats` per manager after the last
  round, and the start-up and teardown times (`dragon_launch`, added by dragonrun).
"""

from __future__ import annotations

import math
import os
import queue
import sys
import time

from movebench.core.sizes import expand_sizes, format_size, parse_size
from movebench.family import Family

OPERATIONS = ("put", "batch_put", "get", "frozen_get")
PUTS = ("put", "batch_put")
GETS = ("get", "frozen_get")
KEY_BYTES = 128
# Dragon's DDict refuses a manager pool below 3 MB (DDICT_MIN_SIZE) and needs room beyond the data for its
# own bookkeeping; Dragon's docs suggest ~30 % more than the data.
DDICT_MIN_MANAGER_BYTES = 3 * 1024**2
DDICT_HEADROOM = 1.3
# Dragon's own shared-memory segments per node, sized here instead of its defaults (4 GiB and 1 GiB).
INF_SEG_BYTES = 256 * 1024**2
MIN_DEFAULT_SEG_BYTES = 256 * 1024**2
# Resident memory of one Dragon Python process (client, manager, infrastructure), measured here: ~70-90 MiB.
PROCESS_RSS_BYTES = 120 * 1024**2
INFRA_PROCESSES = 5
POLL_S = 0.5
JOIN_S = 5.0
BARRIER_S = 60.0


def keys_per_client(section: dict, nodes: int, clients_per_node: int, value_size: int) -> int:
    """Explicit keys_per_client, else gups_ddict's share of the DDict's memory."""
    if section.get("keys_per_client"):
        return int(section["keys_per_client"])
    total_mem = parse_size(section["total_mem"]) * nodes
    clients = nodes * clients_per_node
    share = section["mem_frac"] * total_mem / (clients * (KEY_BYTES + value_size))
    return int(min(section["max_keys"], math.floor(share)))


def default_seg_bytes(value_size: int, clients_per_node: int) -> int:
    """Dragon's default pool carries the queues, the barrier and values in flight between clients and managers."""
    return max(MIN_DEFAULT_SEG_BYTES, 4 * clients_per_node * (value_size + KEY_BYTES))


def shm_bytes(total_mem_per_node: int, value_size: int, clients_per_node: int) -> int:
    """What one node's /dev/shm must hold: the DDict's pools and Dragon's two segments."""
    return total_mem_per_node + default_seg_bytes(value_size, clients_per_node) + INF_SEG_BYTES


def node_memory_bytes(point: dict, section: dict) -> int:
    """A node's plan: its DDict share, Dragon's segments, every process, two copies of each client's values."""
    total_mem = parse_size(section["total_mem"])
    keys = keys_per_client(section, point["nodes"], point["clients_per_node"], point["value_size"])
    clients, managers = point["clients_per_node"], point["managers_per_node"]
    data = 2 * clients * keys * (KEY_BYTES + point["value_size"])
    processes = (clients + managers + INFRA_PROCESSES) * PROCESS_RSS_BYTES
    return shm_bytes(total_mem, point["value_size"], clients) + data + processes


def _available_memory() -> int | None:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _shm_free() -> int | None:
    from movebench.dragonrun import SHM, shm_free_bytes

    try:
        return shm_free_bytes(SHM)
    except OSError:
        return None


class KV(Family):
    name = "kv"
    launcher = "dragon"
    point_keys = ("operation", "nodes", "clients_per_node", "managers_per_node", "value_size")
    summary_measures = ("ops_per_s", "bandwidth_slowest_Bps", "imbalance")

    def check(self, section, campaign):
        problems = []
        try:
            sizes = expand_sizes(section["value_sizes"])
        except (ValueError, KeyError) as exc:
            return [("value_sizes", section.get("value_sizes"), str(exc))]
        if any(s < 1 for s in sizes):
            problems.append(("value_sizes", section["value_sizes"], "every value size must be at least 1 byte"))
            return problems
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
        memory_cap = campaign.get("memory_fraction", 0.8) * (_available_memory() or float("inf"))
        shm_free = _shm_free()
        cpus = os.cpu_count() or 1
        for nodes in section["nodes"]:
            for cpn in section["clients_per_node"]:
                if cpn > section["max_clients_per_cpu"] * cpus and nodes == 1:
                    problems.append(("clients_per_node", cpn, f"this machine has {cpus} CPUs: at most "
                                     f"{section['max_clients_per_cpu'] * cpus} clients per node "
                                     f"(max_clients_per_cpu = {section['max_clients_per_cpu']})"))
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
                    if nodes != 1:
                        continue  # other machines: dragonrun checks their /dev/shm at launch
                    for managers in section["managers_per_node"]:
                        point = {"nodes": nodes, "clients_per_node": cpn, "managers_per_node": managers,
                                 "value_size": size}
                        plan = node_memory_bytes(point, section)
                        if plan > memory_cap:
                            problems.append(("clients_per_node", cpn, f"with {managers} managers and "
                                             f"{format_size(size)} values a node plans {plan / 2**30:.1f} GiB, over "
                                             f"campaign.memory_fraction of this machine's available memory "
                                             f"({memory_cap / 2**30:.1f} GiB): fewer clients, keys or total_mem"))
                        shm = shm_bytes(total_mem, size, cpn)
                        if shm_free is not None and shm > shm_free:
                            problems.append(("total_mem", section["total_mem"], f"/dev/shm has "
                                             f"{shm_free / 2**30:.2f} GiB free, this point's pools need "
                                             f"{shm / 2**30:.2f} GiB: lower total_mem or grow /dev/shm"))
        return _unique(problems)

    def points(self, section, campaign):
        points = []
        for operation in section["operations"]:
            for nodes in section["nodes"]:
                for cpn in section["clients_per_node"]:
                    for managers in section["managers_per_node"]:
                        for size in expand_sizes(section["value_sizes"]):
                            points.append({"operation": operation, "nodes": nodes, "clients_per_node": cpn,
                                           "managers_per_node": managers, "value_size": size})
        return points

    def ranks(self, point):
        return int(point["nodes"]) * int(point["clients_per_node"])

    def kernel_args(self, point, section, campaign):
        keys = keys_per_client(section, point["nodes"], point["clients_per_node"], point["value_size"])
        return ["--operation", point["operation"], "--nodes", str(point["nodes"]),
                "--clients-per-node", str(point["clients_per_node"]),
                "--managers-per-node", str(point["managers_per_node"]),
                "--streams-per-manager", str(section["streams_per_manager"]),
                "--value-size", str(point["value_size"]), "--keys-per-client", str(keys),
                "--total-mem", str(parse_size(section["total_mem"])), "--iterations", str(section["iterations"])]

    def launch_command(self, python_argv, nodes):
        args, _ = kernel_parser().parse_known_args(python_argv[3:])
        return dragon_command(python_argv, nodes, args)

    def memory_mb(self, point, section):
        return -(-node_memory_bytes(point, section) // 2**20)

    def report_context(self, table, summary, campaign):
        from movebench.report import figure_uri, html_table, median_of, plotting

        sns, plt = plotting()
        ctx = {"figures": [], "ratios": None, "startup": None}
        bw = median_of(summary, "bandwidth_Bps")
        if bw.empty:
            return ctx
        bw["GB/s"] = bw["median"] / 1e9
        grid = sns.relplot(data=bw, x="value_size", y="GB/s", hue="variant", style="clients_per_node",
                           col="nodes", kind="line", marker="o", height=3.4, aspect=1.3,
                           hue_order=[o for o in OPERATIONS if o in set(bw["variant"])],
                           facet_kws={"sharey": False})
        grid.set(xscale="log", yscale="log", xlabel="value size (bytes)",
                 ylabel="aggregate bandwidth (GB/s, median)")
        grid.set_titles("{col_name} node(s)")
        ctx["figures"].append(("Aggregate bandwidth vs value size, per operation (log-log; one panel per node "
                               "count)", figure_uri(grid.figure)))
        ratios = speedups(bw)
        if not ratios.empty:
            fig, ax = plt.subplots(figsize=(7, 3.6))
            long = ratios.melt(id_vars=["nodes", "clients_per_node", "managers_per_node", "value_size"],
                               value_vars=[c for c in RATIOS if c in ratios], var_name="ratio", value_name="x")
            sns.lineplot(data=long.dropna(), x="value_size", y="x", hue="ratio", style="nodes", marker="o", ax=ax)
            ax.set(xscale="log", yscale="log", xlabel="value size (bytes)",
                   ylabel="speed-up (ratio of median bandwidths)")
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ctx["figures"].append(("Batched vs unbatched puts and frozen vs unfrozen gets", figure_uri(fig)))
            ctx["ratios"] = html_table(ratios)
        measured = table[~table["warmup"] & table["ok"]] if len(table) else table
        cols = [c for c in ("dragon_startup_s", "ddict_create_s", "clients_start_s") if c in measured]
        if cols:
            start = measured.groupby(["variant", "nodes", "clients_per_node", "managers_per_node", "value_size"],
                                     as_index=False)[cols].median()
            ctx["startup"] = html_table(start)
        return ctx


RATIOS = {"batch_put / put": ("batch_put", "put"), "frozen_get / get": ("frozen_get", "get")}


def speedups(bw):
    """Median bandwidth ratios at equal nodes, clients, managers and value size, as the study reports them."""
    import pandas as pd

    keys = ["nodes", "clients_per_node", "managers_per_node", "value_size"]
    wide = bw.pivot_table(index=keys, columns="variant", values="median", aggfunc="first").reset_index()
    out = wide[keys].copy()
    for label, (num, den) in RATIOS.items():
        if num in wide and den in wide:
            out[label] = wide[num] / wide[den]
    if len(out.columns) == len(keys):
        return pd.DataFrame()
    return out


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


# --- the launch: dragon under movebench.dragonrun ---


def dragon_command(python_argv, nodes, args) -> list[str]:
    """`dragon -s` on one node (it refuses to start without -s when Slurm is installed but no job runs)."""
    from pathlib import Path

    beside = Path(sys.executable).with_name("dragon")
    dragon = str(beside) if beside.exists() else "dragon"
    mode = ["-s"] if nodes == 1 else ["-N", str(nodes)]
    wrapper = [sys.executable, "-m", "movebench.dragonrun",
               "--shm-bytes", str(shm_bytes(args.total_mem, args.value_size, args.clients_per_node))]
    if args.meta:
        wrapper += ["--meta", args.meta]
    for name, value in segment_env(args.value_size, args.clients_per_node).items():
        wrapper += ["--env", f"{name}={value}"]
    return [*wrapper, "--", dragon, *mode, *python_argv]


def segment_env(value_size: int, clients_per_node: int) -> dict:
    return {"DRAGON_DEFAULT_SEG_SZ": str(default_seg_bytes(value_size, clients_per_node)),
            "DRAGON_INF_SEG_SZ": str(INF_SEG_BYTES)}


# --- the clients ---


def make_keys(client: int, count: int) -> list[bytes]:
    return [(b"%08d:%016d:" % (client, i)).ljust(KEY_BYTES, b"k") for i in range(count)]


def make_values(client: int, count: int, value_size: int) -> list[bytes]:
    """Distinct per key: the client's random bytes with the key's index in the first 8 bytes."""
    import numpy as np

    base = np.random.default_rng(client).integers(0, 256, value_size, dtype=np.uint8).tobytes()
    stamp = min(8, value_size)
    return [i.to_bytes(8, "little")[:stamp] + base[stamp:] for i in range(count)]


def timed_round(ddict, operation, keys, values, iterations):
    """One client's timed passes over its keys; the gets keep what they received."""
    got = [None] * len(keys) if operation in GETS else None
    start = time.perf_counter()
    for _ in range(iterations):
        if operation == "put":
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
        elif operation == "batch_put":
            ddict.start_batch_put()
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
            ddict.end_batch_put()
        else:
            for i, key in enumerate(keys):
                got[i] = ddict[key]
    return time.perf_counter() - start, got


def mismatches(got, values) -> int:
    return sum(1 for g, v in zip(got, values, strict=True) if g != v)


def client_main(ddict, client, operation, value_size, count, iterations, rounds, barrier, results, fault_round):
    """A client: untimed set-up, then `rounds` timed rounds, each starting at a barrier with the head."""
    try:
        keys, values = make_keys(client, count), make_values(client, count, value_size)
        if operation in GETS:
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
        results.put(("ready", client, None))
        for rnd in range(rounds):
            barrier.wait()
            if rnd == fault_round and client == 0:
                raise RuntimeError(f"fault injected in client {client}, round {rnd}")
            elapsed, got = timed_round(ddict, operation, keys, values, iterations)
            bad = mismatches(got, values) if got is not None else 0
            results.put(("round", client, {"elapsed_s": elapsed, "ops": count * iterations, "mismatches": bad}))
            del got
        bad = 0
        if operation in PUTS:
            bad = sum(1 for key, value in zip(keys, values, strict=True) if ddict[key] != value)
        results.put(("done", client, {"mismatches": bad}))
    except BaseException as exc:
        results.put(("failed", client, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        ddict.detach()


# --- the head ---


class ClientFailed(RuntimeError):
    pass


class Inbox:
    """The clients' messages to the head, collected one phase at a time.

    A fast client may already report its next phase (its `done`, say) while a slow
    one has not finished this one: such messages wait here for their phase.
    """

    def __init__(self, results, procs):
        self.results, self.procs, self.early = results, procs, []

    def collect(self, kind):
        """One `kind` message from every client, failing as soon as a client fails or dies."""
        got = {}
        for what, client, payload in self.early:
            if what == kind and client not in got:
                got[client] = payload
        self.early = [m for m in self.early if not (m[0] == kind and got.get(m[1]) is m[2])]
        while len(got) < len(self.procs):
            try:
                what, client, payload = self.results.get(timeout=POLL_S)
            except queue.Empty:
                dead = [(i, p.exitcode) for i, p in enumerate(self.procs) if p.exitcode is not None and i not in got]
                if dead:
                    raise ClientFailed(f"client {dead[0][0]} exited with status {dead[0][1]} before its {kind!r} "
                                       "message") from None
                continue
            if what == "failed":
                raise ClientFailed(f"client {client} failed: {payload}")
            if what == kind and client not in got:
                got[client] = payload
            else:
                self.early.append((what, client, payload))
        return [got[i] for i in range(len(self.procs))]


def aggregate(rounds, value_size):
    """gups_ddict's aggregate: sum of each client's own rate."""
    times = [r["elapsed_s"] for r in rounds]
    ops = sum(r["ops"] for r in rounds)
    rates = [r["ops"] / r["elapsed_s"] for r in rounds]
    slowest = max(times)
    extras = {"bandwidth_Bps": sum(rates) * value_size, "bandwidth_slowest_Bps": ops * value_size / slowest,
              "ops": ops, "ops_per_s": sum(rates), "client_elapsed_min_s": min(times),
              "client_elapsed_max_s": slowest, "imbalance": slowest / (sum(times) / len(times))}
    return slowest, ops * value_size, extras


def _client_hosts(nodes: int) -> list[str | None]:
    if nodes == 1:
        return [None]
    from dragon.native.machine import Node, System

    return [Node(h).hostname for h in System().nodes][:nodes]


def run_head(args, head_start: float) -> tuple[list[dict], dict]:
    import multiprocessing as mp

    import dragon  # noqa: F401  (registers the "dragon" start method)
    from dragon.data.ddict.ddict import DDict
    from dragon.infrastructure.policy import Policy

    from movebench.core import records
    from movebench.core.timing import Repetitions

    mp.set_start_method("dragon")
    launched = float(os.environ.get("MOVEBENCH_DRAGON_T0", head_start))
    clients = args.nodes * args.clients_per_node
    scratch = os.environ.get("MOVEBENCH_SCRATCH", "")
    params = {"operation": args.operation, "nodes": args.nodes, "clients_per_node": args.clients_per_node,
              "managers_per_node": args.managers_per_node, "value_size": args.value_size}
    schedule = list(Repetitions(args.repetitions, args.warmups))
    t0 = time.time()
    ddict = DDict(args.managers_per_node, args.nodes, args.total_mem * args.nodes,
                  streams_per_manager=args.streams_per_manager, persist_path=scratch)
    ddict_create_s = time.time() - t0
    recs, client_rounds, procs, stats = [], [], [], []
    timings = {"head_start": head_start, "dragon_startup_s": head_start - launched, "ddict_create_s": ddict_create_s}
    try:
        results, barrier = mp.Queue(), mp.Barrier(clients + 1)
        hosts = _client_hosts(args.nodes)
        t0 = time.time()
        for client in range(clients):
            proc = mp.Process(target=client_main, args=(
                ddict, client, args.operation, args.value_size, args.keys_per_client, args.iterations,
                len(schedule), barrier, results, args.inject_fault))
            host = hosts[client % len(hosts)]
            if host is None:
                proc.start()
            else:
                with Policy(placement=Policy.Placement.HOST_NAME, host_name=host):
                    proc.start()
            procs.append(proc)
        inbox = Inbox(results, procs)
        inbox.collect("ready")
        timings["clients_start_s"] = time.time() - t0
        fixed = {"clients": clients, "keys_per_client": args.keys_per_client, "iterations": args.iterations,
                 **{k: timings[k] for k in ("dragon_startup_s", "ddict_create_s", "clients_start_s")}}
        for rnd, (rep, warmup) in enumerate(schedule):
            if args.operation == "frozen_get":
                ddict.freeze()
            # Every client has reported (ready, or its last round): a client that cannot reach the barrier within
            # BARRIER_S has died, and the broken barrier fails the point instead of hanging it.
            barrier.wait(BARRIER_S)
            rounds = inbox.collect("round")
            if args.operation == "frozen_get":
                ddict.unfreeze()
            elapsed, nbytes, extras = aggregate(rounds, args.value_size)
            bad = sum(r["mismatches"] for r in rounds)
            error = f"{bad} gets returned a value other than the one put" if bad else None
            recs.append(records.record("kv", args.operation, params, rep, warmup, elapsed_s=elapsed, nbytes=nbytes,
                                       ok=not bad, error=error, verified=not bad, **fixed, **extras))
            client_rounds += [{"round": rnd, "rep": rep, "warmup": warmup, "client": i, **r}
                              for i, r in enumerate(rounds)]
        bad = sum(d["mismatches"] for d in inbox.collect("done"))
        if bad:
            for rec in recs:
                rec.update(ok=False, verified=False, error=f"{bad} keys read back after the puts differ from "
                           "the values put")
        stats = [_stats_row(s) for s in ddict.stats]
        for proc in procs:
            proc.join()
    except BaseException as exc:
        # Said before the clean-up below, which can hang on a broken runtime until dragonrun kills it.
        print(f"movebench.kv head: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
    finally:
        for proc in procs:
            proc.join(JOIN_S)
        for proc in procs:
            if proc.exitcode is None:
                proc.terminate()
                proc.join(JOIN_S)
        t0 = time.time()
        ddict.destroy()
        timings["ddict_destroy_s"] = time.time() - t0
    meta = {**timings, "clients": client_rounds, "ddict_stats": stats, "keys_per_client": args.keys_per_client,
            "key_bytes": KEY_BYTES, "total_mem_per_node": args.total_mem,
            "streams_per_manager": args.streams_per_manager, "iterations": args.iterations,
            "segments": {k: os.environ.get(k) for k in ("DRAGON_DEFAULT_SEG_SZ", "DRAGON_INF_SEG_SZ")}}
    return recs, meta


def _stats_row(s) -> dict:
    keep = ("manager_id", "hostname", "total_bytes", "total_used_bytes", "pool_utilization", "num_keys",
            "max_pool_allocations", "max_pool_allocations_used")
    return {k: getattr(s, k, None) for k in keep}


def kernel_parser():
    from movebench.kernel import argument_parser

    parser = argument_parser("kv", __doc__.split("\n\n")[0])
    parser.add_argument("--operation", choices=OPERATIONS, required=True)
    parser.add_argument("--nodes", type=int, default=1, help="nodes with managers and clients")
    parser.add_argument("--clients-per-node", type=int, default=2)
    parser.add_argument("--managers-per-node", type=int, default=1)
    parser.add_argument("--streams-per-manager", type=int, default=5, help="DDict's streams_per_manager")
    parser.add_argument("--value-size", type=int, required=True, help="bytes per value")
    parser.add_argument("--keys-per-client", type=int, required=True)
    parser.add_argument("--total-mem", type=int, required=True, help="DDict bytes per node")
    parser.add_argument("--iterations", type=int, default=1, help="passes over the keys per timed round")
    parser.add_argument("--inject-fault", type=int, default=-1, metavar="ROUND",
                        help="tests only: client 0 raises at this round")
    return parser


def main(argv=None):
    head_start = time.time()
    from movebench.core import envinfo, records

    args = kernel_parser().parse_args(argv)
    recs, meta = run_head(args, head_start)
    records.write_jsonl(args.out, recs)
    if args.meta:
        meta = envinfo.capture(family="kv", variant=args.operation, launcher="dragon", **meta)
        meta["head_end"] = time.time()
        records.write_json(args.meta, meta)


if __name__ == "__main__":
    main()
