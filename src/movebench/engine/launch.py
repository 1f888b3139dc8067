"""Run one benchmark point: launcher, timeout, atomic results, a failure record.

Called by every point rule with the point's task as JSON (`movebench.core.task.Task`: the family,
the point, the kernel's settings, repetitions, warm-ups, ranks and nodes); its runtime
(`movebench.engine.launchers`) builds the command, checks what must hold before the start, watches the run and
cleans up after it. The kernel writes to
temporary files; only when it exits 0 within the timeout and its records say ok are they renamed
to the rule's outputs. Otherwise a failure record goes to `--failed` (outside Snakemake's outputs,
so Snakemake's clean-up of a failed job keeps it for the report) and the exit status is non-zero,
so that a rerun redoes the point.

Faults leave nothing behind: Ctrl-C or SIGTERM stops the kernel's process group (a kernel that had
already finished is still recorded: its work is complete), the runtime removes what a killed job left
(`Runtime.watch`), and a full disk ends the point with one line naming the folder and its free space.
"""

# ruff: noqa: E402 - the signal handlers below come before the imports, on purpose
# (No `from __future__ import annotations`: it is an import too, run before anything else could be.)
import _signal  # the C module: `signal` builds its enums first, tens of milliseconds that Ctrl-C can land in

#: Ctrl-C and SIGTERM that came while launch was still importing (a second or more on a loaded machine): noted from
#: the first line on, else Python's KeyboardInterrupt traceback of an import was the point's story on the console.
#: Only as a program: a module that imports launch keeps its own handlers.
EARLY_SIGNALS: list[int] = []
if __name__ == "__main__":
    for _sig in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_sig, lambda signum, frame: EARLY_SIGNALS.append(signum))
    # The point rules start launch with both blocked (launchers.process.BLOCKED_START), so that one sent while Python
    # started and compiled this module waited: it is delivered now, to the handler above. The kernel inherits the mask.
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT, _signal.SIGTERM})

import argparse
import collections
import contextlib
import dataclasses
import errno
import json
import os
import random
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from movebench import families
from movebench.core import adaptive_launches, envinfo, records, verdict
from movebench.core.layout import ResultsLayout
from movebench.core.records import free_space
from movebench.core.tables import counted
from movebench.core.task import Task, launch_digest, launch_path, point_path_of
from movebench.engine import keep, launchers, machine
from movebench.engine.launchers.process import descendants, stop_group
from movebench.services import hold

GRACE_S = 10
LOG_TAIL_LINES = 40
FULL = (errno.ENOSPC, errno.EDQUOT)


def write_task(task: Task, path, out, meta) -> Task:
    """The kernel's task file: the point's task and where the kernel writes its records and meta."""
    kernel_task = dataclasses.replace(task, out=str(out), meta=str(meta))
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
    if kernel_meta is not None:
        watch = runtime.watch()
        for line in (proc.stdout + proc.stderr).splitlines():
            watch.swallow(line)
        kernel_meta.update(watch.meta(task, kernel_meta)[0])
    return proc, recs, kernel_meta


class _Run:
    """A kernel in its own process group under its runtime's watch, its output copied to ours (less the runtime's
    own reports) and its tail kept."""

    def __init__(self, argv, env, watch: launchers.Watch | None = None):
        self.tail = collections.deque(maxlen=LOG_TAIL_LINES)
        #: after an interrupt the kernel's dying words (Python's KeyboardInterrupt in every rank,
        #: mpiexec's banner) are not the point's story: they are read and dropped
        self.quiet = False
        self.watch = watch or launchers.Watch()
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
            if self.quiet or self.watch.swallow(line):
                continue
            line = envinfo.redact_value(line)  # an SDK's error may quote a URL with its SAS signature
            self.tail.append(line.rstrip("\n"))
            with contextlib.suppress(OSError):  # a full disk under the log: the output is lost, not the run
                sys.stdout.write(line)
                sys.stdout.flush()

    def stop(self):
        """INT, then KILL after a grace period, to the whole group: mpiexec and every rank."""
        stop_group(self.proc, GRACE_S)


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
    """SIGINT and SIGTERM noted, not raised: launch decides what a stop means at each step. The end of the snakemake
    that started launch counts as a stop too: Snakemake's local executor leaves a running job's shell behind when
    it is SIGKILLed, and a point nobody will book would run on beside the rerun of the same point."""

    def __init__(self):
        self.name = signal.Signals(EARLY_SIGNALS[0]).name if EARLY_SIGNALS else None
        self.starter = machine.Starter()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._note)

    def _note(self, signum, frame):
        self.name = self.name or signal.Signals(signum).name

    def stopped(self) -> str | None:
        if not self.name and self.starter.gone():
            self.name = f"the snakemake that started it, pid {self.starter.pid}, ended"
        return self.name


#: how long a kernel's failure waits for a signal to launch that would explain it
SIGNAL_GRACE_S = 1.0


def _signalled_within(signals: _Signals, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not signals.name:
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


class Deadline:
    """campaign.timeout for each point of a launch: counted from the launch's start for its first point and from
    the previous point's finish for each next one (a launch group's kernel runs its points in order), so that a
    stuck point is stopped after its own timeout, not after its group's points' timeouts added up."""

    def __init__(self, seconds: float, now: float):
        self.seconds, self.finished, self.end = seconds, 0, now + seconds

    def progress(self, finished: int, now: float) -> None:
        """`finished` points of the launch are done by `now`: a new one starts the next point's timeout."""
        if finished > self.finished:
            self.finished, self.end = finished, now + self.seconds

    def left(self, now: float) -> float:
        return max(0.0, self.end - now)


class _Finished:
    """How many of a launch's points have finished, in the order they run: a point's records (its temporary `out`,
    renamed into place by the kernel's writer, the meta after them) appear when it is done."""

    def __init__(self, outs: list[Path]):
        self.outs, self.count = outs, 0

    def __call__(self) -> int:
        while self.count < len(self.outs) and self.outs[self.count].exists():
            self.count += 1
        return self.count


def _wait(run: _Run, timeout: float, signals: _Signals, before_stop,
          finished=lambda: 0) -> tuple[int | None, str | None]:
    """The kernel's exit status, or why it was stopped (timeout or a signal to launch). `timeout` is each point's
    (`Deadline`); `finished()` counts the launch's points done so far."""
    deadline = Deadline(timeout, time.monotonic())
    while True:
        if signals.stopped():
            if run.proc.poll() is not None:
                # a kernel that finished keeps its outcome; one that failed as the signal came (scancel signals
                # the job's steps and its batch script at once: srun ended 168 first in one CI run) failed of it
                return run.proc.returncode, (None if run.proc.returncode == 0 else f"interrupted ({signals.name})")
            run.quiet = True
            before_stop()
            run.stop()
            return run.proc.returncode, f"interrupted ({signals.name})"
        if run.ended_within(min(0.2, deadline.left(time.monotonic()))):
            if run.proc.returncode != 0 and _signalled_within(signals, SIGNAL_GRACE_S):
                # scancel signals the job's steps and its batch script with no order between them: a kernel
                # killed by it may end before launch's own signal arrives
                return run.proc.returncode, f"interrupted ({signals.name})"
            return run.proc.returncode, None
        now = time.monotonic()
        deadline.progress(finished(), now)
        if deadline.left(now) <= 0:
            before_stop()
            run.stop()
            return run.proc.returncode, f"timed out after {timeout:g} s (campaign.timeout)"


#: the point's log when launch writes it itself (--log); its stdout is then that log and its stderr the console
_LOG: str | None = None


def _say(line: str, stream=None) -> None:
    """A line for the log; one for stderr goes to the console as well, where a failed point's one line belongs
    (Snakemake shows a job's stderr), so that a full disk under the log cannot swallow it."""
    for out in (sys.stdout, stream) if stream is sys.stderr and _LOG else (stream or sys.stdout,):
        with contextlib.suppress(OSError):
            print(line, file=out, flush=True)


def _failed(line: str) -> None:
    _say(line + (f"; its log: {_LOG}" if _LOG else ""), sys.stderr)


def _open_log(path: str) -> None:
    """Launch's stdout (its own lines and the kernel's output) to the point's log; stderr stays the console's."""
    global _LOG
    _LOG = path
    sys.stdout.flush()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        # The kernel's output must not flood the console in its place: it is lost, the failure record is not.
        fd = os.open(os.devnull, os.O_WRONLY)
        _say(f"movebench: cannot write the log {path} ({exc.strerror}); only this console's lines tell the point's "
             "story", sys.stderr)
    os.dup2(fd, sys.stdout.fileno())
    os.close(fd)


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def earlier_launches(task: Task, out: Path, where: str) -> list[tuple[list[dict], dict]] | None:
    """The (records, meta) of the point's launches before this one, or None when one has not finished (on a
    cluster launches may run side by side)."""
    layout = ResultsLayout.holding(out, task.family, where)
    point_path = families.point_path(task.point)
    found = []
    for k in range(task.launch):
        path = layout.records(task.family, launch_path(point_path, k))
        if not path.exists():
            return None
        meta_path = layout.meta_of(path)
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        found.append((records.read_jsonl(path), meta))
    return found


def family_launch_centres(layout: ResultsLayout, family: str,
                          measure: str = "elapsed_s") -> list[list[list[float]]]:
    """Every point's launches so far in the results folder (the values of `measure`, one list per launch): what
    the family's variance prior is fitted on, as compare fits it."""
    by_point: dict[str, list[list[float]]] = {}
    for path in sorted((layout.raw / family).rglob("*.jsonl")):
        values = [r[measure] for r in counted(records.read_jsonl(path)) if r.get(measure)]
        if values:
            by_point.setdefault(point_path_of(layout.launch_of(path)[1]), []).append(values)
    return list(by_point.values())


def adaptive_launch(task: Task, out: Path, where: str) -> tuple[str | None, int | None]:
    """Under an adaptive rule `launches: {min, max, ci_target | mdc_target}`, for a launch past `min` whose point's
    earlier launches have all finished: (why it need not run, None) when those launches already reach the target
    (`ci_target`: their launch-level 95% CI of the elapsed time is within it of the estimate; `mdc_target`: a
    comparison against a rerun with as many launches would find a change of that size, the point's variance
    moderated toward its family's prior as compare's verdicts do); else (None, the repetitions this launch should
    run), chosen from the measured variance components and costs (Kalibera and Jones, ISMM 2013: repetitions per
    launch r = sqrt(c_launch / c_repetition x var_within / var_between), at least 1 and at most the configured
    count). (None, None) when the rule does not apply."""
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
    prior = None
    if rule.get("mdc_target") is not None:
        layout = ResultsLayout.holding(out, task.family, where)
        prior = verdict.launch_variance_prior([(launches,) for launches in
                                               family_launch_centres(layout, task.family)])
    enough = adaptive_launches.launches_reached(rule, values, prior)
    if enough:
        return enough, None
    if not isinstance(task.repetitions, int):
        return None, None  # an adaptive repetitions rule decides within the launch
    # a launch group's wall is its members' together: a member's share of it is the wall over the group's size
    walls = [meta["launch_wall_s"] / ((meta.get("launch_group") or {}).get("size") or 1)
             for _, meta in earlier if meta.get("launch_wall_s")]
    timed = [sum(r.get("elapsed_s") or 0 for r in recs) for recs, meta in earlier if meta.get("launch_wall_s")]
    return None, adaptive_launches.repetitions_per_launch(values, walls, timed, task.repetitions)


@dataclasses.dataclass
class Member:
    """One point's launch inside a launch: its planned task and where its files go."""

    task: Task
    out: Path
    meta: Path
    failed: Path
    #: where a finished member's files wait out a failed launch group (None: a launch of one point)
    kept: Path | None = None

    @property
    def where(self) -> str:
        return launch_path(families.point_path(self.task.point), self.task.launch)

    def tmp(self, kind: str) -> Path:
        path = self.out if kind == "out" else self.meta
        return path.with_name(f".{path.name}.{os.getpid()}.tmp")



def run_point(args) -> int:
    signals = _Signals()
    if args.group is not None:
        members, name = args.group
        members = [Member(task, Path(out), Path(meta), Path(args.failed) / task.family / f"{_where(task)}.json",
                          Path(args.kept) if args.kept else None)
                   for task, out, meta in zip(members, args.records, args.metas, strict=True)]
    else:
        members, name = [Member(args.task, Path(args.out), Path(args.meta), Path(args.failed),
                                Path(args.kept) if args.kept else None)], None
    try:
        return _run_launch(members, name, args, signals)
    except DiskFull as exc:
        task = members[0].task
        what = f"launch group {name}" if name else families.point_path(task.point)
        _failed(f"movebench: {task.family} {what} FAILED: {exc}")
        return 1


def _where(task: Task) -> str:
    return launch_path(families.point_path(task.point), task.launch)


def _skip(member: Member, why: str, args) -> None:
    task = member.task
    with _writing(member.meta):
        records.write_json(member.meta, {"family": task.family, "point": task.point, "launch": task.launch,
                                         "launches": task.launches, "skipped": why, "config_hash":
                                         args.config_hash, "campaign": args.campaign,
                                         **({"launched_as": launch_digest(task, args.sources)} if args.sources
                                            else {})})
    with _writing(member.out):
        records.write_jsonl(member.out, [])
    member.failed.unlink(missing_ok=True)
    _say(f"movebench: {task.family} {member.where}: not run: {why}")


@dataclasses.dataclass
class Attempt:
    """One run of a launch's kernel: what ran, how it ended, and what else used the host's CPUs meanwhile."""

    argv: list[str]
    run: "_Run | None"
    rc: int | None
    reason: str | None
    started: float
    ended: float
    overlapped: list
    leftovers: list
    load: dict | None
    #: the order its points were measured in (their `where`)
    order: list = dataclasses.field(default_factory=list)
    #: per point (`where`): CPUs other processes kept busy while its repetitions ran (kernel_start to kernel_end)
    measuring: dict = dataclasses.field(default_factory=dict)
    #: the point (`where`) that ran past campaign.timeout, when the launch was stopped on it
    timed_out: str | None = None

    def load_of(self, member: "Member") -> dict | None:
        """The launch's load, with `other_cpus` the load while this member measured when its window is known."""
        if self.load is None:
            return None
        window = self.measuring.get(member.where)
        if window is None:
            return self.load
        return {**self.load, "launch_other_cpus": self.load.get("other_cpus"), "other_cpus": round(window, 3)}


def _measuring_windows(to_run, sampler) -> dict:
    """Each member's load while its repetitions ran, from the kernel_start and kernel_end of its meta."""
    out = {}
    for member, _ in to_run:
        try:
            meta = json.loads(member.tmp("meta").read_text())
        except (OSError, ValueError):
            continue
        if meta.get("kernel_start") and meta.get("kernel_end"):
            window = sampler.window(meta["kernel_start"], meta["kernel_end"])
            if window is not None:
                out[member.where] = window
    return out


def _measure(to_run, name, members, args, runtime, env, task_path, signals) -> Attempt:
    """The kernel of `to_run`'s points run once, its load on the host measured around it."""
    with _writing(task_path):
        if name:
            kernel_tasks = [dataclasses.replace(task, out=str(m.tmp("out")), meta=str(m.tmp("meta")))
                            for m, task in to_run]
            records.write_text(task_path, json.dumps({"group": [t.to_dict() for t in kernel_tasks],
                                                      "name": name}, indent=2) + "\n")
            argv = runtime.group_command(kernel_tasks, task_path, args.launcher)
        else:
            member, task = to_run[0]
            kernel_task = write_task(task, task_path, member.tmp("out"), member.tmp("meta"))
            argv = runtime.command(kernel_task, task_path, args.launcher)
    _say("movebench: " + shlex.join(argv))
    first = to_run[0][1]
    running = machine.RunningPoints()
    # `running`: what this launch runs, a point's path or its launch group's name
    running.enter({"campaign": args.campaign, "family": first.family,
                   "running": name or families.point_path(first.point), "results": str(members[0].out.parent)})
    # the snakemake that started this launch is the campaign's, not outside load
    load = envinfo.HostLoad({"snakemake": signals.starter.pid})
    with hold.held(first.family, [task.point for _, task in to_run]) as services:
        started = time.time()
        reason, rc, sampler = None, None, None
        watch = runtime.watch()
        try:
            if signals.name:
                raise InterruptedError  # before the kernel started: no kernel to start, and none to stop
            run = _Run(argv, env, watch)
            watch.started(run.proc.pid)
            ours = [os.getpid(), signals.starter.pid, *getattr(services, "pids", [])]
            sampler = envinfo.LoadSampler(lambda: descendants(run.proc.pid) + [p for p in ours if p])
        except InterruptedError:
            run, reason = None, f"interrupted ({signals.name})"
        except OSError as exc:
            run, reason = None, f"could not start {argv[0]!r}: {exc.strerror or exc}"
        finished, timed_out = _Finished([m.tmp("out") for m, _ in to_run]), None
        if run is not None:
            rc, reason = _wait(run, args.timeout, signals, before_stop=watch.look, finished=finished)
            if reason is not None and reason.startswith("timed out") and finished.count < len(to_run):
                timed_out = to_run[finished.count][0].where  # the point that was running: the next after those done
            run.reader.join(timeout=5)
            for line in watch.summary_lines():
                _say(line)
        ended = time.time()
        if sampler is not None:
            sampler.stop()
    host_load = load.finish({"services": services.cpu_seconds()})
    overlapped = running.leave()
    leftovers = watch.finish()
    if leftovers:
        _say(f"movebench: removed {len(leftovers)} shared-memory segment(s) the job left: {', '.join(leftovers)}")
    measuring = _measuring_windows(to_run, sampler) if sampler is not None else {}
    return Attempt(argv, run, rc, reason, started, ended, overlapped, leftovers, host_load,
                   [m.where for m, _ in to_run], measuring, timed_out)


#: The defaults of `campaign.disturbed` (schemas/config.schema.yaml says why these values).
DISTURBED_DEFAULTS = {"other_cpus": 0.1, "retries": 1, "retry_budget_s": 120.0}
DISTURBED_ENV = "MOVEBENCH_DISTURBED"


@dataclasses.dataclass
class DisturbedPolicy:
    """When a launch counts as disturbed (other processes kept more than `other_cpus` CPUs busy on average while
    it ran), and whether it may run again: at most `retries` times, while the campaign's retries together stay
    within `retry_budget_s` of launch time (a ledger file beside the results, shared by its launches)."""

    other_cpus: float = DISTURBED_DEFAULTS["other_cpus"]
    retries: int = DISTURBED_DEFAULTS["retries"]
    retry_budget_s: float = DISTURBED_DEFAULTS["retry_budget_s"]
    ledger: str | None = None
    #: a pause before the retry, so that a load that comes and goes (a cron job, a compile) may pass
    pause_s: float = 2.0

    @classmethod
    def from_env(cls) -> "DisturbedPolicy":
        try:
            given = json.loads(os.environ.get(DISTURBED_ENV) or "{}")
        except json.JSONDecodeError:
            given = {}
        return cls(**{k: v for k, v in given.items() if k in {f.name for f in dataclasses.fields(cls)}})

    def disturbed(self, load: dict | None) -> str | None:
        """Why a launch under `load` is disturbed, or None."""
        if not load or load.get("other_cpus") is None or load["other_cpus"] <= self.other_cpus:
            return None
        return (f"other processes kept {load['other_cpus']:.2f} CPUs busy on average while it ran (threshold "
                f"{self.other_cpus:g}; the campaign itself {load.get('campaign_cpus', 0):.2f})")

    def spent(self) -> float:
        if not self.ledger:
            return 0.0
        try:
            return sum(float(line) for line in Path(self.ledger).read_text().split())
        except (OSError, ValueError):
            return 0.0

    def grant(self, done: int, seconds: float) -> float | None:
        """The pause before a retry of a launch that took `seconds`, after `done` retries; None when none is left.
        The retry's cost is booked in the ledger now, so that the next launch sees it."""
        if done >= self.retries or self.spent() + seconds > self.retry_budget_s:
            return None
        if self.ledger:
            with contextlib.suppress(OSError), open(self.ledger, "a") as ledger:
                ledger.write(f"{seconds + self.pause_s:.3f}\n")
        return self.pause_s

    def why_not(self, done: int) -> str:
        if done >= self.retries:
            return f"campaign.disturbed.retries {self.retries} used"
        return f"the campaign's retries spent {self.spent():.0f} s of campaign.disturbed.retry_budget_s " \
               f"{self.retry_budget_s:g}"


def _run_launch(members: list[Member], name: str | None, args, signals: _Signals) -> int:
    """Measure `members` in one launch (a launch group when `name` is set), each point's outcome its own."""
    family = members[0].task.family
    runtime = launchers.runtime(members[0].task)
    label = f"launch group {name}" if name else members[0].where
    for member in members:
        member.out.parent.mkdir(parents=True, exist_ok=True)
    task_path = members[0].out.with_name(f".{members[0].out.name}.{os.getpid()}.task.json")
    to_run: list[tuple[Member, Task]] = []
    done: list[Member] = []
    try:
        for member in members:
            if keep.restore(member):
                _say(f"movebench: {family} {member.where}: finished in an earlier run that was not booked (its "
                     "launch group failed, or its snakemake ended): kept, not measured again")
                done.append(member)
                continue
            enough, repetitions = adaptive_launch(member.task, member.out, member.where)
            if enough:
                _skip(member, enough, args)
                done.append(member)
                continue
            task = member.task
            if repetitions is not None and repetitions != task.repetitions:
                _say(f"movebench: {family} {member.where}: {repetitions} repetitions in this launch (of "
                     f"{task.repetitions}): more launches buy more precision than repetitions here (Kalibera and "
                     "Jones)")
                task = dataclasses.replace(task, repetitions=repetitions)
            to_run.append((member, task))
        if not to_run:
            for member in done:
                keep.forget(member)
            return 0
        if name:
            # A point's place in its group's launch moves from launch to launch, so that what the launch's
            # start leaves behind (warm caches, a fresh DDict) falls on every member alike.
            seed = os.environ.get("MOVEBENCH_LAUNCH_ORDER_SEED", "0")
            random.Random(f"{seed}/{family}/{name}").shuffle(to_run)
        try:
            runtime.prepare(to_run[0][1], say=_say)
        except launchers.CannotStart as exc:
            for member, task in to_run:
                _write_failure(member, task, str(exc), args)
            _failed(f"movebench: {family} {label} FAILED: {exc}")
            return 1
        env, allocation = runtime.environment(to_run[0][1], os.environ), None
        if "SLURM_JOB_ID" in env:
            from movebench.engine import cluster  # Slurm's helpers: a local point need not import them

            env, allocation = cluster.job_environment(env)
        policy = DisturbedPolicy.from_env()
        attempts: dict[str, Attempt] = {}  # each member's last attempt
        earlier: dict[str, list[dict]] = {m.where: [] for m, _ in to_run}  # its disturbed attempts measured again
        pending, retries = to_run, 0
        while True:
            attempt = _measure(pending, name, members, args, runtime, env, task_path, signals)
            attempts.update({m.where: attempt for m, _ in pending})
            if attempt.reason is not None or attempt.rc != 0 or signals.stopped():
                break
            # only the points whose own repetitions met the load are measured again, in a launch of their own
            hit = [(m, t) for m, t in pending if policy.disturbed(attempt.load_of(m))]
            if not hit:
                break
            worst = max(attempt.load_of(m)["other_cpus"] for m, _ in hit)
            what = f"{len(hit)} of {len(pending)} points" if name else "its repetitions"
            granted = policy.grant(retries, (attempt.ended - attempt.started) * len(hit) / len(pending))
            if granted is None:
                _say(f"movebench: {family} {label}: DISTURBED: other processes kept up to {worst:.2f} CPUs busy "
                     f"while {what} measured (threshold {policy.other_cpus:g}); kept, marked disturbed (no retry "
                     f"left: {policy.why_not(retries)})", sys.stderr)
                break
            _say(f"movebench: {family} {label}: DISTURBED: other processes kept up to {worst:.2f} CPUs busy while "
                 f"{what} measured (threshold {policy.other_cpus:g}); measuring {'them' if name else 'it'} again "
                 f"after {granted:g} s (retry {retries + 1} of {policy.retries})", sys.stderr)
            time.sleep(granted)
            if signals.stopped():
                break  # the disturbed measurements are kept: a stop must not cost a finished measurement
            for member, _ in hit:
                earlier[member.where].append({"start": attempt.started, "end": attempt.ended,
                                              "host_load": attempt.load_of(member)})
                for leftover in (member.tmp("out"), member.tmp("meta")):
                    leftover.unlink(missing_ok=True)
            pending, retries = hit, retries + 1
        argv, run, rc, reason = attempt.argv, attempt.run, attempt.rc, attempt.reason
        if reason is None and rc != 0:
            reason = f"kernel exited with status {rc}{_signal_of(rc)}"
            if any(marker in line for line in (run.tail if run else ()) for marker in
                   ("No space left on device", "Errno 28", "Disk quota exceeded", "cannot write the records")):
                reason += f" (no space left on a device: {_fullest(members[0].out.parent, to_run[0][1].settings)})"
            elif said := families.load(family).failure_reason(list(run.tail) if run else []):
                reason += f" ({said})"
        failures = 0
        for member, task in to_run:
            mine = attempts[member.where]
            argv, run, rc, started, ended = mine.argv, mine.run, mine.rc, mine.started, mine.ended
            member_reason = mine.reason if mine is not attempt else reason
            if mine.timed_out and mine.order.index(member.where) > mine.order.index(mine.timed_out):
                # not "timed out": the report counts those as points stopped on their limit, and this one never ran
                member_reason = (f"never started: point {mine.timed_out}, before it in its launch group, ran past "
                                 f"campaign.timeout ({args.timeout:g} s) and the launch was stopped")
            why, recs = _outcome(member, member_reason)
            member_load = mine.load_of(member)
            common = {"overlapped_with": mine.overlapped, "shm_segments_removed": mine.leftovers,
                      "host_load": member_load, "disturbed": bool(policy.disturbed(member_load)),
                      "disturbed_threshold": policy.other_cpus, "disturbed_attempts": earlier[member.where]}
            if name:
                common["launch_group"] = {"name": name, "size": len(members), "order": mine.order,
                                          "position": mine.order.index(member.where)}
            if why is None:
                # Finished: recorded even when an interrupt or a later member's failure came after it.
                meta = json.loads(member.tmp("meta").read_text()) if member.tmp("meta").exists() else {}
                meta.update(launch_start=started, launch_end=ended, launch_wall_s=ended - started,
                            launcher=args.launcher, command=shlex.join(argv), config_hash=args.config_hash,
                            campaign=args.campaign, task=task.to_dict(), launch=task.launch, launches=task.launches,
                            launch_order_seed=_int_or_none(os.environ.get("MOVEBENCH_LAUNCH_ORDER_SEED")), **common)
                added, lines = run.watch.meta(task, meta)
                meta.update(added)
                for line in lines:
                    _say(f"movebench: {family} {member.where}: FELL BACK: {line}", sys.stderr)
                if allocation is not None:
                    meta["allocation"] = allocation
                if args.sources:
                    meta["launched_as"] = launch_digest(member.task, args.sources)
                with _writing(member.meta):
                    records.write_json(member.meta, meta)
                os.replace(member.tmp("out"), member.out)
                member.failed.unlink(missing_ok=True)
                if name:  # a later member may still fail the group's job: Snakemake would delete this one's files
                    keep.keep(member)
                done.append(member)
                _say(f"movebench: {family} {member.where}: {len(recs)} records in {ended - started:.1f} s"
                     + (f" (launch group {name}, {len(to_run)} points)" if name else ""))
                continue
            failures += 1
            _write_failure(member, task, why, args,
                           ran={"returncode": rc, "start": started, "end": ended, "command": shlex.join(argv),
                                "log_tail": list(run.tail) if run else []},
                           measured={"records": recs, **common})
            _failed(f"movebench: {family} {member.where} FAILED: {why}")
        if failures:
            if name and done:
                _say(f"movebench: {family} launch group {name}: {len(done)} of {len(members)} points finished and "
                     "are kept for the rerun, which measures only the others", sys.stderr)
            return 1
        if signals.starter.gone(force=True):
            # Snakemake ended while this launch ran: it will rerun the job (its outputs are marked incomplete), and
            # the rerun finds these points here instead of measuring them twice.
            for member in done:
                keep.keep(member)
            _say(f"movebench: {family} {label}: finished after the snakemake that started it ended; kept for its "
                 "rerun, which will not measure it again", sys.stderr)
            return 0
        for member in done:
            keep.forget(member)
        return 0
    finally:
        for member, _ in to_run:
            for leftover in (member.tmp("out"), member.tmp("meta")):
                leftover.unlink(missing_ok=True)
        task_path.unlink(missing_ok=True)


def _write_failure(member: Member, task: Task, why: str, args, ran: dict | None = None,
                   measured: dict | None = None) -> None:
    """The member's failure record: the point, why it failed, how its kernel ran (`ran`: none when no kernel
    started) and what it measured before it failed."""
    with _writing(member.failed):
        records.write_json(member.failed, {
            "family": task.family, "point_path": families.point_path(task.point), "launch": task.launch,
            **task.point, "ok": False, "error": why, **(ran or {}), "config_hash": args.config_hash,
            **(measured or {})})


def _outcome(member: Member, reason: str | None) -> tuple[str | None, list[dict]]:
    """(why the member failed or None, its records): a member whose kernel wrote ok records finished, whatever
    ended the launch after it."""
    try:
        recs = records.read_jsonl(member.tmp("out"))
    except FileNotFoundError:
        return reason or ("the kernel wrote no records for this point (it ended before the point ran, or the "
                          "point raised: see the log)"), []
    except (OSError, json.JSONDecodeError) as exc:
        return reason or f"kernel wrote no readable records: {exc}", []
    if reason is not None and not member.tmp("meta").exists():
        return reason, recs
    bad = [r for r in recs if not r.get("ok", False)]
    if bad:
        return f"{len(bad)} of {len(recs)} repetitions failed: {bad[0].get('error')}", recs
    if reason is not None and len(recs) == 0:
        return reason, recs
    return None, recs


def _group(text: str) -> tuple[list[Task], str]:
    """A launch group as JSON, or @path of a file holding it: (its tasks, its name)."""
    try:
        data = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        tasks = [Task.from_dict(t) for t in data["group"]]
    except (OSError, json.JSONDecodeError, ValueError, KeyError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"not a launch group: {exc}") from None
    if not tasks or len({t.family for t in tasks}) != 1:
        raise argparse.ArgumentTypeError("a launch group holds one family's tasks, at least one")
    return tasks, str(data.get("name") or "group")


def _task(text: str) -> Task:
    """The task as JSON, or @path of a file holding it."""
    try:
        return Task.from_dict(json.loads(Path(text[1:]).read_text() if text.startswith("@") else text))
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"not a task: {exc}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m movebench.engine.launch", description=__doc__.split("\n\n")[0])
    one = p.add_mutually_exclusive_group(required=True)
    one.add_argument("--task", type=_task,
                     help="the point's task as JSON (or @FILE): family, variant, point, settings, repetitions, "
                          "warmups, ranks, nodes")
    one.add_argument("--group", type=_group,
                     help='a launch group as JSON (or @FILE): {"name": ..., "group": [task, ...]}, its points run in '
                          "one launch; each writes the --records and --metas path of its place")
    p.add_argument("--launcher", default="mpiexec",
                   help="MPI launcher; may contain {ranks} and {nodes}, else '-n <ranks>' is appended")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a point may run before it is killed (campaign.timeout); with --group each point's, "
                        "from the launch's start for the first and from the previous point's finish for each next")
    p.add_argument("--out", help="the point's records (.jsonl); with --task")
    p.add_argument("--meta", help="the point's meta (.meta.json); with --task")
    p.add_argument("--failed", required=True,
                   help="where a failure record goes (with --group: the folder of the families' failure records)")
    p.add_argument("--records", nargs="+", help="with --group: each point's records (.jsonl), in the group's order")
    p.add_argument("--metas", nargs="+", help="with --group: each point's meta (.meta.json), in the group's order")
    p.add_argument("--kept", help="where finished points wait for a rerun that will book them (a failed launch group, "
                        "a snakemake that ended meanwhile)")
    p.add_argument("--sources", help="the digest of the kernel's sources (the workflow's): with the task, what the "
                   "meta's `launched_as` says the launch was measured as")
    p.add_argument("--log", help="the point's log: launch's and the kernel's output go there, and a failure's one "
                                 "line (naming this log) to stderr too")
    p.add_argument("--config-hash", default=os.environ.get("MOVEBENCH_CONFIG_HASH"),
                   help="hash of the campaign config, for the meta (default: $MOVEBENCH_CONFIG_HASH)")
    p.add_argument("--campaign", default=os.environ.get("MOVEBENCH_CAMPAIGN"),
                   help="campaign name, for the meta (default: $MOVEBENCH_CAMPAIGN)")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.task is not None and not (args.out and args.meta):
        p.error("--task needs --out and --meta")
    if args.group is not None and not (args.records and args.metas and
                                       len(args.records) == len(args.metas) == len(args.group[0])):
        p.error("--group needs --records and --metas, one of each per point of the group")
    if args.log:
        _open_log(args.log)
    return run_point(args)


if __name__ == "__main__":
    sys.exit(main())
