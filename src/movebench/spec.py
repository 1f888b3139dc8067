"""What a benchmark family declares, and the grid the engine builds from it.

A family is the package `movebench.families.<name>`: its `__init__.py` holds the spec (a
`Family` subclass instance named `FAMILY`), `kernel.py` the measurement, `report.py` its tables
and figures, `schema.yaml` its config block and `report.html.j2` its report section. The spec says,
ReFrame-style, what a point is and what is measured:

- `axes`: the swept parameters, in the order of the point's path; each reads a list from the
  family's config section and may exist only for some points (`when`, e.g. skew only for the
  shuffle pattern).
- `settings`: the config keys a kernel gets besides the point (not swept; changing one reruns the
  points that receive it).
- `measures`: record fields with their unit and which direction is better.
- `constraint(point)`: why a combination of axis values cannot run (default: more nodes than
  ranks); the engine leaves such points out and refuses a value that leaves out every point.
- `resources(point, section)`: what a point's job asks of a scheduler (its runtime counts the tasks).
- `failure_reason(log_tail)`: a failed kernel's own complete reason, for the failure record.
- `node_memory_bytes(point, section)` and `storage(point, section)`: what a point plans to use on its
  busiest node and on filesystems; the engine admits a point only when these fit (movebench.engine.admission).

Only `kernel.py` (and `kernel_sources`) plus the shared runner files are inputs of a family's point
rule: editing the spec, the report or a template never reruns a measurement. The spec therefore
imports nothing heavy (no numpy, pandas or mpi4py): the launcher imports it for every point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from movebench.core.task import Task

if TYPE_CHECKING:  # (key path inside the section, bad value, what would be valid); its module loads jsonschema
    from movebench.core.problems import Problem


def _always(point: dict) -> bool:
    return True


#: `Family.planned_seconds`: a repetition where the family sets no repetition_time, and a point's set-up (its
#: buffers, an `iterations: auto` probe, its records). Generous: a group that outlives its limit costs a resubmission
#: (its finished members are kept for the rerun), a limit too long only queue time.
PLANNED_REPETITION_S = 1.0
PLANNED_SETUP_S = 5.0


@dataclass(frozen=True)
class Axis:
    """A swept parameter: point key `name`, values from the config list `key`."""

    name: str
    key: str
    #: config value -> the list of point values (e.g. sizes "4KiB" -> 4096); must give JSON scalars.
    expand: Callable[[Any], list] = list
    #: the axis exists only for points (built so far, earlier axes) where this holds.
    when: Callable[[dict], bool] = _always
    #: a value the point's path leaves out: the default of an axis added after campaigns had run, so that a
    #: point keeps its path (and its finished records) when its family gains the axis; records written before
    #: it existed are read with this value (movebench.engine.aggregate). The point, and every record, still hold it.
    implicit: Any = None

    @property
    def conditional(self) -> bool:
        return self.when is not _always


@dataclass(frozen=True)
class Setting:
    """A config key (dotted for nested keys) a kernel receives, unchanged or through `convert`."""

    key: str
    convert: Callable[[Any], Any] | None = None
    when: Callable[[dict], bool] = _always

    def value(self, section: dict):
        value = section
        for part in self.key.split("."):
            value = value[part]
        return self.convert(value) if self.convert and value is not None else value


@dataclass(frozen=True)
class Storage:
    """Room a point needs in a folder's filesystem while it runs."""

    path: str
    bytes: int
    #: what the bytes are, for the refusal message
    what: str
    #: left there after the point (e.g. io with cleanup: false): such bytes add up over a campaign's points
    kept: bool = False
    #: on each node's own filesystem (/dev/shm): only checked where the run's node is this machine
    node_local: bool = False


HIGHER, LOWER = "higher", "lower"


@dataclass(frozen=True)
class Measure:
    """A measured record field: its unit, which direction is better, and whether it is summarised."""

    name: str
    unit: str
    better: str
    label: str = ""
    summarize: bool = True

    def __post_init__(self):
        if self.better not in (HIGHER, LOWER):
            raise ValueError(f"measure {self.name}: better must be {HIGHER!r} or {LOWER!r}, not {self.better!r}")


#: Every family's records carry these two; bandwidth is bytes / elapsed_s (core/records.py).
BANDWIDTH = Measure("bandwidth_Bps", "B/s", HIGHER, "bandwidth")
ELAPSED = Measure("elapsed_s", "s", LOWER, "time")


class Family:
    """A family's spec. Subclass, set the class attributes, override hooks where the defaults do not fit."""

    name: str = ""
    #: what starts the kernel's processes, a runtime of movebench.engine.launchers by its name: "mpi" (the profile's MPI
    #: launcher, e.g. mpiexec or srun) or "dragon" (Dragon's launcher, with `runtime_options`).
    runtime: str = "mpi"
    #: the axis whose value is a record's `variant` (the operation measured).
    variant: str = ""
    axes: tuple[Axis, ...] = ()
    settings: tuple[Setting, ...] = ()
    measures: tuple[Measure, ...] = (BANDWIDTH, ELAPSED)
    #: old config keys, each with the line that says what replaced it.
    renamed: dict[str, str] = {}
    #: files of the family package (besides the shared runner and its runtime's module) whose change reruns
    #: its points.
    kernel_sources: tuple[str, ...] = ("kernel.py",)
    #: meta keys too large or too nested for the points table (one row per point); they stay in the .meta.json.
    bulky_meta: tuple[str, ...] = ()
    #: launches per point when neither the family's section nor the campaign says (the unit of replication)
    launches: int = 3
    #: the axes whose values a launch fixes: points equal on them may share one launch (`launch_groups`); empty
    #: when the kernel runs one point per launch
    launch_group_axes: tuple[str, ...] = ()
    #: whether they do when the section does not say
    launch_groups: bool = False

    # --- the grid ---

    @property
    def point_keys(self) -> tuple[str, ...]:
        return tuple(axis.name for axis in self.axes)

    @property
    def renamed_keys(self) -> dict[str, str]:
        """`renamed`, and the singular of each factor's key (the issue and the meta spell them singular)."""
        factors = {axis.name: f"the key is plural: {self.name}.{axis.key}, a list swept like any axis, e.g. "
                   f"[{axis.implicit}]" for axis in self.axes if axis.implicit is not None and axis.name != axis.key}
        return {**factors, **self.renamed}

    @property
    def implicit(self) -> dict:
        """Axis name -> the value its point path leaves out (see Axis.implicit)."""
        return {axis.name: axis.implicit for axis in self.axes if axis.implicit is not None}

    def path(self, point: dict) -> str:
        """The point's path: key~value segments in axis order, implicit values left out."""
        return point_path(point, self.implicit)

    def point_of_record(self, record: dict) -> dict | None:
        """The point a record measured, from the parameters it carries (its axes, `when` applied as the grid
        does); an axis a record lacks takes its implicit value. None when it lacks one that has none."""
        point: dict = {}
        for axis in self.axes:
            if not axis.when(point):
                continue
            if record.get(axis.name) is not None:
                point[axis.name] = record[axis.name]
            elif axis.implicit is not None:
                point[axis.name] = axis.implicit
            else:
                return None
        return point

    @property
    def measure(self) -> dict[str, Measure]:
        return {m.name: m for m in self.measures}

    def check(self, section: dict, campaign: dict) -> list[Problem]:
        """Problems the schema cannot express; the engine adds constraint and size checks."""
        return []

    def constraint(self, point: dict) -> str | None:
        """Why this combination cannot run, or None. Default: every node needs a rank."""
        if "nodes" in point and "ranks" in point and point["nodes"] > point["ranks"]:
            return f"more nodes than the {point['ranks']} ranks: each node needs at least one rank"
        return None

    def combinations(self, section: dict):
        """Every combination of axis values in path order, `when` applied, constraints not yet.

        A value given twice (4KiB and 4096, or a repeated list entry) is one value: its points run once.
        """
        values = {axis.name: list(dict.fromkeys(axis.expand(section[axis.key]))) for axis in self.axes}

        def extend(point: dict, rest: tuple[Axis, ...]):
            if not rest:
                yield dict(point)
                return
            axis, rest = rest[0], rest[1:]
            if not axis.when(point):
                yield from extend(point, rest)
                return
            for value in values[axis.name]:
                point[axis.name] = value
                yield from extend(point, rest)
                del point[axis.name]

        yield from extend({}, self.axes)

    def points(self, section: dict) -> list[dict]:
        """The family's points: ordered parameter dicts, their keys making the path."""
        return [p for p in self.combinations(section) if self.constraint(p) is None]

    # --- what a point's kernel gets, and what its job asks for ---

    def kernel_settings(self, point: dict, section: dict, campaign: dict) -> dict:
        return {s.key: s.value(section) for s in self.settings if s.when(point)}

    def task(self, point: dict, settings: dict, repetitions: int | dict = 5, warmups: int = 2) -> Task:
        """The point's task: the one place a task is built (the plan calls it with the section's settings,
        repetitions and warm-ups; benchmarks and tests with their own)."""
        ranks, nodes = self.placement(point)
        return Task(family=self.name, variant=point[self.variant], point=point, settings=settings,
                    repetitions=repetitions, warmups=warmups, ranks=ranks, nodes=nodes)

    def planned_task(self, point: dict, section: dict, campaign: dict, launch: int = 0) -> Task:
        """The task of one launch of a point of a validated campaign: settings from the section, its repetitions,
        warm-ups and launches."""
        task = self.task(point, self.kernel_settings(point, section, campaign), section["repetitions"],
                         section["warmups"])
        task.launch, task.launches = launch, section.get("launches", 1)
        return task

    def placement(self, point: dict) -> tuple[int, int]:
        """(ranks or processes, nodes) the launcher starts for this point."""
        return int(point.get("ranks", 1)), int(point.get("nodes", 1))

    def node_memory_bytes(self, point: dict, section: dict) -> int:
        """What the point plans to use on its busiest node; families refine it."""
        return 1024**3

    def storage(self, point: dict, section: dict) -> list[Storage]:
        """Filesystem room the point needs while it runs (besides its records); default none."""
        return []

    def resources(self, point: dict, section: dict) -> dict:
        """A point job's scheduler resources besides its tasks, which its runtime counts
        (`movebench.engine.launchers.job_resources`): nodes, mem_mb. With `--exclusive` (profiles/slurm) the job has the
        whole nodes whatever the count."""
        return {"nodes": self.placement(point)[1], "mem_mb": -(-self.node_memory_bytes(point, section) // 2**20)}

    def planned_seconds(self, task: Task) -> float:
        """Seconds the point is planned to measure inside a launch: its warm-ups and most repetitions, each
        `repetition_time` long (or PLANNED_REPETITION_S where the family sets none), an adaptive rule's
        `max_seconds` where it has one, and PLANNED_SETUP_S. It sizes a launch group's time limit
        (movebench.engine.cluster.group_time_limit_minutes); the limit a point is held to stays campaign.timeout."""
        each = float(task.settings.get("repetition_time") or PLANNED_REPETITION_S)
        rule = task.repetitions
        if isinstance(rule, dict):
            measuring = float(rule["max_seconds"]) if rule.get("max_seconds") else int(rule.get("max", 1)) * each
        else:
            measuring = int(rule) * each
        return PLANNED_SETUP_S + task.warmups * each + measuring

    def services(self, section: dict, campaign: dict, points: list[dict]):
        """A context manager for what the points about to run need (e.g. an emulator), or None."""
        return None

    def service_needed(self, point: dict) -> bool:
        """Whether the point's launch needs the family's services running; the campaign keeps them stopped
        (movebench.services.hold) while any other point runs."""
        return True

    def runtime_options(self, task: Task) -> dict:
        """What the runtime needs beyond the task (dragon: `shm_bytes` to check in /dev/shm and `shm_sized_by`, the
        setting to lower when it does not fit, `env` for Dragon, `transport` between nodes); none for mpi."""
        return {}

    def failure_reason(self, log_tail: list[str]) -> str | None:
        """A reason complete in itself among the last lines of a failed kernel's output (io: a storage endpoint
        that never answered), for the failure record and the console; None sends the user to the log."""
        return None

    def group_runtime_options(self, tasks: list[Task]) -> dict:
        """`runtime_options` for a launch group (tasks that share what the launch fixes): the first task's, unless
        the family's needs differ between the group's points."""
        return self.runtime_options(tasks[0])


#: MPI's thread level and the pages behind the kernel's buffers: factors of every MPI family that
#: measures messages (docs/notes/kernels.md, sections 4 and 5), swept like any axis.
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
MEMORY_MODES = ("4k", "thp")
# Added after campaigns had run: their defaults stay out of the path (Axis.implicit).
MPI_THREAD_LEVEL = Axis("mpi_thread_level", "mpi_thread_levels", implicit="multiple")
MEMORY_MODE = Axis("memory_mode", "memory_modes", implicit="4k")


def env_combinations(section_env: dict) -> list[str]:
    """`{UCX_TLS: [tcp, "sm,tcp"]}` -> ["UCX_TLS=tcp", "UCX_TLS=sm,tcp"]: every combination of the tuning variables'
    values, a null leaving its variable unset, joined by spaces; "" when none is set (the implicit default)."""
    combos: list[list[str]] = [[]]
    for name, values in (section_env or {}).items():
        values = values if isinstance(values, list) else [values]
        combos = [c + ([f"{name}={v}"] if v is not None else []) for c in combos for v in values]
    return [" ".join(c) for c in combos]


def env_of(value: str) -> dict[str, str]:
    """A point's `env` value back as variables."""
    return dict(part.split("=", 1) for part in value.split()) if value else {}


#: The communication stack (movebench.engine.stacks: an MPI library, its launcher, its variables) and the tuning
#: variables set for the ranks: factors of the MPI families; `default` (the campaign's own Python and the profile's
#: launcher) and no variable stay out of the path.
STACK = Axis("stack", "stacks", implicit="default")
ENV = Axis("env", "env", env_combinations, implicit="")


def point_path(point: dict, implicit: dict) -> str:
    """Paramspace-style path of a point: key~value segments in axis order, the `implicit` values left out."""
    return "/".join(f"{k}~{_fmt(v)}" for k, v in point.items() if implicit.get(k, ...) != v)


def _fmt(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)
