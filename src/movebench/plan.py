"""A validated campaign planned: its grid of points and each point's task.

`grid` expands every enabled family's section into its points (ordered parameter dicts, in axis
order, constraints applied); `tasks` gives each point its task (`Family.planned_task`), keyed by the
point's path, which is how a point rule finds its task (Paramspace's `instance` idea).
"""

from __future__ import annotations

from movebench import families
from movebench.config import CAMPAIGN, enabled_families
from movebench.core.task import Task


def grid(config: dict) -> dict[str, list[dict]]:
    """Family name -> its points (ordered parameter dicts) for a validated config."""
    return {name: families.load(name).points(config[name]) for name in enabled_families(config)}


def tasks(config: dict, grid_: dict[str, list[dict]]) -> dict[str, dict[str, Task]]:
    """Family -> point path -> the point's task: what its kernel receives."""
    out = {}
    for name, points in grid_.items():
        fam, section = families.load(name), config[name]
        out[name] = {families.point_path(point): fam.planned_task(point, section, config[CAMPAIGN])
                     for point in points}
    return out
