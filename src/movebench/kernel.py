"""What every MPI kernel's `main` shares: common arguments, the repetition loop, output.

A kernel measures one point. Rank 0 writes the point's records and meta to the
paths it is given; `movebench.launch` renames them into place only when the
whole job succeeded, so a half-run point never looks finished.
"""

from __future__ import annotations

import argparse
import time

from movebench.core import envinfo, records
from movebench.core.mpi import mpi_meta
from movebench.core.timing import Repetitions


def argument_parser(family: str, doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m movebench.{family}", description=doc,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    common = parser.add_argument_group("every kernel")
    common.add_argument("--repetitions", type=int, default=5, help="measured repetitions")
    common.add_argument("--warmups", type=int, default=2, help="warm-up repetitions, recorded and flagged")
    common.add_argument("--out", required=True, help="records (.jsonl), written by rank 0")
    common.add_argument("--meta", help="environment (.meta.json), written by rank 0")
    return parser


def run_mpi(comm, args, family: str, variant: str, params: dict, measure, extra_meta=None) -> list[dict]:
    """Run `measure(rep, warmup) -> (elapsed_s, nbytes, extras)` on every rank for each repetition.

    `measure` is collective: every rank calls it and every rank returns the same
    tuple (kernels reduce their timings before returning). Rank 0 writes the records.
    """
    started = time.time()
    recs = []
    for rep, warmup in Repetitions(args.repetitions, args.warmups):
        elapsed, nbytes, extras = measure(rep, warmup)
        recs.append(records.record(family, variant, params, rep, warmup, elapsed_s=elapsed, nbytes=nbytes,
                                   **extras))
    placement = mpi_meta(comm)
    if comm.rank == 0:
        records.write_jsonl(args.out, recs)
        if args.meta:
            meta = envinfo.capture(family=family, variant=variant, point=params, kernel_start=started,
                                   kernel_end=time.time(), **placement, **(extra_meta or {}))
            records.write_json(args.meta, meta)
    return recs
