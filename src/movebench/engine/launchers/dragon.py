"""Run one program under the `dragon` launcher and leave nothing of it behind.

    python -m movebench.engine.launchers.dragon [--meta M.json] [--shm-bytes N] [--env K=V] [--timeout S] \
        -- dragon -s PROG ...

Why a wrapper, and not `dragon` straight from `movebench.engine.launch`:

- Dragon's local services call `setpgid(0, 0)` at start-up. In a process that
  leads its own session (which is what `launch` makes of every kernel, so that it
  can kill the kernel's process group) that call fails with EPERM, the
  local-services thread dies, and the launcher waits for it forever. Here
  `dragon` is started as a child in a process group of its own, never a session
  leader.
- Because Dragon moves itself into its own process group, the group that
  `launch` kills on a timeout does not hold it. This wrapper forwards SIGINT and
  SIGTERM to Dragon's group, gives it `--grace` seconds, then SIGKILLs the group
  (a failing head script can leave Dragon deaf to SIGINT). The grace stays below
  `launch`'s own 10 s between its INT and its KILL, so the clean-up below runs.
- After Dragon ends, however it ended, the processes of this run still alive are
  killed by PID (every PID seen in Dragon's process group while it ran, checked
  against its start time so that a reused PID is left alone) and the /dev/shm
  segments of this run are removed by name: those that appeared during the run
  and name one of the run's PIDs (Dragon names its pools `_dragon_<user>_<pid>_...`
  and `_dragon_dragon_dict_pool__<pid>_<puid>_<user><pid>_...`), or that name only
  processes no longer alive (a short-lived process of the run). `dragon-cleanup` is
  never used: it removes every Dragon and MPI segment of the user, other jobs' too.
- /dev/shm is checked before launch: with too little room Dragon hangs when it
  touches its pools instead of failing, so a shortfall is refused with a message.

- Then every node of the run is swept (`sweep`): the run's processes are found by the
  run's scratch path, which every process of the run carries in its environment
  (`MOVEBENCH_SCRATCH`, exported by Dragon's `srun` to its back ends and inherited from
  them; Dragon's processes leave the launcher's process group, so the group alone misses
  most of them), given `--grace` seconds to exit, the rest killed by PID, and the /dev/shm
  segments that name one of them or only dead processes removed. On one node the sweep
  runs here; on more (`--nodes N`, in a Slurm allocation) the other nodes' processes and
  /dev/shm are out of this process's sight, so one `srun --overlap` task per node runs
  `--sweep` there. Dragon's own clean-up after an abnormal exit goes through SSH, which a
  cluster without passwordless SSH between nodes refuses.

With `--meta`, the launch timings and what had to be cleaned up (per node, when swept)
are merged into that JSON file (when the program wrote it) under the key `dragon_launch`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from movebench.core.task import Task
from movebench.engine.launchers import Runtime
from movebench.engine.launchers.process import stop_group
from movebench.families import load as family_of

SHM = Path("/dev/shm")
GRACE_S = 4.0
POLL_S = 0.5
SCRATCH_ENV = "MOVEBENCH_SCRATCH"
LAUNCH_T0_ENV = "MOVEBENCH_DRAGON_T0"


class ShmTooSmall(RuntimeError):
    pass


def shm_free_bytes(shm: Path = SHM) -> int:
    st = os.statvfs(shm)
    return st.f_bavail * st.f_frsize


def check_shm(needed: int, shm: Path = SHM, sized_by: str = "") -> None:
    """Refuse to launch when /dev/shm has less room than the run's pools may touch. `sized_by`: the family's setting
    that sizes them (its runtime option `shm_sized_by`), named in the advice."""
    free = shm_free_bytes(shm)
    if needed > free:
        knobs = ", ".join(filter(None, [sized_by, "DRAGON_DEFAULT_SEG_SZ"]))
        raise ShmTooSmall(f"{shm} has {free / 2**30:.2f} GiB free but this Dragon run may use {needed / 2**30:.2f} "
                          f"GiB (the program's pools + Dragon's default and infrastructure segments): lower {knobs} "
                          f"or DRAGON_INF_SEG_SZ, or give {shm} more room")


def _stat(pid: int):
    """(pgid, start time in clock ticks) of a live process, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[2]), int(fields[19])


def group_members(pgid: int) -> dict[int, int]:
    """PID -> start time of every process in process group `pgid`."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st and st[0] == pgid:
                found[int(entry.name)] = st[1]
    return found


def shm_names(shm: Path = SHM) -> set[str]:
    uid = os.getuid()
    names = set()
    try:
        with os.scandir(shm) as it:
            for entry in it:
                try:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        names.add(entry.name)
                except FileNotFoundError:
                    continue
    except FileNotFoundError:
        pass
    return names


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 4194304


def named_pids(name: str, user: str | None = None) -> set[int]:
    """The process IDs a Dragon segment name holds: fields that are a PID, or the user's name then a PID."""
    user = user if user is not None else os.environ.get("USER", str(os.getuid()))
    found = set()
    for field in re.split(r"_+", name):
        for text in (field, field[len(user):] if field.startswith(user) else ""):
            if len(text) >= 2 and text.isdigit() and 1 < int(text) <= _pid_max():
                found.add(int(text))
    return found


def run_segments(names, pids, user: str | None = None, alive=None) -> list[str]:
    """The names among `names` (new since the launch) that are Dragon segments of this run.

    A segment is the run's when it names one of the run's PIDs, or when no process
    it names is alive any more (a short-lived process of the run can come and go
    between two looks at the process group, and a live run elsewhere names live
    processes).
    """
    alive = alive or (lambda pid: Path(f"/proc/{pid}").exists())
    ours = []
    for name in sorted(names):
        if not name.startswith("_dragon_"):
            continue
        named = named_pids(name, user)
        if named & set(pids) or (named and not any(alive(p) for p in named)):
            ours.append(name)
    return ours


class DragonRun:
    """`dragon` in a process group of its own, watched, stopped and cleaned up."""

    def __init__(self, argv, env=None, shm: Path = SHM):
        self.argv, self.shm = argv, shm
        self.shm_before = shm_names(shm)
        self.seen: dict[int, int] = {}
        self.start = time.time()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env, process_group=0)
        self.seen[self.proc.pid] = (_stat(self.proc.pid) or (0, 0))[1]

    def watch(self):
        self.seen.update(group_members(self.proc.pid))

    def wait(self, timeout=None) -> int | None:
        """Dragon's exit status, or None when `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.watch()
            try:
                return self.proc.wait(POLL_S)
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    return None

    def stop(self, grace=GRACE_S) -> None:
        """SIGINT to Dragon's group, then SIGKILL if it has not ended within `grace` seconds."""
        self.watch()
        stop_group(self.proc, grace)

    def cleanup(self) -> dict:
        """Kill what is left of the run by PID and remove its /dev/shm segments by name."""
        self.watch()
        killed = []
        for pid, started in self.seen.items():
            st = _stat(pid)
            if st and st[1] == started and pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        if self.proc.returncode is None:
            self.proc.wait()
        for pid in killed:
            _reap(pid)
        removed = []
        for name in run_segments(shm_names(self.shm) - self.shm_before, self.seen):
            try:
                (self.shm / name).unlink()
                removed.append(name)
            except FileNotFoundError:
                pass
        return {"killed_pids": killed, "removed_segments": removed}


def _reap(pid, timeout=2.0):
    """Wait until a killed process is gone (a zombie child of someone else counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = Path(f"/proc/{pid}/stat")
        try:
            text = st.read_text()
        except OSError:
            return
        if text[text.rindex(")") + 2] == "Z":
            return
        time.sleep(0.05)


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _same_node(pid: int) -> bool:
    """In this process's network namespace: where several nodes are namespaces of one machine (the test
    cluster), /proc shows every node's processes."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def marked_processes(scratch: str) -> dict[int, int]:
    """PID -> start time of this node's processes whose environment carries the run's scratch path."""
    entry = f"{SCRATCH_ENV}={scratch}".encode()
    found = {}
    for proc in os.scandir("/proc"):
        if proc.name.isdigit() and (pid := int(proc.name)) != os.getpid():
            if _environ_has(pid, entry) and _same_node(pid) and (st := _stat(pid)):
                found[pid] = st[1]
    return found


def sweep(scratch: str, grace: float = GRACE_S, shm: Path = SHM) -> dict:
    """What is left of the run on this node: its processes killed (after `grace` s to exit), its segments removed."""
    deadline = time.monotonic() + grace
    seen = marked_processes(scratch)
    while (alive := marked_processes(scratch)) and time.monotonic() < deadline:
        seen.update(alive)
        time.sleep(POLL_S / 5)
    killed = []
    for pid, started in alive.items():
        st = _stat(pid)
        if st and st[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    for pid in killed:
        _reap(pid)
    removed = []
    for name in run_segments(shm_names(shm), {**seen, **alive}):
        try:
            (shm / name).unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
    return {"host": socket.gethostname(), "killed_pids": killed, "removed_segments": removed}


SWEEP_TIMEOUT_S = 60


def sweep_nodes(scratch: str, nodes: int, grace: float, env=None) -> dict:
    """`--sweep` on every node of the allocation, one `srun` task per node; {node: what it cleaned} or an error.

    Every node, not `nodes`: in an allocation larger than the run (points packed in one job), Dragon picks its
    nodes itself (not the first ones), and srun cannot be told which without asking Dragon."""
    if not os.environ.get("SLURM_JOB_ID"):
        return {"error": "no Slurm allocation: the other nodes were not swept"}
    nodes = max(nodes, int(os.environ.get("SLURM_JOB_NUM_NODES") or 0))
    argv = ["srun", "--overlap", "-N", str(nodes), "--ntasks-per-node=1", "--cpu-bind=none", "--kill-on-bad-exit=0",
            sys.executable, "-m", "movebench.engine.launchers.dragon", "--sweep", scratch, "--grace", str(grace)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S, env=env,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{' '.join(argv[:5])} ...: {exc}"}
    swept = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                continue
            swept[found.pop("host")] = found
    if r.returncode != 0 or len(swept) < nodes:
        swept["error"] = (f"srun exited {r.returncode}, {len(swept)} of {nodes} nodes answered: "
                          f"{r.stderr.strip()[-500:]}")
    return swept


def child_env(scratch: str, extra=None) -> dict:
    """Dragon's helpers are found on PATH: put this Python's bin folder first."""
    env = os.environ.copy()
    env.update(extra or {})
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env[SCRATCH_ENV] = scratch
    env[LAUNCH_T0_ENV] = repr(time.time())
    return env


def merge_meta(paths, info: dict) -> None:
    """`info` under `dragon_launch` in each of `paths` (one path, or a launch group's) that the program wrote.

    The runtime's start-up runs to the first head start and its teardown from the last head end of the
    files, so a group's tasks share one launch record, as they shared one runtime."""
    from movebench.core import records

    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    metas = {}
    for path in paths:
        try:
            metas[path] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    starts = [m["head_start"] for m in metas.values() if m.get("head_start") is not None]
    ends = [m["head_end"] for m in metas.values() if m.get("head_end") is not None]
    if starts:
        info["runtime_startup_s"] = min(starts) - info["start"]
    if ends:
        info["runtime_teardown_s"] = info["end"] - max(ends)
    for path, meta in metas.items():
        meta["dragon_launch"] = info
        records.write_json(path, meta)


def run(argv, meta=None, shm_bytes=0, timeout=None, grace=GRACE_S, env=None, nodes=1, shm_sized_by="") -> int:
    if shm_bytes:
        try:
            check_shm(shm_bytes, sized_by=shm_sized_by)
        except ShmTooSmall as exc:
            print(f"movebench.engine.launchers.dragon: refusing to launch: {exc}", file=sys.stderr, flush=True)
            return 2
    scratch = tempfile.mkdtemp(prefix="movebench-dragon-")
    reason = None
    run = DragonRun(argv, env=child_env(scratch, env))

    def on_signal(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            rc = run.wait(timeout)
            if rc is None:
                reason = f"timed out after {timeout:g} s"
                run.stop(grace)
        except KeyboardInterrupt as exc:
            reason = f"interrupted by {exc.args[0] if exc.args else 'SIGINT'}"
            run.stop(grace)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        end = time.time()
        cleaned = run.cleanup()
        here = sweep(scratch, grace)
        swept = {here.pop("host"): here}
        if nodes > 1:  # this node again too: it is one of the allocation's, and a second look costs nothing
            for node, found in sweep_nodes(scratch, nodes, grace).items():
                if node in swept and isinstance(found, dict):
                    found = {k: swept[node][k] + found[k] for k in here}
                swept[node] = found
        shutil.rmtree(scratch, ignore_errors=True)
    rc = run.proc.returncode
    if cleaned["killed_pids"] or cleaned["removed_segments"]:
        print(f"movebench.engine.launchers.dragon: cleaned up after Dragon: "
              f"killed {len(cleaned['killed_pids'])} processes, "
              f"removed {len(cleaned['removed_segments'])} /dev/shm segments", file=sys.stderr, flush=True)
    for node, found in swept.items():
        if node == "error":
            print(f"movebench.engine.launchers.dragon: sweep of the other nodes: {found}", file=sys.stderr, flush=True)
        elif found["killed_pids"] or found["removed_segments"]:
            print(f"movebench.engine.launchers.dragon: {node}: "
                  f"killed {len(found['killed_pids'])} processes of the run, "
                  f"removed {len(found['removed_segments'])} /dev/shm segments", file=sys.stderr, flush=True)
    if meta:
        merge_meta(meta, {"start": run.start, "end": end, "wall_s": end - run.start, "returncode": rc,
                          "pids_seen": len(run.seen), **cleaned, "nodes_swept": swept})
    if reason:
        print(f"movebench.engine.launchers.dragon: Dragon {reason}; stopped and cleaned up", file=sys.stderr,
              flush=True)
        return 124 if reason.startswith("timed out") else 130
    return rc


def command(task: Task, kernel: list[str], options: dict, metas=None) -> list[str]:
    """`dragon -s` on one node (it refuses to start without -s when Slurm is installed but no job runs);
    `dragon -t <transport> -N <nodes>` on more, in the allocation, and this wrapper sweeps every node after it.
    `options` are the family's (Family.runtime_options): `shm_bytes` (and `shm_sized_by`, the setting that sizes
    it), `env`, `transport`. `metas`: the meta
    files the launch record goes into (default: the task's; a launch group's: every task's)."""
    beside = Path(sys.executable).with_name("dragon")
    dragon = str(beside) if beside.exists() else "dragon"
    mode = ["-s"] if task.nodes == 1 else ["-N", str(task.nodes)]
    if task.nodes > 1 and options.get("transport"):
        mode = ["-t", options["transport"], *mode]
    wrapper = [sys.executable, "-m", __name__, "--shm-bytes", str(options.get("shm_bytes", 0))]
    if options.get("shm_sized_by"):
        wrapper += ["--shm-sized-by", options["shm_sized_by"]]
    if task.nodes > 1:
        wrapper += ["--nodes", str(task.nodes)]
    for meta in ([task.meta] if metas is None and task.meta else metas or []):
        wrapper += ["--meta", meta]
    for name, value in (options.get("env") or {}).items():
        wrapper += ["--env", f"{name}={value}"]
    return [*wrapper, "--", dragon, *mode, *kernel]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m movebench.engine.launchers.dragon",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--meta", action="append", default=[],
                   help="a JSON file the program writes; launch timings are merged into it (repeated: a launch "
                        "group's files, each one that exists)")
    p.add_argument("--shm-bytes", type=int, default=0, help="refuse to launch with less free room in /dev/shm")
    p.add_argument("--shm-sized-by", default="", help="the setting that sizes the program's pools, for the advice "
                                                        "when /dev/shm is too small (the family says which)")
    p.add_argument("--timeout", type=float, default=None, help="seconds before Dragon is stopped")
    p.add_argument("--grace", type=float, default=GRACE_S, help="seconds between SIGINT and SIGKILL")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set in Dragon's environment (e.g. DRAGON_DEFAULT_SEG_SZ=268435456)")
    p.add_argument("--nodes", type=int, default=1,
                   help="nodes of the Dragon run: above 1, every node of the allocation is swept after it (srun)")
    p.add_argument("--sweep", metavar="SCRATCH",
                   help="(run on each node by --nodes) clean up the run whose scratch path this is, print JSON")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- dragon [options] PROG ARGS...")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.sweep:
        print(json.dumps(sweep(args.sweep, args.grace)), flush=True)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser().error("no command given after --")
    env = dict(item.split("=", 1) for item in args.env)
    return run(command, meta=args.meta, shm_bytes=args.shm_bytes, timeout=args.timeout, grace=args.grace, env=env,
               nodes=args.nodes, shm_sized_by=args.shm_sized_by)


class Dragon(Runtime):
    """Dragon starts its own processes: one srun task per node for its back end (the Slurm executor refuses a
    job that has the `mpi` resource, which keeps it from wrapping the point in `srun -n 1`, with a single task,
    hence at least 2), and its front end where the campaign runs. This wrapper does its checks and clean-up."""

    name = "dragon"

    def command(self, task: Task, task_path, launcher: str = "mpiexec") -> list[str]:
        return command(task, self.kernel(task, task_path), family_of(task.family).runtime_options(task))

    def group_command(self, tasks: list[Task], task_path, launcher: str = "mpiexec") -> list[str]:
        """Dragon's room and segments are sized for the group's largest need (Family.group_runtime_options), and
        its launch record goes into every task's meta."""
        first = tasks[0]
        return command(first, self.kernel(first, task_path), family_of(first.family).group_runtime_options(tasks),
                       metas=[t.meta for t in tasks if t.meta])

    def scheduler_tasks(self, ranks: int, nodes: int) -> int:
        return max(2, nodes)

    def step_tasks_per_node(self, ranks: int, nodes: int) -> int:
        return 1  # Dragon's srun starts one back end per node; its processes are its own, not the step's tasks

    def placement_problem(self, environ: dict) -> str | None:
        """MPI points are srun steps, placed on the allocation's nodes wherever snakemake runs; `dragon -s` runs
        where it is started, and `dragon -N` keeps its front end there: on a login node, outside the allocation.
        SLURMD_NODENAME is set on the allocation's nodes (a batch script, a step), not where salloc runs a command."""
        if environ.get("SLURMD_NODENAME"):
            return None
        return ("Dragon runs where snakemake runs, and that is no node of the allocation (salloc ran it here): run the "
                "campaign from a batch script (make sbatch) or leave the family out")


RUNTIME = Dragon()


if __name__ == "__main__":
    sys.exit(main())
