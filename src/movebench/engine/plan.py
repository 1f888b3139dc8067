"""A validated campaign planned: its grid of points, each point's launches and their tasks, and their order.

`grid` expands every enabled family's section into its points (ordered parameter dicts, in axis
order, constraints applied). A point is measured in `launches` separate jobs, the unit of
replication (docs/compare.md, "Launches"): `tasks` gives each launch its task
(`Family.planned_task`), keyed by the launch's path, which is how a point rule finds its task
(Paramspace's `instance` idea). Launch 0's path is the point's path, so a one-launch campaign keeps
the paths it always had; launch k > 0 adds a segment `launch~k`. `launch_order` interleaves the
launches: round k of every point before round k+1 of any, in a shuffled order within the round.

`launch_groups` gathers, in families whose section asks for it (`launch_groups`, kv's default), the
launches of points that agree on what a launch fixes (`Family.launch_group_axes`) and have the same
launch index into one `LaunchGroup`: one job, one launch, the points measured one after another in
it (in an order `movebench.engine.launch` shuffles with the run's seed), each still writing its own records.
A launch group, not a point, is then what the order places. Launches whose records stand join no group:
a group holds only what a run is to measure, so a new sweep value's points form groups of their own.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Collection
from dataclasses import dataclass

from movebench import families
from movebench.core.task import LAUNCH, Task, launch_path, planned_launches, point_path_of
from movebench.engine import stacks
from movebench.engine.config import CAMPAIGN, enabled_families

#: the folder under a family's logs that holds its launch groups' logs
LAUNCH_GROUP_LOGS = "groups"


@dataclass(frozen=True)
class LaunchGroup:
    """Launches of one family's points that run as one launch: `members` are their launch paths."""

    family: str
    #: axis~value segments of the values the members share (the family's launch group axes)
    key_path: str
    launch: int
    members: tuple[str, ...]

    @property
    def rule_suffix(self) -> str:
        """The group's rule's name after `<family>_group_`, from its name (`nodes1_ranks2_launch0`): the same on
        the submit host and in a cluster job, which reads the workflow again whichever other groups have finished
        meanwhile (an index would shift). A value that is no identifier adds a digest of the name."""
        suffix = self.name.replace("~", "").replace("/", "_")
        if not suffix.isidentifier() or not suffix.isascii():
            suffix = re.sub(r"\W", "", suffix) + "_" + hashlib.sha1(self.name.encode()).hexdigest()[:8]
        return suffix

    @property
    def name(self) -> str:
        """The group's path: its shared values and its launch, e.g. `nodes~1/clients_per_node~2/launch~0`."""
        return f"{self.key_path}/{LAUNCH}~{self.launch}"


def grid(config: dict) -> dict[str, list[dict]]:
    """Family name -> its points (ordered parameter dicts) for a validated config."""
    return {name: families.load(name).points(config[name]) for name in enabled_families(config)}


def tasks(config: dict, grid_: dict[str, list[dict]]) -> dict[str, dict[str, Task]]:
    """Family -> launch path -> the launch's task: what its kernel receives."""
    out = {}
    for name, points in grid_.items():
        fam, section = families.load(name), config[name]
        count = planned_launches(section.get("launches", 1))
        out[name] = {launch_path(families.point_path(point), k): _with_stack(
            fam.planned_task(point, section, config[CAMPAIGN], k), config[CAMPAIGN]) for point in points
            for k in range(count)}
    return out


def _with_stack(task: Task, campaign: dict) -> Task:
    """The task with its point's communication stack resolved (None for the default stack)."""
    if "stack" in task.point:
        task.stack = stacks.resolve(task.point["stack"], campaign)
    return task


def launch_groups(config: dict, tasks_: dict[str, dict[str, Task]],
                  measured: Collection[tuple[str, str]] = ()) -> dict[str, list[LaunchGroup]]:
    """Family -> its launch groups, for the families whose section has `launch_groups` true.

    `measured`: (family, launch path) of launches whose records stand; they join no group. A group is then formed
    from the launches still to measure alone, so that a new sweep value's launch group holds only the new points
    (a job's existing outputs are deleted before it runs, and its members are fixed when the DAG is built), and
    a family whose launches all stand has no group."""
    out = {}
    measured = set(measured)
    for family, by_path in tasks_.items():
        fam = families.load(family)
        if not config[family].get("launch_groups") or not fam.launch_group_axes:
            continue
        members: dict[tuple[str, int], list[str]] = {}
        for path, task in by_path.items():
            if (family, path) in measured:
                continue
            key = families.point_path({a: task.point[a] for a in fam.launch_group_axes if a in task.point})
            members.setdefault((key, task.launch), []).append(path)
        out[family] = [LaunchGroup(family, key, launch, tuple(sorted(paths)))
                       for (key, launch), paths in sorted(members.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    return out


def launch_order(tasks_: dict[str, dict[str, Task]], seed: int,
                 groups: dict[str, list[LaunchGroup]] | None = None) -> list[tuple[str, str]]:
    """(family, launch path or launch group name) in the order the jobs are to run: round k (every point's
    launch k) before round k+1, each round shuffled with `seed`, so that no point's launches run back to back
    and a slow drift of the machine falls on every point alike (Abedi and Brecht's randomized multiple
    interleaved trials). A family's launches in `groups` are placed as their groups."""
    rng = random.Random(seed)
    rounds: dict[int, list[tuple[str, str]]] = {}
    grouped = {family for family in (groups or {})}
    for family, family_groups in (groups or {}).items():
        for group in family_groups:
            rounds.setdefault(group.launch, []).append((family, group.name))
    for family, by_path in tasks_.items():
        if family in grouped:
            continue
        for path, task in by_path.items():
            rounds.setdefault(task.launch, []).append((family, path))
    order: list[tuple[str, str]] = []
    for k in sorted(rounds):
        round_ = sorted(rounds[k])
        rng.shuffle(round_)
        # nor two launches of one point in a row across a round's edge
        if order and len(round_) > 1 and _unit(round_[0]) == _unit(order[-1]):
            round_[0], round_[1] = round_[1], round_[0]
        order += round_
    return order


def _unit(job: tuple[str, str]) -> tuple[str, str]:
    """What must not run twice in a row: a point (its launches), or a launch group (its launches)."""
    family, path = job
    return family, point_path_of(path)


def priorities(order: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Family -> launch path -> Snakemake priority: the first in `order` the highest, so that the scheduler,
    which starts the ready job of highest priority first, runs them in that order."""
    out: dict[str, dict[str, int]] = {}
    for rank, (family, path) in enumerate(order):
        out.setdefault(family, {})[path] = len(order) - rank
    return out
