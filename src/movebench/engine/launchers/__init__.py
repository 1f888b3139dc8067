"""The runtimes: what starts a point's kernel, one module per runtime a family may declare (`Family.runtime`).

- `mpi`: the profile's MPI launcher (mpiexec here, srun on Slurm) starts the ranks; MPICH's
  shared-memory segments of a killed job are removed by the job's own names; the MPI libraries say
  which transport carried the data.
- `dragon`: Dragon's launcher under a wrapper that leaves nothing of the run behind.

A runtime is one `Runtime` object, the `RUNTIME` of the module named like it: its command, its environment,
its checks before a start (`prepare`), what it watches and cleans up while and after the kernel runs (`watch`),
what it adds to the meta, and where it may run (`scheduler_tasks`, `step_tasks_per_node`, `placement_problem`).
Nothing outside this package branches on a runtime's name. A site's own runtime is a module in a folder named
in `MOVEBENCH_RUNTIMES` (paths separated by `:`), which joins this package's path as `MOVEBENCH_FAMILIES` does
for families. (`process` is not a runtime: it holds the process-tree helpers every runtime uses.)

`movebench.engine.launch` asks `runtime(task)` once per launch and uses what it answers.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from movebench.core.task import Task
from movebench.families import load as family_of

EXTRA = "MOVEBENCH_RUNTIMES"
for _folder in filter(None, os.environ.get(EXTRA, "").split(os.pathsep)):
    if str(Path(_folder).resolve()) not in __path__:
        __path__.append(str(Path(_folder).resolve()))

#: the modules of this package that are not runtimes
HELPERS = ("process",)


class CannotStart(Exception):
    """A runtime's check before the start failed: the launch's points fail with this reason, no kernel runs."""


class Watch:
    """What a runtime keeps an eye on around one run of a kernel; this one watches nothing."""

    def started(self, pid: int) -> None:
        """The kernel's launcher process runs as `pid`."""

    def swallow(self, line: str) -> bool:
        """Whether a line of the kernel's output is the runtime's own report, kept out of the log."""
        return False

    def look(self) -> None:
        """One more look at the job just before it is stopped."""

    def summary_lines(self) -> list[str]:
        """What the swallowed lines said, for the log, once the kernel ended."""
        return []

    def finish(self) -> list[str]:
        """After the job ended: what it left behind, removed; the names removed."""
        return []

    def meta(self, task: Task, kernel_meta: dict) -> tuple[dict, list[str]]:
        """What the runtime adds to a finished point's meta, and the lines a user must see about it."""
        return {}, []


class Runtime:
    """A runtime's defaults: the kernel under this Python, started as it is, watched by nothing."""

    name: str = ""

    @property
    def source(self) -> Path:
        """The file whose change reruns the points of the families with this runtime: the runtime's module."""
        return Path(sys.modules[type(self).__module__].__file__).resolve()

    def python(self, task: Task) -> str:
        """The Python of the kernel's processes."""
        return sys.executable

    def kernel(self, task: Task, task_path) -> list[str]:
        return [self.python(task), "-m", f"movebench.families.{task.family}.kernel", str(task_path)]

    def command(self, task: Task, task_path, launcher: str = "mpiexec") -> list[str]:
        """The whole command of the point's kernel on its task file: the one place that builds it."""
        return self.kernel(task, task_path)

    def group_command(self, tasks: list[Task], task_path, launcher: str = "mpiexec") -> list[str]:
        """The command of a launch group's kernel on its group file (core.runner's docstring has its form).

        The group's tasks share what the launch fixes (ranks, nodes), so the first task places it."""
        return self.command(tasks[0], task_path, launcher)

    def environment(self, task: Task, env) -> dict:
        """The kernel's environment: `env` with what the runtime sets for the point."""
        return dict(env)

    def prepare(self, task: Task, say) -> None:
        """What must hold before the launch of `task` (and its group) starts; `CannotStart` when it cannot."""

    def watch(self) -> Watch:
        return Watch()

    def scheduler_tasks(self, ranks: int, nodes: int) -> int:
        """A point job's tasks (sbatch --ntasks): one per process the runtime starts."""
        return ranks

    def step_tasks_per_node(self, ranks: int, nodes: int) -> int:
        """The srun step's tasks on one node, which Slurm places one per CPU of the allocation."""
        return -(-ranks // nodes)

    def placement_problem(self, environ: dict) -> str | None:
        """Why the runtime cannot start its points from where the campaign runs (`environ`), or None."""
        return None


def named(name: str) -> Runtime:
    """The runtime called `name`: the `RUNTIME` of the module `movebench.engine.launchers.<name>`."""
    module = None
    if name and name not in HELPERS and name.isidentifier():
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    runtime = getattr(module, "RUNTIME", None)
    if not isinstance(runtime, Runtime):
        raise ValueError(f"runtime = {name!r}: no such runtime; valid: {', '.join(names())} (a module of "
                         f"movebench.engine.launchers, or of a folder in ${EXTRA}, that defines RUNTIME)")
    return runtime


def names() -> list[str]:
    """Every module of the package's path that may be a runtime (a helper module is none)."""
    found = {p.stem for root in __path__ for p in Path(root).glob("*.py")}
    return sorted(found - set(HELPERS) - {"__init__"})


def of_family(family: str) -> Runtime:
    try:
        return named(family_of(family).runtime)
    except ValueError as exc:
        raise ValueError(f"family {family}: {exc}") from None


def runtime(task: Task) -> Runtime:
    return of_family(task.family)


def job_resources(family: str, point: dict, section: dict) -> dict:
    """A point job's scheduler resources: the family's nodes and memory, the tasks its runtime starts."""
    fam = family_of(family)
    return {"tasks": of_family(family).scheduler_tasks(*fam.placement(point)), **fam.resources(point, section)}
