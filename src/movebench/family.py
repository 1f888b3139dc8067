"""What every benchmark family provides to the engine.

The engine (config, grid, launch, aggregate, report) knows families only through
this interface; a family is the module `movebench.<name>` with a `FAMILY` object
and its schema block `workflow/schemas/families/<name>.schema.yaml`.
"""

from __future__ import annotations

import importlib
import math


class Family:
    """A family's grid, launch and report hooks. Subclass and set `name`."""

    name: str = ""
    #: "mpi": the kernel runs under `{resources.mpi} -n <ranks>`; "dragon": under the dragon launcher.
    launcher: str = "mpi"
    #: Columns that name a point (besides family and variant), in path order.
    point_keys: tuple[str, ...] = ()
    #: Numeric record fields summarised per point besides bandwidth_Bps and elapsed_s.
    summary_measures: tuple[str, ...] = ()

    def check(self, section: dict, campaign: dict) -> list[tuple[str, object, str]]:
        """Problems the schema cannot express: (key path, bad value, what would be valid)."""
        return []

    def points(self, section: dict, campaign: dict) -> list[dict]:
        """The grid: one ordered dict of parameters per point; its keys become the path."""
        raise NotImplementedError

    def kernel_args(self, point: dict, section: dict, campaign: dict) -> list[str]:
        """Arguments of `python -m movebench.<name>` for this point (records path excluded)."""
        raise NotImplementedError

    def launch_command(self, python_argv: list[str], nodes: int) -> list[str]:
        """The full command of a point for a family whose launcher is not "mpi"."""
        raise NotImplementedError(f"family {self.name} has launcher {self.launcher!r} but no launch_command")

    def ranks(self, point: dict) -> int:
        return int(point.get("ranks", 1))

    def nodes(self, point: dict) -> int:
        return int(point.get("nodes", 1))

    def memory_mb(self, point: dict, section: dict) -> int:
        """Memory the point's job asks for (Slurm mem_mb); families refine it."""
        return 1024 * self.nodes(point)

    def derive(self, table):
        """Columns computed across points (e.g. efficiency against a peak); default none."""
        return table

    def report_context(self, table, summary, campaign: dict) -> dict:
        """What the family's report template (report/<name>.html.j2) needs."""
        return {}


def load(name: str) -> Family:
    """The family object of `movebench.<name>`; an unknown name is a config error upstream."""
    module = importlib.import_module(f"movebench.{name}")
    return module.FAMILY


def point_path(point: dict) -> str:
    """Paramspace-style path of a point: key~value segments in the family's order."""
    return "/".join(f"{k}~{_fmt(v)}" for k, v in point.items())


def _fmt(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def parse_point_path(path: str) -> dict:
    """Inverse of point_path; values come back as int, float or str."""
    point = {}
    for segment in path.strip("/").split("/"):
        key, _, text = segment.partition("~")
        point[key] = _parse_scalar(text)
    return point


def _parse_scalar(text: str):
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if kind is float and (math.isnan(value) or math.isinf(value)):
            return text
        return value
    return text
