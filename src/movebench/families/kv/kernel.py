"""kv: Dragon's distributed dictionary (DDict) under GUPS-style load.

After Dragon's `gups_ddict.py` (its DDict performance page, v0.12.1), itself after
HPCC RandomAccess: clients put or get their own unique set of key/value pairs in
a DDict sharded over `managers_per_node` managers on each of `nodes` nodes.

One point = one operation at one value size, clients per node, managers per node
and node count, run as one Dragon job (`python -m movebench.engine.launchers.dragon -- dragon -s
python -m movebench.families.kv.kernel TASK.json`, see launchers/dragon.py for why the wrapper;
on more than one node `dragon -t <transport> -N <nodes>` in the point's allocation, and
the Dragon launcher sweeps every node of it afterwards). A launch group's points (same nodes,
clients, managers, data format) run one after another in one Dragon runtime: its start-up is
paid, and recorded as `dragon_startup_s`, by the first point only (0.0 for the others); a point
that fails leaves no files, and the next one runs:

- The head creates `DDict(managers_per_node, nodes, total_mem x nodes,
  streams_per_manager=...)` and starts `nodes x clients_per_node` clients with
  Dragon's multiprocessing start method. In a launch group, as in gups_ddict.py's
  sweep, the clients are started once and handed one point after another, and the
  DDict is made once and emptied with `clear()` before each later point
  (`ddict_per_group`, default true; false: one DDict per point). Dragon's start-up,
  the DDict's creation or clearing, the clients' start (or hand-over) and the DDict's
  destruction are timed apart and kept out of every bandwidth; the launch's last DDict is
  left to the runtime's teardown (`ddict_destroy_s` null), which ends it in no extra time.
- Data (`data_format`, an axis): `bytes` (default): keys are 128-byte `bytes`,
  unique per client; values are `bytes` of `value_size`, distinct per key (the
  key's index is stamped into the value's first 8 bytes). `numpy`: gups_ddict's
  data, keys of 16 random float64 (128 bytes of data) and one random float64
  array of value_size / 8 shared by all of a client's keys. Built before anything
  is timed. Keys per client =
  `keys_per_client` when set, else gups_ddict's
  min(max_keys, floor(mem_frac x total_mem x nodes / (clients x (128 + value_size)))).
- A repetition is one round: the clients and the head meet at a barrier, then
  every client times (perf_counter) `iterations` passes over its keys, back to
  back (default 4, see below): put (`d[k] = v`), batch_put (`start_batch_put()`,
  the puts, `end_batch_put()`, all timed, once per pass), get (`d[k]`, the value
  dropped at once, as gups_ddict does), frozen_get (the same gets; the head calls
  `freeze()` before the round and `unfreeze()` after, untimed). get and frozen_get
  put every key once first, untimed. put and batch_put overwrite their keys from
  the second pass of the first round on (the first pass inserts them). Nothing
  but the DDict's operations runs inside the timed loop. Every record says how
  many passes its round timed (`iterations`; `ops` = clients x keys x passes).
- Why several passes per round: gups_ddict times its passes back to back, so a
  comparison needs the same count on both sides; and a lone pass after the idle
  start of a round is not the sustained rate: a batch timed alone runs several
  times faster than batches back to back, the work a batch leaves behind being
  paid by the next one (docs/notes/kernels.md, section 7). Several passes dilute
  whatever a round's start costs or saves to ~1/passes. 4 is a judgement, not a
  measured optimum: gups_ddict's defaults time
  3 passes (its --iterations 2 and the pass its timer adds), and with 4 a round's
  start weighs at most a quarter of the round while a default campaign's kv points
  stay short (docs/notes/kernels.md, section 7, has the figures and their noise).
- Aggregate bandwidth, as gups_ddict defines it: sum over clients of
  ops_i / t_i x value_size, where t_i is client i's own round time. Key bytes are
  not counted. `elapsed_s` is the slowest client's time and `bytes` the values
  moved by all clients, so `bandwidth_slowest_Bps` = bytes / elapsed_s is the
  stricter figure next to it; `ops_per_s` = sum of ops_i / t_i.
- Differs from gups_ddict (what remains after the timed loops were made alike):
  (1) its timer starts one pass early: it times passes + 1 passes and divides by
  passes (bench/kv_gups.py corrects for it); here the timer covers exactly the
  passes it divides by. (2) Its first timed round is meant to be skipped but is
  not; here every round is recorded and the first `warmups` rounds (the campaign's
  warm-ups, default 2) are flagged and left out of the statistics, so the cold
  first pass (inserting, not overwriting) and the first touch of pool memory never
  count; with `warmups: 0` every round counts, as in gups_ddict. (3) With
  `data_format: bytes` (the default), the data: its keys are numpy arrays of 16
  float64 and its values one numpy array per client, the same for every key; here
  keys are 128-byte `bytes` and values `bytes`, distinct per key, so that a value
  read back proves it is that key's (`numpy` uses its data). Pickled, a numpy array
  carries ~130-150 bytes of header and unpickles into a new array: gups_ddict moves a
  little more per operation and builds an array on each get. What the data change is
  not a constant (it moved between days on the same code: docs/notes/kernels.md, section 7),
  so a figure to set beside gups_ddict's or the DDict page's runs with
  `data_format: numpy`, which takes the data out of the comparison (section 7,
  "Same data"). (4) Its clients call
  `len(d)` once before their first test to open their manager connections; here
  the untimed puts (gets) or the warm-up rounds (puts) do that. (5) It runs one
  round per Dragon job and value size; here `repetitions` rounds run in one job.
- Verification, never timed: after the last round (of gets: while a frozen DDict
  is still frozen; after every round under an adaptive rule, which does not know
  its last), every client reads each key back and compares it with its value.
  Gets leave the DDict as it was, so one read-back checks what all rounds read.
  A mismatch makes all the point's records not ok. With `numpy` data every key holds
  the same array, so a read-back proves the data intact, not that it is the key's.
- Repetitions: a count is a schedule the clients know from the start. Under an adaptive rule
  (core.adaptive) the head decides after each round, on the rounds' slowest-client times, and
  tells every client before the next barrier (one message each on an orders queue, untimed):
  go for another round, or stop.
- dragonhpc 0.12.3 (pinned): the DDict API of the study's 0.12.1 with its fixes. From 0.13 on, the DDict's
  orchestrator runs its managers in a ProcessGroup whose exception-queue monitor thread polls a queue whose
  poll(timeout) returns at once: it spins one CPU for the whole run, which on a small node slows every
  operation (docs/notes/kernels.md, section 7, "Why dragonhpc 0.12.3"). 0.14.2 also fails to import without numpy.
- Records: one per round with the aggregate; each client's per-round times go to
  the meta (`clients`), with the DDict's own `stats` per manager after the last
  round (each names its manager's host), where each client ran and which Dragon
  transport agent ran beside it (`client_placement`), and the start-up and
  teardown times (`dragon_launch`, added by the Dragon launcher, with its sweep of every node).
"""
from __future__ import annotations

import os
import queue
import socket
import sys
import time

OPERATIONS = ("put", "batch_put", "get", "frozen_get")
PUTS = ("put", "batch_put")
GETS = ("get", "frozen_get")
KEY_BYTES = 128
# Dragon's own shared-memory segments per node, sized here instead of its defaults (4 GiB and 1 GiB).
INF_SEG_BYTES = 256 * 1024**2
MIN_DEFAULT_SEG_BYTES = 256 * 1024**2
POLL_S = 0.5
JOIN_S = 5.0
BARRIER_S = 60.0


def default_seg_bytes(value_size: int, clients_per_node: int) -> int:
    """Dragon's default pool carries the queues, the barrier and values in flight between clients and managers."""
    return max(MIN_DEFAULT_SEG_BYTES, 4 * clients_per_node * (value_size + KEY_BYTES))


def shm_bytes(total_mem_per_node: int, value_size: int, clients_per_node: int) -> int:
    """What one node's /dev/shm must hold: the DDict's pools and Dragon's two segments."""
    return total_mem_per_node + default_seg_bytes(value_size, clients_per_node) + INF_SEG_BYTES


# --- the launch: dragon under movebench.engine.launchers.dragon ---


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


def gups_data(client: int, count: int, value_size: int):
    """gups_ddict's keys and values: keys of 16 random float64, one random float64 array as every key's value."""
    import numpy as np

    rng = np.random.default_rng(seed=1000 + client)
    value = rng.random(value_size // 8)
    return [rng.random(KEY_BYTES // 8) for _ in range(count)], [value] * count


def make_data(data_format: str, client: int, count: int, value_size: int) -> tuple[list, list]:
    if data_format == "numpy":
        return gups_data(client, count, value_size)
    return make_keys(client, count), make_values(client, count, value_size)


def same(got, value) -> bool:
    if isinstance(value, bytes):
        return got == value
    import numpy as np

    return isinstance(got, np.ndarray) and got.dtype == value.dtype and np.array_equal(got, value)


def timed_passes(ddict, operation, keys, values, passes) -> float:
    """One client's timed passes over its keys: seconds. Only the DDict's operations are in the loop, as in
    gups_ddict: the gets drop what they receive (verify() reads it back after the timer)."""
    pairs = list(zip(keys, values, strict=True))
    if operation == "put":
        start = time.perf_counter()
        for _ in range(passes):
            for key, value in pairs:
                ddict[key] = value
        return time.perf_counter() - start
    if operation == "batch_put":
        start = time.perf_counter()
        for _ in range(passes):
            ddict.start_batch_put()
            for key, value in pairs:
                ddict[key] = value
            ddict.end_batch_put()
        return time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(passes):
        for key in keys:
            ddict[key]
    return time.perf_counter() - start


def verify(ddict, keys, values) -> int:
    """Untimed: every key read back and compared with its value; the number that differ."""
    return sum(1 for key, value in zip(keys, values, strict=True) if not same(ddict[key], value))


def damage(ddict, key, value) -> None:
    """Test hook: store `value` with its last byte flipped under `key`, so that the read-back must catch it (not
    in a frozen DDict, which refuses puts)."""
    import numpy as np

    if isinstance(value, bytes):
        ddict[key] = value[:-1] + bytes([value[-1] ^ 0xFF])
    else:
        damaged = np.array(value, copy=True)
        damaged.reshape(-1).view(np.uint8)[-1] ^= 0xFF
        ddict[key] = damaged


def client_main(ddict, client, operation, value_size, count, passes, rounds, barrier, results, fault_round,
                orders=None, data_format="bytes", corrupt=False):
    """A client: untimed set-up, then `rounds` timed rounds, each starting at a barrier with the head.

    With `orders` (an adaptive rule; rounds is None) the head says before each round whether there is one.
    `corrupt` (a test's fault): client 0 stores a damaged value under its first key before its last read-back.
    """
    import itertools

    try:
        keys, values = make_data(data_format, client, count, value_size)
        if operation in GETS:
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
        results.put(("ready", client, placement()))
        for rnd in (range(rounds) if orders is None else itertools.count()):
            if orders is not None and orders.get() != "go":
                break
            barrier.wait()
            if rnd == fault_round and client == 0:
                raise RuntimeError(f"fault injected in client {client}, round {rnd}")
            elapsed = timed_passes(ddict, operation, keys, values, passes)
            # Gets: the DDict read back after the last round, while a frozen one is still frozen (after every round
            # under an adaptive rule, which does not know its last one ahead). Gets leave what the DDict holds as
            # it was, so one read-back checks what every round read. Puts: once, after the last round, so that a
            # round's puts are not followed by gets the next round does not time.
            check = operation in GETS and (orders is not None or rnd == rounds - 1)
            if check and corrupt and client == 0:
                damage(ddict, keys[0], values[0])
            bad = verify(ddict, keys, values) if check else 0
            results.put(("round", client, {"elapsed_s": elapsed, "ops": count * passes, "mismatches": bad,
                                           "verified": check}))
        if operation in PUTS and corrupt and client == 0:
            damage(ddict, keys[0], values[0])
        bad = verify(ddict, keys, values) if operation in PUTS else 0
        results.put(("done", client, {"mismatches": bad}))
    except BaseException as exc:
        results.put(("failed", client, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        ddict.detach()


def client_loop(client, work, barrier, results, orders):
    """A client of the launch: one point after another from its work queue (None: the launch is over), as
    gups_ddict's clients take one test after another from theirs. A point that fails ends the process."""
    while (item := work.get()) is not None:
        client_main(item["ddict"], client, item["operation"], item["value_size"], item["count"], item["passes"],
                    item["rounds"], barrier, results, item["fault_round"], orders if item["rounds"] is None else None,
                    item["data_format"], item["corrupt"])


class ClientPool:
    """The launch's client processes. gups_ddict starts its clients once, in a Pool whose workers take each value
    size's test from a queue; here too: started for a group's first point (nodes and clients per node are launch
    group axes, so every point of the group has the same clients), each later point handed to the same processes.
    A point that fails ends them all, and the next point starts fresh ones."""

    def __init__(self):
        self.procs, self.work, self.results, self.barrier, self.orders = [], [], None, None, None

    def ensure(self, clients: int, nodes: int) -> None:
        import multiprocessing as mp

        from dragon.infrastructure.policy import Policy

        if self.procs:
            return
        self.results, self.barrier, self.orders = mp.Queue(), mp.Barrier(clients + 1), mp.Queue()
        self.work = [mp.Queue() for _ in range(clients)]
        hosts = _client_hosts(nodes)
        for client in range(clients):
            proc = mp.Process(target=client_loop, args=(client, self.work[client], self.barrier, self.results,
                                                        self.orders))
            host = hosts[client % len(hosts)]
            if host is None:
                proc.start()
            else:
                with Policy(placement=Policy.Placement.HOST_NAME, host_name=host):
                    proc.start()
            self.procs.append(proc)

    def submit(self, item: dict) -> None:
        for work in self.work:
            work.put(item)

    def close(self, broken: bool) -> None:
        """End the clients: told to stop when they are idle, terminated when a point failed (some may be at the
        barrier or dead)."""
        if not broken:
            for work in self.work:
                work.put(None)
        # Joined before anything asks for an exit code: asked at once after a client died, Dragon's global
        # services can hang the query while its local services still clean up the dead client's channels.
        for proc in self.procs:
            proc.join(JOIN_S)
        for proc in self.procs:
            if proc.exitcode is None:
                proc.terminate()
                proc.join(JOIN_S)
        self.procs, self.work = [], []


def placement() -> dict:
    """Where this client runs, and which Dragon transport agent runs beside it: the proof that data crossed nodes."""
    import socket

    host = socket.gethostname()
    try:
        addr = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError:
        addr = None
    return {"host": host, "addr": addr, "agents": transport_agents()}


def transport_agents() -> list[str]:
    """Dragon's transport agents on this node: `dragon-tcp` without --infrastructure (that one carries the overlay
    network), or `dragon-hsta`. Only processes in this process's network namespace: several nodes of the test
    cluster share one /proc."""
    mine = os.readlink("/proc/self/ns/net")
    found = []
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or os.readlink(f"/proc/{entry.name}/ns/net") != mine:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any("dragon-hsta" in a for a in argv):
            found.append("dragon-hsta")
        elif any(a.endswith("dragon-tcp") for a in argv) and "--infrastructure" not in argv:
            found.append("dragon-tcp")
    return sorted(found)


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


class GroupDDict:
    """The launch's DDict. Without reuse: one per point, made before it and destroyed after it. With reuse (a
    group's points share managers, nodes and memory): made for the first point, emptied by `clear()` before each
    later one (timed apart, `ddict_clear_s`), destroyed after a point that failed (the next point makes a fresh one
    rather than trust what a failed point's clients left). Either way the last point's is left to the runtime."""

    def __init__(self, reuse: bool):
        self.reuse, self.ddict = reuse, None

    def acquire(self, task) -> tuple[object, dict]:
        """The point's DDict, and its timings for the meta and the records."""
        if self.ddict is not None:
            t0 = time.time()
            self.ddict.clear()
            return self.ddict, {"ddict_reused": True, "ddict_create_s": 0.0, "ddict_clear_s": time.time() - t0}
        from dragon.data.ddict.ddict import DDict

        point, settings = task.point, task.settings
        t0 = time.time()
        self.ddict = DDict(point["managers_per_node"], point["nodes"], settings["total_mem"] * point["nodes"],
                           streams_per_manager=settings["streams_per_manager"],
                           persist_path=os.environ.get("MOVEBENCH_SCRATCH", ""))
        return self.ddict, {"ddict_reused": False, "ddict_create_s": time.time() - t0, "ddict_clear_s": 0.0}

    def release(self, keep: bool, last: bool = False) -> float | None:
        """After a point: kept for the next one (reuse, the point ended well, one is to come), else destroyed;
        the seconds its destruction took (0.0 when kept). After the launch's last point (`last`) it is left to the
        runtime (None): Dragon's teardown, which follows at once, ends the DDict's processes with the rest in no
        more time, and `destroy()` before it only added its own (docs/notes/kernels.md, section 12); the Dragon
        launcher's sweep would find anything left behind."""
        if last:
            self.ddict = None
            return None
        if (keep and self.reuse) or self.ddict is None:
            return 0.0
        t0 = time.time()
        try:
            self.ddict.destroy()
        finally:
            self.ddict = None
        return time.time() - t0


def run_head(task, head_start: float, dragon_startup_s: float, ddicts: GroupDDict, pool: ClientPool,
             last: bool = True) -> tuple[list[dict], dict]:
    """One point in the running Dragon runtime: its rounds, on the clients `pool` holds (started for the group's
    first point), in the DDict `ddicts` gives it. After the group's last point (`last`), or a point that failed,
    the clients are gone on return; the DDict too unless the group reuses it and a point is to come.

    `dragon_startup_s`: what the runtime's start cost this point (0.0 for a launch group's later points, which
    found it running)."""
    from movebench.core import records
    from movebench.core.adaptive import AdaptiveRepetitions
    from movebench.core.runner import counted_value

    point, settings = task.point, task.settings
    operation, nodes, value_size = point["operation"], point["nodes"], point["value_size"]
    keys_per_client, iterations = settings["keys_per_client"], settings["iterations"]
    clients = nodes * point["clients_per_node"]
    policy = task.policy
    reps = AdaptiveRepetitions(policy, task.warmups)
    recs, client_rounds, stats, placed = [], [], [], []
    timings = {"head_start": head_start, "dragon_startup_s": dragon_startup_s, "clients_reused": bool(pool.procs)}
    ended = False
    try:
        # A count is a schedule the clients run by themselves, as always; an adaptive rule is told round by round.
        scheduled = task.warmups + policy.max if policy.fixed else None
        # The clients start before the DDict is made, so that their interpreters come up while its managers do
        # rather than after; a client waits for its point on its work queue.
        pool.ensure(clients, nodes)
        try:
            ddict, made = ddicts.acquire(task)
        except Exception as exc:
            raise RuntimeError(f"the DDict: {type(exc).__name__}: {exc}") from exc
        timings.update(made)
        t0 = time.time()
        procs, results, barrier = pool.procs, pool.results, pool.barrier
        orders = None if policy.fixed else pool.orders
        pool.submit({"ddict": ddict, "operation": operation, "value_size": value_size, "count": keys_per_client,
                     "passes": iterations, "rounds": scheduled, "fault_round": settings.get("fault_round", -1),
                     "corrupt": settings.get("fault") == "corrupt-value",
                     "data_format": point.get("data_format", "bytes")})
        inbox = Inbox(results, procs)
        placed = inbox.collect("ready")
        # where the point's repetitions start, as run_mpi's kernel_start: what came before is its set-up
        timings["kernel_start"] = time.time()
        # what the clients took after the DDict was there: their start beyond its making, their data and set-up
        timings["clients_start_s"] = timings["kernel_start"] - t0
        fixed = {"clients": clients, "keys_per_client": keys_per_client, "iterations": iterations,
                 **{k: timings[k] for k in ("dragon_startup_s", "ddict_create_s", "ddict_clear_s",
                                            "clients_start_s")}}
        for rnd, (rep, warmup) in enumerate(reps):
            if orders is not None:
                for _ in range(clients):
                    orders.put("go")
            if operation == "frozen_get":
                ddict.freeze()
            # Every client has reported (ready, or its last round): a client that cannot reach the barrier within
            # BARRIER_S has died, and the broken barrier fails the point instead of hanging it.
            barrier.wait(BARRIER_S)
            rounds = inbox.collect("round")
            if operation == "frozen_get":
                ddict.unfreeze()
            elapsed, nbytes, extras = aggregate(rounds, value_size)
            bad = sum(r["mismatches"] for r in rounds)
            error = f"{bad} keys read back after the round's gets differ from the values put" if bad else None
            recs.append(records.record("kv", operation, point, rep, warmup, elapsed_s=elapsed, nbytes=nbytes,
                                       ok=not bad, error=error, verified=not bad, **fixed, **extras))
            client_rounds += [{"round": rnd, "rep": rep, "warmup": warmup, "client": i, **r}
                              for i, r in enumerate(rounds)]
            if not warmup:
                reps.add(counted_value(recs[-1]))
        if orders is not None:
            for _ in range(clients):
                orders.put("stop")
        for rec in recs:
            rec.update(reps.decision.record_fields())
        # one read-back speaks for all of the point's rounds (client_main says when it runs)
        bad = sum(d["mismatches"] for d in inbox.collect("done")) + sum(r["mismatches"] for r in client_rounds)
        if bad:
            for rec in recs:
                rec.update(ok=False, verified=False, error=f"{bad} keys read back after the "
                           f"{'gets' if operation in GETS else 'puts'} differ from the values put")
        stats = [_stats_row(s) for s in ddict.stats]
        ended = True
    except BaseException as exc:
        # Said before the clean-up below, which can hang on a broken runtime until the Dragon launcher kills it.
        print(f"movebench.kv head: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
    finally:
        if last or not ended:
            pool.close(broken=not ended)
        timings["ddict_destroy_s"] = ddicts.release(keep=ended and not last, last=last)
    # every host the point ran on (clients, managers, the head), as MPI's metas list theirs: the fingerprint's
    # hosts, which say whether a claim over nodes had a host per node
    hosts = {p.get("host") for p in placed} | {s.get("hostname") for s in stats} | {socket.gethostname()}
    meta = {**timings, "repetitions": task.repetitions, "clients": client_rounds, "ddict_stats": stats,
            "key_bytes": KEY_BYTES, "hostnames": sorted(h for h in hosts if h),
            "head_host": socket.gethostname(), "client_placement": placed, "dragon_transport": dragon_transport(task),
            "segments": {k: os.environ.get(k) for k in ("DRAGON_DEFAULT_SEG_SZ", "DRAGON_INF_SEG_SZ")}}
    return recs, meta


def dragon_transport(task) -> str:
    """The agent asked for between nodes: the point's transport, or Dragon's own choice; none on one node."""
    if task.point["nodes"] == 1:
        return "none (one node)"
    return task.settings.get("transport") or "dragon-config"


def _stats_row(s) -> dict:
    keep = ("manager_id", "hostname", "total_bytes", "total_used_bytes", "pool_utilization", "num_keys",
            "max_pool_allocations", "max_pool_allocations_used")
    return {k: getattr(s, k, None) for k in keep}


def main(argv=None):
    """The launch's points one after another in one Dragon runtime. A point that fails is said in one line and
    leaves no files (launch records it as failed); the next one still runs, and the exit status says that one
    failed."""
    head_start = time.time()
    import multiprocessing as mp

    import dragon  # noqa: F401  (registers the "dragon" start method)

    from movebench.core.runner import each_task, load_tasks, write

    mp.set_start_method("dragon")
    startup_s = head_start - float(os.environ.get("MOVEBENCH_DRAGON_T0", head_start))
    tasks = load_tasks(argv)
    # kv's setting ddict_per_group (its schema says what it changes; docs/notes/kernels.md has the figures)
    ddicts = GroupDDict(reuse=len(tasks) > 1 and all(t.settings.get("ddict_per_group") for t in tasks))
    pool = ClientPool()
    failed = []
    for task, group_meta in each_task(tasks=tasks):
        position, size = group_meta["group_position"], group_meta["group_size"]
        try:
            recs, meta = run_head(task, head_start, 0.0 if position else startup_s, ddicts, pool,
                                  last=position == size - 1)
        except Exception as exc:  # run_head said why; the runtime is still up for the next point
            failed.append(f"{task.variant} {task.point.get('value_size')} B ({type(exc).__name__})")
            continue
        write(task, recs, launcher="dragon", head_end=time.time(), **group_meta, **meta)
    if failed:
        sys.exit(f"movebench.kv: {len(failed)} of the launch's points failed: {'; '.join(failed)}")


if __name__ == "__main__":
    main()
