"""Run one benchmark point: launcher, timeout, atomic results, a failure record.

Called by every point rule with the point's task as JSON (the family, the point, the kernel's
settings, repetitions, warm-ups, ranks and nodes: see movebench.runner). The kernel writes to
temporary files; only when it exits 0 within the timeout and its records say ok are they renamed
to the rule's outputs. Otherwise a failure record goes to `--failed` (outside Snakemake's outputs,
so Snakemake's clean-up of a failed job keeps it for the report) and the exit status is non-zero,
so that a rerun redoes the point.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from movebench import cluster, families
from movebench.core import records
from movebench.core.transport import TransportLog, probe_env

GRACE_S = 10
LOG_TAIL_LINES = 40


def launcher_command(launcher: str, ranks: int, nodes: int) -> list[str]:
    """`launcher` may place {ranks} and {nodes} itself ("srun -N {nodes} -n {ranks}"); else `-n ranks` follows.

    A bare program name is looked up beside this Python first: the mpich wheel puts its
    mpiexec there, and it must match the MPI library mpi4py loads.
    """
    if "{ranks}" in launcher or "{nodes}" in launcher:
        argv = shlex.split(launcher.format(ranks=ranks, nodes=nodes))
    else:
        argv = shlex.split(launcher) + ["-n", str(ranks)]
    if "/" not in argv[0] and Path(sys.executable).with_name(argv[0]).exists():
        argv[0] = str(Path(sys.executable).with_name(argv[0]))
    return argv


def kernel_command(task: dict, task_path, launcher: str = "mpiexec") -> list[str]:
    """The command that runs a point's kernel on its task file: the one place that builds it."""
    fam = families.load(task["family"])
    python = [sys.executable, "-m", f"movebench.families.{fam.name}.kernel", str(task_path)]
    if fam.launcher == "mpi":
        return launcher_command(launcher, task["ranks"], task["nodes"]) + python
    return fam.launch_command(python, task)


def write_task(task: dict, path, out, meta) -> dict:
    """The kernel's task file: the point's task and where the kernel writes its records and meta."""
    kernel_task = {**task, "out": str(out), "meta": str(meta)}
    # Not sorted: the point's keys keep their order, the order of its path and of its records' columns.
    records.write_text(path, json.dumps(kernel_task, indent=2) + "\n")
    return kernel_task


def run_kernel(task: dict, folder, launcher: str = "mpiexec", timeout: float = 600, env=None):
    """A task's kernel alone, without the point's bookkeeping (for benchmarks and tests).

    Returns (completed process, records or None, meta or None); the files stay in `folder`.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out, meta, task_path = folder / "records.jsonl", folder / "meta.json", folder / "task.json"
    for old in (out, meta):
        old.unlink(missing_ok=True)
    argv = kernel_command(write_task(task, task_path, out, meta), task_path, launcher)
    mpi = families.load(task["family"]).launcher == "mpi"
    env = dict(os.environ if env is None else env)
    if mpi:
        env.update(probe_env(env))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    recs = records.read_jsonl(out) if out.exists() else None
    kernel_meta = json.loads(meta.read_text()) if meta.exists() else None
    if mpi and kernel_meta is not None:
        transport = TransportLog()
        for line in (proc.stdout + proc.stderr).splitlines():
            transport.feed(line)
        kernel_meta["transport"] = transport.summary()
    return proc, recs, kernel_meta


def make_task(family: str, point: dict, settings: dict, repetitions: int = 5, warmups: int = 2) -> dict:
    """A point's task as the workflow builds it (movebench.config.tasks), for a point given by hand."""
    fam = families.load(family)
    ranks, nodes = fam.placement(point)
    return {"family": family, "variant": point[fam.variant], "point": point, "settings": settings,
            "repetitions": repetitions, "warmups": warmups, "ranks": ranks, "nodes": nodes}


class _Run:
    """A kernel in its own process group, its output copied to ours (less the transport reports) and its tail kept."""

    def __init__(self, argv, env):
        self.tail = collections.deque(maxlen=LOG_TAIL_LINES)
        self.transport = TransportLog()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", start_new_session=True, env=env)
        self.reader = threading.Thread(target=self._copy, daemon=True)
        self.reader.start()

    def _copy(self):
        for line in self.proc.stdout:
            if self.transport.feed(line):
                continue
            sys.stdout.write(line)
            sys.stdout.flush()
            self.tail.append(line.rstrip("\n"))

    def stop(self):
        """INT, then KILL after a grace period, to the whole group: mpiexec and every rank."""
        stop_group(self.proc, GRACE_S)


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGINT to `proc`'s process group, then SIGKILL if it has not ended within `grace` seconds."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_point(args) -> int:
    task = args.task
    family, point = task["family"], task["point"]
    where = families.point_path(point)
    out, meta_out, failed = Path(args.out), Path(args.meta), Path(args.failed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp_meta = meta_out.with_name(f".{meta_out.name}.{os.getpid()}.tmp")
    task_path = out.with_name(f".{out.name}.{os.getpid()}.task.json")
    kernel_task = write_task(task, task_path, tmp_out, tmp_meta)
    argv = kernel_command(kernel_task, task_path, args.launcher)
    print("movebench: " + shlex.join(argv), flush=True)
    started = time.time()
    reason, rc = None, None
    env = os.environ.copy()
    # Under Snakemake's slurm executor the job step hid the allocation's nodes: dragon and Hydra need them.
    env.update(cluster.allocation_env(env))
    mpi = families.load(family).launcher == "mpi"
    if mpi:
        env.update(probe_env(env))  # the MPI libraries say which transport they chose (core/transport.py)
    try:
        run = _Run(argv, env)
    except OSError as exc:
        run, reason = None, f"could not start {argv[0]!r}: {exc.strerror or exc}"

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    if run is not None:
        try:
            try:
                rc = run.proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                run.stop()
                rc = run.proc.returncode
                reason = f"timed out after {args.timeout:g} s (campaign.timeout)"
        except KeyboardInterrupt as exc:
            run.stop()
            rc = run.proc.returncode
            reason = f"interrupted ({exc.args[0] if exc.args else 'SIGINT'})"
        run.reader.join(timeout=5)
        for line in run.transport.log_lines():
            print(line, flush=True)
    ended = time.time()
    recs = []
    if reason is None and rc != 0:
        reason = f"kernel exited with status {rc}"
    if reason is None:
        try:
            recs = records.read_jsonl(tmp_out)
        except (OSError, json.JSONDecodeError) as exc:
            reason = f"kernel wrote no readable records: {exc}"
    if reason is None:
        bad = [r for r in recs if not r.get("ok", False)]
        if bad:
            reason = f"{len(bad)} of {len(recs)} repetitions failed: {bad[0].get('error')}"
    try:
        if reason is None:
            meta = json.loads(tmp_meta.read_text()) if tmp_meta.exists() else {}
            meta.update(launch_start=started, launch_end=ended, launch_wall_s=ended - started,
                        launcher=args.launcher, command=shlex.join(argv), config_hash=args.config_hash,
                        campaign=args.campaign, task={k: v for k, v in task.items() if k not in ("out", "meta")})
            if mpi:
                meta["transport"] = run.transport.summary()
            records.write_json(meta_out, meta)
            os.replace(tmp_out, out)
            failed.unlink(missing_ok=True)
            print(f"movebench: {family} {where}: {len(recs)} records in {ended - started:.1f} s", flush=True)
            return 0
        records.write_json(failed, {
            "family": family, "point": where, **point, "ok": False, "error": reason,
            "returncode": rc, "start": started, "end": ended, "command": shlex.join(argv),
            "log_tail": list(run.tail) if run else [], "config_hash": args.config_hash, "records": recs})
        print(f"movebench: {family} {where} FAILED: {reason}", file=sys.stderr, flush=True)
        return 1
    finally:
        for leftover in (tmp_out, tmp_meta, task_path):
            leftover.unlink(missing_ok=True)


def _task(text: str) -> dict:
    """The task as JSON, or @path of a file holding it."""
    try:
        task = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
    except (OSError, json.JSONDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"not a task: {exc}") from None
    missing = [k for k in ("family", "variant", "point", "settings", "repetitions", "warmups", "ranks", "nodes")
               if k not in task]
    if missing:
        raise argparse.ArgumentTypeError(f"the task lacks {', '.join(missing)}")
    return task


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
