"""What every kernel shares: its task, the repetition loop, and writing records and meta.

A kernel measures one point. `movebench.launch` writes the point's task (`movebench.core.task.Task`
as a JSON file: the point, the kernel's settings, repetitions, warm-ups, and where to write) and
starts the kernel with its path as the only argument, e.g.
`mpiexec -n 2 python -m movebench.families.shuffle.kernel task.json`.
The point goes into every record verbatim: it is the record's identity. Rank 0 writes the records
and meta to the task's paths; launch renames them into place only when the whole job succeeded,
so a half-run point never looks finished.

`repetitions` is a count or an adaptive rule (core.adaptive): `run_mpi` measures until the rule
stops, rank 0's decision broadcast so that every rank stops after the same repetition, and every
record carries why the point stopped (`stop_reason`: fixed, ci_target, max_repetitions,
max_seconds, failed), the median's relative 95% CI half-width over the counted elapsed times
(`ci_half_width_rel`) and how many counted repetitions ran (`repetitions_run`).
"""

from __future__ import annotations

import errno
import json
import sys
import time

from movebench.core import records
from movebench.core.adaptive import AdaptiveRepetitions
from movebench.core.task import Task


def counted_value(rec: dict) -> float | None:
    """What a counted repetition tells the stop rule: its elapsed time, None when it failed or measured nothing."""
    elapsed = rec.get("elapsed_s")
    return elapsed if rec.get("ok", True) and elapsed is not None else None


def load_task(argv=None) -> Task:
    """The task whose path is the kernel's one argument."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1 or argv[0].startswith("-"):
        prog = sys.argv[0] if sys.argv and sys.argv[0] else "kernel"
        sys.exit(f"usage: {prog} TASK.json  (a task written by python -m movebench.launch; see movebench.runner)")
    with open(argv[0]) as f:
        return Task.from_dict(json.load(f))



def run_mpi(comm, task: Task, measure, extra_meta=None) -> list[dict]:
    """Run `measure(rep, warmup) -> (elapsed_s, nbytes, extras)` on every rank for each repetition.

    `measure` is collective: every rank calls it and every rank returns the same tuple (kernels
    reduce their timings before returning). Rank 0 writes the records and the meta.
    """
    from movebench.core.mpi import mpi_meta

    started = time.time()
    policy = task.policy
    # A count stops every rank after the same repetition by itself; an adaptive rule reads each rank's
    # clock, so rank 0 decides for all (one small bcast after each counted repetition, untimed).
    agree = None if policy.fixed else (lambda d: comm.bcast(d, root=0))
    reps = AdaptiveRepetitions(policy, task.warmups, agree=agree)
    recs = []
    for rep, warmup in reps:
        elapsed, nbytes, extras = measure(rep, warmup)
        recs.append(records.record(task.family, task.variant, task.point, rep, warmup, elapsed_s=elapsed,
                                   nbytes=nbytes, **extras))
        if not warmup:
            reps.add(counted_value(recs[-1]))
    for rec in recs:
        rec.update(reps.decision.record_fields())
    placement = mpi_meta(comm)
    if comm.rank == 0:
        write(task, recs, kernel_start=started, repetitions=task.repetitions, **placement, **(extra_meta or {}))
    return recs


def write(task: Task, recs: list[dict], **meta) -> None:
    """The point's records, and its meta: the environment, the task, and what the kernel adds.

    A full disk ends the kernel with one line (launch adds the folder's free space), not a traceback.
    """
    from movebench.core import envinfo  # rank 0 only: the other ranks never pay its imports

    for rec in recs:
        rec["launch"] = task.launch
    try:
        records.write_jsonl(task.out, recs)
        if task.meta:
            captured = envinfo.capture(family=task.family, variant=task.variant, point=task.point,
                                       settings=task.settings, launch=task.launch, kernel_end=time.time(), **meta)
            records.write_json(task.meta, captured)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        sys.exit(f"movebench: {task.family}: cannot write the records ({exc.strerror}): {task.out}")
