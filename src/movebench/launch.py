"""Run one benchmark point: launcher, timeout, atomic results, a failure record.

Called by every point rule. The kernel writes to temporary files; only when it
exits 0 within the timeout and its records say ok are they renamed to the
rule's outputs. Otherwise a failure record goes to `--failed` (outside
Snakemake's outputs, so Snakemake's clean-up of a failed job keeps it for the
report) and the exit status is non-zero, so that a rerun redoes the point.
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

from movebench import cluster
from movebench import family as families
from movebench.core import records

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


def kernel_command(fam: families.Family, launcher: str, ranks: int, nodes: int, kernel_args: list[str]) -> list[str]:
    python = [sys.executable, "-m", f"movebench.{fam.name}", *kernel_args]
    if fam.launcher == "mpi":
        return launcher_command(launcher, ranks, nodes) + python
    return fam.launch_command(python, nodes)


class _Run:
    """A kernel in its own process group, its output copied to ours and its tail kept."""

    def __init__(self, argv, env):
        self.tail = collections.deque(maxlen=LOG_TAIL_LINES)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", start_new_session=True, env=env)
        self.reader = threading.Thread(target=self._copy, daemon=True)
        self.reader.start()

    def _copy(self):
        for line in self.proc.stdout:
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
    fam = families.load(args.family)
    point = families.parse_point_path(args.point)
    out, meta_out, failed = Path(args.out), Path(args.meta), Path(args.failed)
    tmp_out = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp_meta = meta_out.with_name(f".{meta_out.name}.{os.getpid()}.tmp")
    kernel_args = shlex.split(args.kernel_args) + ["--repetitions", str(args.repetitions),
                                                   "--warmups", str(args.warmups),
                                                   "--out", str(tmp_out), "--meta", str(tmp_meta)]
    argv = kernel_command(fam, args.launcher, args.ranks, args.nodes, kernel_args)
    print("movebench: " + shlex.join(argv), flush=True)
    started = time.time()
    reason, rc = None, None
    env = os.environ.copy()
    # Under Snakemake's slurm executor the job step hid the allocation's nodes: dragon and Hydra need them.
    env.update(cluster.allocation_env(env))
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
                        campaign=args.campaign)
            records.write_json(meta_out, meta)
            os.replace(tmp_out, out)
            failed.unlink(missing_ok=True)
            print(f"movebench: {args.family} {args.point}: {len(recs)} records in {ended - started:.1f} s", flush=True)
            return 0
        records.write_json(failed, {
            "family": args.family, "point": args.point, **point, "ok": False, "error": reason,
            "returncode": rc, "start": started, "end": ended, "command": shlex.join(argv),
            "log_tail": list(run.tail) if run else [], "config_hash": args.config_hash, "records": recs})
        print(f"movebench: {args.family} {args.point} FAILED: {reason}", file=sys.stderr, flush=True)
        return 1
    finally:
        tmp_out.unlink(missing_ok=True)
        tmp_meta.unlink(missing_ok=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m movebench.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", required=True)
    p.add_argument("--point", required=True, help="the point's path, key~value/...")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--launcher", default="mpiexec",
                   help="MPI launcher; may contain {ranks} and {nodes}, else '-n <ranks>' is appended")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the point is killed")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--warmups", type=int, default=2)
    p.add_argument("--kernel-args", default="", help="the family kernel's own arguments, one shell string")
    p.add_argument("--out", required=True)
    p.add_argument("--meta", required=True)
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
