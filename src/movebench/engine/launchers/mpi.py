"""The mpi runtime: a kernel under the profile's MPI launcher (mpiexec, srun), and what MPICH leaves behind.

Before the start, the point's communication stack is installed on its first use (movebench.engine.stacks); while the
kernel runs, the MPICH segments its ranks map are noted (`ShmWatch`) and the libraries' transport reports are
held back from the log; after it, the segments are removed and the meta gets the transport, the stack and
whether what ran is what was named.

The launcher string comes from the profile (the resource `mpi`, the name Snakemake's Slurm executor
reads); it may place `{ranks}` and `{nodes}` itself, else `-n <ranks>` follows.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
import threading
from pathlib import Path

from movebench.core.task import Task
from movebench.core.transport import TransportLog, probe_env
from movebench.core.transport import check as check_transport
from movebench.engine import stacks
from movebench.engine.launchers import CannotStart, Runtime, Watch
from movebench.engine.launchers.process import descendants
from movebench.spec import env_of

SHM = Path("/dev/shm")
# MPICH 4 (ch4) names its intranode segment mpich_shm_<world id>_<node> (and mpich_vci_... with
# several VCIs), the world id being the FNV hash of the PMI kvsname; Hydra's kvsname holds
# mpiexec's pid, a random number and the host, so the name cannot be computed from outside:
# it is read from the maps of the job's own processes while they run.
MPICH_SEGMENTS = ("mpich_shm_", "mpich_vci_")


def launcher_command(launcher: str, ranks: int, nodes: int, python: str | None = None) -> list[str]:
    """`launcher` may place {ranks} and {nodes} itself ("srun -N {nodes} -n {ranks}"); else `-n ranks` follows.

    A bare program name is looked up beside the ranks' Python (`python`, default this one) first: an MPI
    wheel puts its mpiexec there, and it must match the MPI library mpi4py loads. For the same reason a
    launcher beside this Python (the campaign's own MPI's) becomes the one beside a stack's Python.
    """
    if "{ranks}" in launcher or "{nodes}" in launcher:
        argv = shlex.split(launcher.format(ranks=ranks, nodes=nodes))
    else:
        argv = shlex.split(launcher) + ["-n", str(ranks)]
    program = Path(argv[0])
    # a bare name, or one beside this Python (its own MPI's launcher), is the ranks' Python's: a stack's own
    if "/" not in argv[0] or program.parent == Path(sys.executable).parent:
        beside = Path(python or sys.executable).with_name(program.name)
        if beside.exists():
            argv[0] = str(beside)
    return argv


def command(task: Task, kernel: list[str], launcher: str = "mpiexec") -> list[str]:
    """The launcher's command for the point's ranks and nodes, then the kernel's (`kernel[0]` is the ranks'
    Python). A stack that names its own launcher replaces the profile's."""
    own = (task.stack or {}).get("launcher")
    argv = launcher_command(own or launcher, task.ranks, task.nodes, kernel[0])
    # the profile's srun knows the default MPI's PMI; a wheel stack's library may need another plugin
    return (argv if own else stacks.srun_for(argv, task.stack)) + kernel


def environment(task: Task, env: dict) -> dict:
    """`env` with what the point asks of the MPI library before it starts, and the transport probe.

    The thread level goes in MPI4PY_RC_THREAD_LEVEL, which mpi4py reads at import, so that a kernel needs
    no code for it. A point on one node gets UCX_MEM_EVENTS=no unless the environment sets it: UCX's
    memory hooks keep its registration cache right for RDMA between nodes, while on one node MPICH moves
    data through its own shared memory, and installing the hooks when libucs loads is most of MPI's start
    (docs/notes/kernels.md, "Where MPI's start went"); the variable goes into the meta's environment like any
    UCX_ setting. The libraries' own logging says which transport they chose (core/transport.py).
    """
    env = dict(env)
    # the stack's start (Open MPI as root), its own variables, then the point's tuning variables over them
    env.update(stacks.launcher_env(task.stack))
    env.update((task.stack or {}).get("env", {}))
    env.update(env_of(task.point.get("env", "")))
    level = task.point.get("mpi_thread_level")
    if level:
        env["MPI4PY_RC_THREAD_LEVEL"] = level
    if task.nodes == 1:
        env.setdefault("UCX_MEM_EVENTS", "no")
    env.update(probe_env(env, stacks.library_of(task.stack)))
    return env


def mapped_segments(pid: int, shm: Path = SHM) -> set[str]:
    """Names of the MPICH segments in `shm` that process `pid` has mapped."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    prefix, names = f"{shm}/", set()
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix):
            name = fields[5][len(prefix):].removesuffix(" (deleted)")
            if name.startswith(MPICH_SEGMENTS):
                names.add(name)
    return names


class ShmWatch:
    """The MPICH segments a job's processes map, seen while they run, removed after the job ends.

    MPICH unlinks them in MPI_Finalize; a rank killed mid-point (or a point stopped on its timeout)
    never gets there, and /dev/shm fills up run after run. Only names this job's own processes had
    mapped are removed: another job's segments, live or leaked, are never touched. Segments are
    made in MPI_Init: the job is looked at often at first, then rarely (a look costs a /proc scan).
    """

    def __init__(self, root: int, shm: Path = SHM):
        self.root, self.shm = root, shm
        self.seen: set[str] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def look(self) -> None:
        for pid in descendants(self.root):
            self.seen |= mapped_segments(pid, self.shm)

    def _watch(self) -> None:
        # Often until the ranks have mapped their segment (MPI_Init), then rarely: looks cost CPU
        # on the machine being measured (docs/notes/hardening.md, "MPICH 4 names its intranode segment").
        waits = [0.1] * 300
        while True:
            before = len(self.seen)
            self.look()
            if self.seen and len(self.seen) == before:
                waits = waits[:0]
            if self._done.wait(waits.pop(0) if waits else 10.0):
                return

    def finish(self) -> list[str]:
        """After the job ended: remove what it left; the names removed."""
        self._done.set()
        self._thread.join(timeout=5)
        removed = []
        for name in sorted(self.seen):
            with contextlib.suppress(FileNotFoundError):
                (self.shm / name).unlink()
                removed.append(name)
        return removed


def stack_meta(task: Task, python: str, meta: dict) -> dict:
    """What the point's stack was and what its ranks say ran: the definition, the ranks' Python, the tuning
    variables set, the library MPI reported."""
    stack = task.stack or {"name": stacks.DEFAULT}
    return {**stack, "python": python, "env_factors": stacks.env_of(task.point.get("env", "")),
            "mpi_library": meta.get("mpi_library"), "mpi_library_version": meta.get("mpi_library_version")}


class MpiWatch(Watch):
    """The job's MPICH segments (`ShmWatch`) and the libraries' transport reports in its output."""

    def __init__(self, runtime: Mpi):
        self.runtime = runtime
        self.transport = TransportLog()
        self.shm: ShmWatch | None = None

    def started(self, pid: int) -> None:
        self.shm = ShmWatch(pid)

    def swallow(self, line: str) -> bool:
        return self.transport.feed(line)

    def look(self) -> None:
        # the ranks alive at a stop are looked at once more; a rank killed earlier was seen while it ran
        if self.shm is not None:
            self.shm.look()

    def summary_lines(self) -> list[str]:
        return self.transport.log_lines()

    def finish(self) -> list[str]:
        return self.shm.finish() if self.shm is not None else []

    def meta(self, task: Task, kernel_meta: dict) -> tuple[dict, list[str]]:
        transport = self.transport.summary()
        added = {"transport": transport, "stack": stack_meta(task, self.runtime.python(task), kernel_meta),
                 "transport_check": check_transport(stacks.named_env(task.stack, task.point), transport)}
        return added, list(added["transport_check"]["fell_back"])


class Mpi(Runtime):
    name = "mpi"

    def python(self, task: Task) -> str:
        """The Python of the kernel's ranks: the point's stack's (movebench.engine.stacks), else this one."""
        return stacks.python_of(task.stack)

    def command(self, task: Task, task_path, launcher: str = "mpiexec") -> list[str]:
        return command(task, self.kernel(task, task_path), launcher)

    def environment(self, task: Task, env) -> dict:
        return environment(task, env)

    def prepare(self, task: Task, say) -> None:
        """On first use: the stack's environment (movebench.engine.stacks), once per checkout, under a lock."""
        if not task.stack:
            return
        try:
            stacks.ensure(task.stack, say=say)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            raise CannotStart(f"the stack {task.stack['name']} could not be installed: {exc}") from None

    def watch(self) -> MpiWatch:
        return MpiWatch(self)

    def scheduler_tasks(self, ranks: int, nodes: int) -> int:
        """One task per rank, at least 2: the Slurm executor refuses a job that has the `mpi` resource (which keeps
        it from wrapping the point in `srun -n 1`) with a single task, and the run then hangs (calibration's fio
        probe, one process, did); the launcher still starts the point's own count."""
        return max(2, ranks)


RUNTIME = Mpi()
