"""What starts a point's kernel, one module per runtime a family may declare (`Family.runtime`).

- `mpi`: the profile's MPI launcher (mpiexec here, srun on Slurm) starts the ranks; MPICH's
  shared-memory segments of a killed job are removed by the job's own names; the MPI libraries say
  which transport carried the data.
- `dragon`: Dragon's launcher under a wrapper that leaves nothing of the run behind (kv).

`movebench.launch` asks `runtime(name)` once per point and uses what it answers.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from movebench import stacks
from movebench.core.task import Task
from movebench.families import load as family_of
from movebench.launchers import dragon, mpi

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Runtime:
    name: str
    #: the MPI library's shared memory is watched and cleaned, its transport log read
    is_mpi: bool
    #: the file whose change reruns the points of families with this runtime
    source: Path

    def command(self, task: Task, task_path, launcher: str = "mpiexec") -> list[str]:
        """The whole command of the point's kernel on its task file: the one place that builds it."""
        kernel = [self.python(task), "-m", f"movebench.families.{task.family}.kernel", str(task_path)]
        if self.is_mpi:
            return mpi.command(task, kernel, launcher)
        return dragon.command(task, kernel, family_of(task.family).runtime_options(task))

    def group_command(self, tasks: list[Task], task_path, launcher: str = "mpiexec") -> list[str]:
        """The command of a launch group's kernel on its group file (core.runner's docstring has its form).

        The group's tasks share what the launch fixes (an MPI family's ranks and nodes; kv's nodes and
        processes), so the first task places it; Dragon's room and segments are sized for the group's largest
        need (Family.group_runtime_options), and its launch record goes into every task's meta."""
        first = tasks[0]
        kernel = [self.python(first), "-m", f"movebench.families.{first.family}.kernel", str(task_path)]
        if self.is_mpi:
            return mpi.command(first, kernel, launcher)
        return dragon.command(first, kernel, family_of(first.family).group_runtime_options(tasks),
                              metas=[t.meta for t in tasks if t.meta])

    def python(self, task: Task) -> str:
        """The Python of the kernel's ranks: the point's stack's (movebench.stacks), else this one."""
        return stacks.python_of(task.stack) if self.is_mpi else sys.executable

    def environment(self, task: Task, env) -> dict:
        """The kernel's environment: `env` with what the runtime sets for the point."""
        return mpi.environment(task, env) if self.is_mpi else dict(env)


RUNTIMES = {"mpi": Runtime("mpi", True, HERE / "mpi.py"), "dragon": Runtime("dragon", False, HERE / "dragon.py")}


def runtime(task: Task) -> Runtime:
    return RUNTIMES[family_of(task.family).runtime]


def kernel_command(task: Task, task_path, launcher: str = "mpiexec") -> list[str]:
    return runtime(task).command(task, task_path, launcher)


def kernel_env(task: Task, env) -> dict:
    return runtime(task).environment(task, env)
