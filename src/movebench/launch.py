"""Run one benchmark point: launcher, timeout, atomic results, a failure record.

Called by every point rule with the point's task as JSON (`movebench.core.task.Task`: the family,
the point, the kernel's settings, repetitions, warm-ups, ranks and nodes); `movebench.launchers`
builds the command of its runtime (mpi or dragon). The kernel writes to
temporary files; only when it exits 0 within the timeout and its records say ok are they renamed
to the rule's outputs. Otherwise a failure record goes to `--failed` (outside Snakemake's outputs,
so Snakemake's clean-up of a failed job keeps it for the report) and the exit status is non-zero,
so that a rerun redoes the point.

Faults leave nothing behind: Ctrl-C or SIGTERM stops the kernel's process group (a kernel that had
already finished is still recorded: its work is complete), MPICH's shared-memory segments of a
killed job are removed by the job's own names (`ShmWatch`), and a full disk ends the point with one
line naming the folder and its free space.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import errno
import json
import math
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from movebench import families, launchers, machine
from movebench.core import envinfo, records, stats
from movebench.core.tables import counted
from movebench.core.task import Task, launch_path
from movebench.core.transport import TransportLog
from movebench.launchers.mpi import ShmWatch
from movebench.launchers.process import stop_group

GRACE_S = 10
LOG_TAIL_LINES = 40
FULL = (errno.ENOSPC, errno.EDQUOT)


def write_task(task: Task, path, out, meta) -> Task:
    """The kernel's task file: the point's task and where the kernel writes its records and meta."""
    kernel_task = Task.from_dict({**task.to_dict(), "out": str(out), "meta": str(meta)})
    # Not sorted: the point's keys keep their order, the order of its path and of its records' columns.
    records.write_text(path, json.dumps(kernel_task.to_dict(), indent=2) + "\n")
    return kernel_task


def run_kernel(task: Task, folder, launcher: str = "mpiexec", timeout: float = 600, env=None):
    """A task's kernel alone, without the point's bookkeeping (for benchmarks and tests).

    Returns (completed process, records or None, meta or None); the files stay in `folder`.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out, meta, task_path = folder / "records.jsonl", folder / "meta.json", folder / "task.json"
    for old in (out, meta):
        old.unlink(missing_ok=True)
    runtime = launchers.runtime(task)
    argv = runtime.command(write_task(task, task_path, out, meta), task_path, launcher)
    env = runtime.environment(task, os.environ if env is None else env)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    recs = records.read_jsonl(out) if out.exists() else None
    kernel_meta = json.loads(meta.read_text()) if meta.exists() else None
    if runtime.is_mpi and kernel_meta is not None:
        transport = TransportLog()
        for line in (proc.stdout + proc.stderr).splitlines():
            transport.feed(line)
        kernel_meta["transport"] = transport.summary()
    return proc, recs, kernel_meta


class _Run:
    """A kernel in its own process group, its output copied to ours (less the transport reports) and its tail kept."""

    def __init__(self, argv, env):
        self.tail = collections.deque(maxlen=LOG_TAIL_LINES)
        #: after an interrupt the kernel's dying words (Python's KeyboardInterrupt in every rank,
        #: mpiexec's banner) are not the point's story: they are read and dropped
        self.quiet = False
        self.transport = TransportLog()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", start_new_session=True, env=env)
        self.reader = threading.Thread(target=self._copy, daemon=True)
        self.reader.start()
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):  # not Linux 5.3+: Popen.wait's polling below
            self._pidfd = None

    def ended_within(self, seconds: float) -> bool:
        """Whether the kernel ended within `seconds`, known the moment it does: Popen.wait(timeout) polls with
        sleeps growing to 50 ms, a tenth of a short point's fixed cost; a pidfd becomes readable at the exit."""
        if self._pidfd is None:
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return False
            return True
        select.select([self._pidfd], [], [], seconds)
        if self.proc.poll() is None:
            return False
        os.close(self._pidfd)
        self._pidfd = None
        return True

    def _copy(self):
        for line in self.proc.stdout:
            if self.quiet or self.transport.feed(line):
                continue
            line = envinfo.redact_value(line)  # an SDK's error may quote a URL with its SAS signature
            self.tail.append(line.rstrip("\n"))
            with contextlib.suppress(OSError):  # a full disk under the log: the output is lost, not the run
                sys.stdout.write(line)
                sys.stdout.flush()

    def stop(self):
        """INT, then KILL after a grace period, to the whole group: mpiexec and every rank."""
        stop_group(self.proc, GRACE_S)


def free_space(folder) -> str:
    """The free bytes of `folder`'s filesystem (or its nearest existing ancestor), for a message."""
    probe = Path(folder).absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return "unknown"
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 1024)):
        if free >= factor:
            return f"{free / factor:.1f} {unit}"
    return f"{free} bytes"


def _signal_of(rc: int) -> str:
    """' (SIGTERM)' for a status that says a signal ended the kernel: negative from Python's own child, 128 + n
    as srun and shells report it."""
    number = -rc if rc < 0 else rc - 128 if 128 < rc < 128 + 65 else 0
    try:
        return f" ({signal.Signals(number).name})" if number else ""
    except ValueError:
        return ""


def _fullest(records_folder: Path, settings: dict) -> str:
    """The point's folders (its records', and a target folder its kernel got as setting `path`) with free space."""
    folders = [records_folder] + [Path(v) for k, v in settings.items() if k == "path" and isinstance(v, str)]
    return ", ".join(f"{folder} has {free_space(folder)} free" for folder in folders)


class DiskFull(Exception):
    """No space left where a point's files go: one line for the log and the console."""

    def __init__(self, path, exc: OSError):
        self.path = Path(path)
        super().__init__(f"no space left for {self.path} ({os.strerror(exc.errno)}; its filesystem has "
                         f"{free_space(self.path.parent)} free): free space there and run the same command again")


@contextlib.contextmanager
def _writing(path):
    try:
        yield
    except OSError as exc:
        if exc.errno in FULL:
            raise DiskFull(path, exc) from None
        raise


class _Signals:
    """SIGINT and SIGTERM noted, not raised: launch decides what a stop means at each step."""

    def __init__(self):
        self.name = None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._note)

    def _note(self, signum, frame):
        self.name = self.name or signal.Signals(signum).name


def _wait(run: _Run, timeout: float, signals: _Signals, before_stop) -> tuple[int | None, str | None]:
    """The kernel's exit status, or why it was stopped (timeout or a signal to launch)."""
    deadline = time.monotonic() + timeout
    while True:
        if signals.name:
            if run.proc.poll() is not None:
                return run.proc.returncode, None  # ended before the signal came: its outcome stands
            run.quiet = True
            before_stop()
            run.stop()
            return run.proc.returncode, f"interrupted ({signals.name})"
        if run.ended_within(min(0.2, max(0.0, deadline - time.monotonic()))):
            return run.proc.returncode, None
        if time.monotonic() >= deadline:
            before_stop()
            run.stop()
            return run.proc.returncode, f"timed out after {timeout:g} s (campaign.timeout)"


def _say(line: str, stream=None) -> None:
    with contextlib.suppress(OSError):
        print(line, file=stream or sys.stdout, flush=True)


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def earlier_launches(task: Task, out: Path, where: str) -> list[tuple[list[dict], dict]] | None:
    """The (records, meta) of the point's launches before this one, or None when one has not finished (on a
    cluster launches may run side by side)."""
    raw = Path(str(out)[: -len(f"{where}.jsonl")])
    point_path = families.point_path(task.point)
    found = []
    for k in range(task.launch):
        path = raw / f"{launch_path(point_path, k)}.jsonl"
        if not path.exists():
            return None
        meta_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        found.append((records.read_jsonl(path), meta))
    return found


def adaptive_launch(task: Task, out: Path, where: str) -> tuple[str | None, int | None]:
    """Under an adaptive rule `launches: {min, max, ci_target}`, for a launch past `min` whose point's earlier
    launches have all finished: (why it need not run, None) when their launch-level 95% CI of the elapsed time is
    already within `ci_target` of the estimate; else (None, the repetitions this launch should run), chosen from
    the measured variance components and costs (Kalibera and Jones, ISMM 2013: repetitions per launch
    r = sqrt(c_launch / c_repetition x var_within / var_between), at least 1 and at most the configured count).
    (None, None) when the rule does not apply."""
    rule = task.launches
    if not isinstance(rule, dict) or task.launch < rule.get("min", 2):
        return None, None
    earlier = earlier_launches(task, out, where)
    if earlier is None:
        return None, None
    values = [[r["elapsed_s"] for r in counted(recs) if r.get("elapsed_s")] for recs, _ in earlier]
    values = [v for v in values if v]
    if len(values) < 2:
        return None, None
    summary = stats.launch_summary(values)
    half = (summary["ci_high"] - summary["ci_low"]) / 2 / summary["median"] if summary["median"] else None
    target = rule.get("ci_target", 0.1)
    if half is not None and half <= target:
        return (f"launches.ci_target {target:g} reached after {len(values)} launches (half-width "
                f"{half:.3f} of the estimate)"), None
    if not isinstance(task.repetitions, int):
        return None, None  # an adaptive repetitions rule decides within the launch
    rep_s = sum(sum(v) for v in values) / sum(len(v) for v in values)
    walls = [meta.get("launch_wall_s") for _, meta in earlier if meta.get("launch_wall_s")]
    timed = [sum(r.get("elapsed_s") or 0 for r in recs) for recs, meta in earlier if meta.get("launch_wall_s")]
    within, between = summary.get("sd_within_log"), summary.get("sd_between_log")
    if not walls or not rep_s or not within or between is None:
        return None, None
    launch_s = max(0.0, sum(walls) / len(walls) - sum(timed) / len(timed))
    if between <= 0:
        return None, task.repetitions
    best = math.sqrt(launch_s / rep_s * within**2 / between**2)
    return None, max(1, min(task.repetitions, round(best)))


def run_point(args) -> int:
    signals = _Signals()
    try:
        return _run_point(args, signals)
    except DiskFull as exc:
        _say(f"movebench: {args.task.family} {families.point_path(args.task.point)} FAILED: {exc}", sys.stderr)
        return 1


def _run_point(args, signals: _Signals) -> int:
    task = args.task
    family, point = task.family, task.point
    runtime = launchers.runtime(task)
    point_path = families.point_path(point)
    where = launch_path(point_path, task.launch)
    out, meta_out, failed = Path(args.out), Path(args.meta), Path(args.failed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp_meta = meta_out.with_name(f".{meta_out.name}.{os.getpid()}.tmp")
    task_path = out.with_name(f".{out.name}.{os.getpid()}.task.json")
    try:
        enough, repetitions = adaptive_launch(task, out, where)
        if repetitions is not None and repetitions != task.repetitions:
            _say(f"movebench: {family} {where}: {repetitions} repetitions in this launch (of {task.repetitions}): "
                 "more launches buy more precision than repetitions here (Kalibera and Jones)")
            task = dataclasses.replace(task, repetitions=repetitions)
        if enough:
            with _writing(meta_out):
                records.write_json(meta_out, {"family": family, "point": point, "launch": task.launch,
                                              "launches": task.launches, "skipped": enough, "config_hash":
                                              args.config_hash, "campaign": args.campaign})
            with _writing(out):
                records.write_jsonl(out, [])
            failed.unlink(missing_ok=True)
            _say(f"movebench: {family} {where}: not run: {enough}")
            return 0
        with _writing(task_path):
            kernel_task = write_task(task, task_path, tmp_out, tmp_meta)
        argv = runtime.command(kernel_task, task_path, args.launcher)
        _say("movebench: " + shlex.join(argv))
        running = machine.RunningPoints()
        running.enter({"campaign": args.campaign, "family": family, "point_path": point_path,
                       "results": str(out.parent)})
        started = time.time()
        reason, rc, watch = None, None, None
        env = runtime.environment(task, os.environ)
        if "SLURM_JOB_ID" in env:
            from movebench import cluster  # Slurm's helpers: a local point need not import them

            # Under Snakemake's slurm executor the job step hid the allocation's nodes: dragon and Hydra need them.
            env.update(cluster.allocation_env(env))
        try:
            run = _Run(argv, env)
            # MPICH's segments; Dragon's are the Dragon launcher's to clean (kv's launcher is not MPI).
            watch = ShmWatch(run.proc.pid) if runtime.is_mpi else None
        except OSError as exc:
            run, reason = None, f"could not start {argv[0]!r}: {exc.strerror or exc}"
        if run is not None:
            # The ranks alive at a stop are looked at once more; a rank killed earlier was seen while it ran.
            rc, reason = _wait(run, args.timeout, signals, before_stop=watch.look if watch else lambda: None)
            run.reader.join(timeout=5)
            for line in run.transport.log_lines():
                _say(line)
        ended = time.time()
        overlapped = running.leave()
        leftovers = watch.finish() if watch is not None else []
        if leftovers:
            _say(f"movebench: removed {len(leftovers)} shared-memory segment(s) the job left: {', '.join(leftovers)}")
        recs = []
        if reason is None and rc != 0:
            reason = f"kernel exited with status {rc}{_signal_of(rc)}"
            if any(marker in line for line in (run.tail if run else ()) for marker in
                   ("No space left on device", "Errno 28", "Disk quota exceeded", "cannot write the records")):
                reason += f" (no space left on a device: {_fullest(out.parent, task.settings)})"
        if reason is None:
            try:
                recs = records.read_jsonl(tmp_out)
            except (OSError, json.JSONDecodeError) as exc:
                reason = f"kernel wrote no readable records: {exc}"
        if reason is None:
            bad = [r for r in recs if not r.get("ok", False)]
            if bad:
                reason = f"{len(bad)} of {len(recs)} repetitions failed: {bad[0].get('error')}"
        if reason is None:
            # Finished: recorded even when an interrupt came after the kernel's end (its work is complete).
            meta = json.loads(tmp_meta.read_text()) if tmp_meta.exists() else {}
            meta.update(launch_start=started, launch_end=ended, launch_wall_s=ended - started,
                        launcher=args.launcher, command=shlex.join(argv), config_hash=args.config_hash,
                        campaign=args.campaign, task=task.to_dict(), launch=task.launch,
                        launch_order_seed=_int_or_none(os.environ.get("MOVEBENCH_LAUNCH_ORDER_SEED")),
                        overlapped_with=overlapped, shm_segments_removed=leftovers)
            if runtime.is_mpi:
                meta["transport"] = run.transport.summary()
            with _writing(meta_out):
                records.write_json(meta_out, meta)
            os.replace(tmp_out, out)
            failed.unlink(missing_ok=True)
            _say(f"movebench: {family} {where}: {len(recs)} records in {ended - started:.1f} s")
            return 0
        with _writing(failed):
            records.write_json(failed, {
                "family": family, "point_path": point_path, "launch": task.launch, **point, "ok": False,
                "error": reason,
                "returncode": rc, "start": started, "end": ended, "command": shlex.join(argv),
                "log_tail": list(run.tail) if run else [], "config_hash": args.config_hash, "records": recs,
                "overlapped_with": overlapped, "shm_segments_removed": leftovers})
        _say(f"movebench: {family} {where} FAILED: {reason}", sys.stderr)
        return 1
    finally:
        for leftover in (tmp_out, tmp_meta, task_path):
            leftover.unlink(missing_ok=True)


def _task(text: str) -> Task:
    """The task as JSON, or @path of a file holding it."""
    try:
        return Task.from_dict(json.loads(Path(text[1:]).read_text() if text.startswith("@") else text))
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"not a task: {exc}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m movebench.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", type=_task, required=True,
                   help="the point's task as JSON (or @FILE): family, variant, point, settings, repetitions, "
                        "warmups, ranks, nodes")
    p.add_argument("--launcher", default="mpiexec",
                   help="MPI launcher; may contain {ranks} and {nodes}, else '-n <ranks>' is appended")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the point is killed")
    p.add_argument("--out", required=True, help="the point's records (.jsonl)")
    p.add_argument("--meta", required=True, help="the point's meta (.meta.json)")
    p.add_argument("--failed", required=True, help="where a failure record goes")
    p.add_argument("--config-hash", default=os.environ.get("MOVEBENCH_CONFIG_HASH"),
                   help="hash of the campaign config, for the meta (default: $MOVEBENCH_CONFIG_HASH)")
    p.add_argument("--campaign", default=os.environ.get("MOVEBENCH_CAMPAIGN"),
                   help="campaign name, for the meta (default: $MOVEBENCH_CAMPAIGN)")
    return p


def main(argv=None) -> int:
    return run_point(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
