"""What a DDict get costs the client loop: movebench's loop beside gups_ddict's, in one Dragon job.

Run by bench/kv_gups.py (part B), or by hand:
    python -m movebench.engine.launchers.dragon -- dragon -s python bench/kv_variants.py --operation get \
        --value-size 4096

Two clients (one manager) put the same keys in two styles, untimed: movebench's (128-byte `bytes`
keys, `bytes` values distinct per key, movebench.families.kv.kernel's make_keys/make_values) and gups_ddict's (keys
of 16 random float64 in a numpy array, one random float64 numpy array as every key's value). Then,
round after round (each starting at a barrier with the head), every client times `--passes` passes
over its keys for each variant in turn, in an order rotated every round:
- bytes/keep: movebench's loop before issue 13: every value kept in a list inside the timer.
- bytes/discard: the same gets, each value dropped at once (`_ = d[k]`), as gups_ddict: movebench's
  loop now (kv kernel's timed_passes; verification reads the values back after the timer).
- numpy/discard: gups_ddict's loop and data.
- numpy/keep: gups_ddict's data, values kept.
For frozen_get the head freezes the dictionary once, after the puts. Rate of a client = gets / its
time; the head prints, per round and variant, the sum over clients (gups_ddict's aggregate), as JSON.

With `--operation put`, the variants are movebench's put loops over its `bytes` data instead:
batch/n for every n of `--put-counts` (n batches back to back, each start_batch_put, the puts,
end_batch_put; batch/1 is what a round timing one pass measures, batch/n with n > 1 what gups_ddict
times) and put/1, put/n for the largest n. Each variant follows `--gap` seconds of idle time, as a
round follows the head's barrier and bookkeeping; its figure is per pass (its time / n).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

VARIANTS = ("bytes/keep", "bytes/discard", "numpy/discard", "numpy/keep")


def put_variants(counts: list[int]) -> tuple[str, ...]:
    return (*(f"batch/{n}" for n in counts), "put/1", f"put/{max(counts)}")


def put_rounds(ddict, keys, values, variants, rounds, gap, barrier, results, client):
    """Per round, each put variant after `gap` s of idle: times (s) per variant."""
    for rnd in range(rounds):
        barrier.wait()
        turn = rnd % len(variants)
        times = {}
        for variant in variants[turn:] + variants[:turn]:
            mode, n = variant.split("/")
            n = int(n)
            time.sleep(gap)
            start = time.perf_counter()
            for _ in range(n):
                if mode == "batch":
                    ddict.start_batch_put()
                for key, value in zip(keys, values, strict=True):
                    ddict[key] = value
                if mode == "batch":
                    ddict.end_batch_put()
            times[variant] = (time.perf_counter() - start) / n  # per pass
        results.put(("round", client, times))


def client_main(ddict, client, count, value_size, passes, rounds, barrier, results, operation="get", gap=0.05,
                put_counts=(1, 4)):
    from movebench.families.kv.kernel import gups_data, make_keys, make_values, same

    try:
        if operation == "put":
            keys, values = make_keys(client, count), make_values(client, count, value_size)
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
            results.put(("ready", client, None))
            put_rounds(ddict, keys, values, put_variants(put_counts), rounds, gap, barrier, results, client)
            bad = sum(1 for key, value in zip(keys, values, strict=True) if ddict[key] != value)
            if bad:
                raise RuntimeError(f"{bad} keys read back differ from the values put")
            results.put(("done", client, None))
            return
        data = {"bytes": (make_keys(client, count), make_values(client, count, value_size)),
                "numpy": gups_data(client, count, value_size)}
        for keys, values in data.values():
            for key, value in zip(keys, values, strict=True):
                ddict[key] = value
        results.put(("ready", client, None))
        for rnd in range(rounds):
            barrier.wait()
            turn = rnd % len(VARIANTS)
            times = {}
            for variant in VARIANTS[turn:] + VARIANTS[:turn]:
                style, mode = variant.split("/")
                keys, values = data[style]
                if mode == "keep":
                    got = [None] * len(keys)
                    start = time.perf_counter()
                    for _ in range(passes):
                        for i, key in enumerate(keys):
                            got[i] = ddict[key]
                    times[variant] = time.perf_counter() - start
                    bad = sum(1 for g, v in zip(got, values, strict=True) if not same(g, v))
                    if bad:
                        raise RuntimeError(f"{variant}: {bad} gets differ from the values put")
                    del got
                else:
                    start = time.perf_counter()
                    for _ in range(passes):
                        for key in keys:
                            _ = ddict[key]
                    times[variant] = time.perf_counter() - start
            results.put(("round", client, times))
        results.put(("done", client, None))
    except BaseException as exc:
        results.put(("failed", client, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        ddict.detach()


def main(argv=None) -> int:
    import multiprocessing as mp

    import dragon  # noqa: F401
    from dragon.data.ddict.ddict import DDict

    from movebench.families.kv import keys_per_client
    from movebench.families.kv.kernel import Inbox

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operation", choices=("get", "frozen_get", "put"), default="get")
    parser.add_argument("--gap", type=float, default=0.05, help="put: idle seconds before each variant")
    parser.add_argument("--value-size", type=int, default=4096)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--passes", type=int, default=4, help="passes over the keys per timed variant")
    parser.add_argument("--put-counts", default="1,4", help="put: batches back to back per variant, comma-separated")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--total-mem", type=int, default=256 << 20)
    parser.add_argument("--max-keys", type=int, default=200, help="cap of keys per client (gups_ddict's max_keys)")
    args = parser.parse_args(argv)
    mp.set_start_method("dragon")
    put_counts = [int(n) for n in args.put_counts.split(",")]
    count = keys_per_client({"total_mem": str(args.total_mem), "mem_frac": 0.1, "max_keys": args.max_keys,
                             "keys_per_client": None}, 1, args.clients, args.value_size)
    ddict = DDict(1, 1, args.total_mem, streams_per_manager=5, persist_path=os.environ.get("MOVEBENCH_SCRATCH", ""))
    procs = []
    try:
        results, barrier = mp.Queue(), mp.Barrier(args.clients + 1)
        for client in range(args.clients):
            proc = mp.Process(target=client_main, args=(ddict, client, count, args.value_size, args.passes,
                                                        args.rounds, barrier, results, args.operation, args.gap,
                                                        put_counts))
            proc.start()
            procs.append(proc)
        inbox = Inbox(results, procs)
        inbox.collect("ready")
        if args.operation == "frozen_get":
            ddict.freeze()
        rounds = []
        for _ in range(args.rounds):
            barrier.wait(120)
            per_client = inbox.collect("round")
            if args.operation == "put":  # per-pass times
                rounds.append({v: sum(count / c[v] for c in per_client) for v in put_variants(put_counts)})
            else:
                rounds.append({v: sum(count * args.passes / c[v] for c in per_client) for v in VARIANTS})
        inbox.collect("done")
        print(json.dumps({"operation": args.operation, "value_size": args.value_size, "keys_per_client": count,
                          "passes": args.passes, "rounds": rounds}), flush=True)
    finally:
        for proc in procs:
            proc.join(10)
        ddict.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
