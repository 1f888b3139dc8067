"""A validated campaign planned: its grid of points, each point's launches and their tasks, and their order.

`grid` expands every enabled family's section into its points (ordered parameter dicts, in axis
order, constraints applied). A point is measured in `launches` separate jobs, the unit of
replication (docs/compare.md, "Launches"): `tasks` gives each launch its task
(`Family.planned_task`), keyed by the launch's path, which is how a point rule finds its task
(Paramspace's `instance` idea). Launch 0's path is the point's path, so a one-launch campaign keeps
the paths it always had; launch k > 0 adds a segment `launch~k`. `launch_order` interleaves the
launches: round k of every point before round k+1 of any, in a shuffled order within the round.
"""

from __future__ import annotations

import random

from movebench import families
from movebench.config import CAMPAIGN, enabled_families
from movebench.core.task import Task, launch_path, planned_launches, point_path_of


def grid(config: dict) -> dict[str, list[dict]]:
    """Family name -> its points (ordered parameter dicts) for a validated config."""
    return {name: families.load(name).points(config[name]) for name in enabled_families(config)}


def tasks(config: dict, grid_: dict[str, list[dict]]) -> dict[str, dict[str, Task]]:
    """Family -> launch path -> the launch's task: what its kernel receives."""
    out = {}
    for name, points in grid_.items():
        fam, section = families.load(name), config[name]
        count = planned_launches(section.get("launches", 1))
        out[name] = {launch_path(families.point_path(point), k): fam.planned_task(point, section, config[CAMPAIGN], k)
                     for point in points for k in range(count)}
    return out


def launch_order(tasks_: dict[str, dict[str, Task]], seed: int) -> list[tuple[str, str]]:
    """(family, launch path) in the order they are to run: round k (every point's launch k) before round k+1,
    each round shuffled with `seed`, so that no point's launches run back to back and a slow drift of the
    machine falls on every point alike (Abedi and Brecht's randomized multiple interleaved trials)."""
    rng = random.Random(seed)
    rounds: dict[int, list[tuple[str, str]]] = {}
    for family, by_path in tasks_.items():
        for path, task in by_path.items():
            rounds.setdefault(task.launch, []).append((family, path))
    order: list[tuple[str, str]] = []
    for k in sorted(rounds):
        round_ = sorted(rounds[k])
        rng.shuffle(round_)
        # nor two launches of one point in a row across a round's edge
        if order and len(round_) > 1 and point_path_of(round_[0][1]) == point_path_of(order[-1][1]):
            round_[0], round_[1] = round_[1], round_[0]
        order += round_
    return order


def priorities(order: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Family -> launch path -> Snakemake priority: the first in `order` the highest, so that the scheduler,
    which starts the ready job of highest priority first, runs them in that order."""
    out: dict[str, dict[str, int]] = {}
    for rank, (family, path) in enumerate(order):
        out.setdefault(family, {})[path] = len(order) - rank
    return out
