"""What every kernel shares: its task, the repetition loop, and writing records and meta.

A kernel measures one point. `movebench.engine.launch` writes the point's task (`movebench.core.task.Task`
as a JSON file: the point, the kernel's settings, repetitions, warm-ups, and where to write) and
starts the kernel with its path as the only argument, e.g.
`mpiexec -n 2 python -m movebench.families.shuffle.kernel task.json`.
The point goes into every record verbatim: it is the record's identity. Rank 0 writes the records
and meta to the task's paths; launch renames them into place only when the whole job succeeded,
so a half-run point never looks finished.

A launch may hold several points of one family (a launch group): the task file is then
`{"group": [task, task, ...]}`, each task with its own `out` and `meta`. What a launch fixes (the
ranks and nodes of an MPI family; kv's Dragon runtime) is paid once for the group instead of once per
point. The kernel measures the tasks in the order given and writes each task's files as soon as that
task is done, so a crash later in the launch keeps the finished tasks (launch records the missing ones
as failed); what one task allocated is released before the next starts, so one point's buffers never
sit in the next one's memory or its figures. Each task's meta says where it ran in its launch
(`group_position`, `group_size`; 0 and 1 for a task file of one task).

`repetitions` is a count or an adaptive rule (core.adaptive): `run_mpi` measures until the rule
stops, rank 0's decision broadcast so that every rank stops after the same repetition, and every
record carries why the point stopped (`stop_reason`: fixed, ci_target, max_repetitions,
max_seconds, failed), the median's relative 95% CI half-width over the counted elapsed times
(`ci_half_width_rel`) and how many counted repetitions ran (`repetitions_run`).
"""

from __future__ import annotations

import errno
import functools
import gc
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


def _task_file(argv) -> tuple[str, object]:
    """The kernel's one argument and the JSON it names."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1 or argv[0].startswith("-"):
        prog = sys.argv[0] if sys.argv and sys.argv[0] else "kernel"
        sys.exit(f"usage: {prog} TASK.json  (a task written by python -m movebench.engine.launch; "
                 "see movebench.core.runner)")
    with open(argv[0]) as f:
        return argv[0], json.load(f)


def _is_group(data) -> bool:
    return isinstance(data, dict) and "group" in data


def load_tasks(argv=None) -> list[Task]:
    """The launch's tasks, in the order they are to run: one task, or a group's (the module's docstring)."""
    path, data = _task_file(argv)
    if not _is_group(data):
        return [Task.from_dict(data)]
    group = data["group"]
    if not isinstance(group, list) or not group:
        raise ValueError(f"{path}: a group is a non-empty list of tasks")
    tasks = [Task.from_dict(item) for item in group]
    families = {t.family for t in tasks}
    if len(families) > 1:
        raise ValueError(f"{path}: a group runs one family's kernel, not {', '.join(sorted(families))}")
    outs = [t.out for t in tasks]
    if any(outs) and len(set(outs)) < len(outs):
        raise ValueError(f"{path}: the group's tasks must write to distinct files")
    return tasks


def load_task(argv=None) -> Task:
    """The task whose path is the kernel's one argument; a kernel that reads a group uses `load_tasks`."""
    path, data = _task_file(argv)
    if _is_group(data):
        sys.exit(f"movebench: {path} holds a launch group; this kernel runs one task (a kernel that runs a group "
                 "reads it with movebench.core.runner.load_tasks)")
    return Task.from_dict(data)


def each_task(argv=None, tasks: list[Task] | None = None, rehearse=None):
    """`(task, group_meta)` for each of the launch's tasks (`tasks`, else those the task file names), in order, what
    a task left released before the next one starts (`release_memory`).

    `rehearse(first_task)`, where given, runs before the first task and is released as a task is: what a launch
    pays once (lazy imports, the heap's first growth, a library's first call) then lands there instead of in
    whichever point comes first."""
    tasks = load_tasks(argv) if tasks is None else tasks
    if rehearse is not None:
        rehearse(tasks[0])
        _between_tasks()
    for position, task in enumerate(tasks):
        yield task, {"group_position": position, "group_size": len(tasks)}
        if position + 1 < len(tasks):
            _between_tasks()


def _between_tasks() -> None:
    release_memory()
    # What is left is the launch's own (modules, the communicator, caches): out of later collections, so that a
    # point's release_memory scans only what points made, not every module's objects twice per point.
    gc.freeze()


def release_memory() -> None:
    """Collect what a finished task left unreachable and hand the heap's free pages back to the kernel.

    A reference cycle would keep a task's buffers until Python's collector ran, maybe inside the next task's
    timed region; and glibc keeps freed heap memory resident, so the next task's RSS baseline would hold it and
    its allocations would reuse it without growing RSS (bcast measures exactly that growth).
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, looked up once (each ctypes.CDLL makes a new class, garbage until a collection)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim by name
        return None


def run_mpi(comm, task: Task, measure, extra_meta=None, started: float | None = None) -> list[dict]:
    """Run `measure(rep, warmup) -> (elapsed_s, nbytes, extras)` on every rank for each repetition.

    `measure` is collective: every rank calls it and every rank returns the same tuple (kernels
    reduce their timings before returning). Rank 0 writes the records and the meta. `started` (the meta's
    kernel_start, now by default) is when the repetitions began, for a kernel that runs some before this call.
    """
    from movebench.core.mpi import mpi_meta

    started = time.time() if started is None else started
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
