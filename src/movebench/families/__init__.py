"""The benchmark families: one package each, found by the folder that holds its spec and schema.

A family `X` is a folder `X/` with `__init__.py` (the spec, `FAMILY`), `kernel.py`, `report.py`
(`REPORT`), `schema.yaml`, `report.html.j2` and `environment.yaml` (its conda environment). The
five that ship live here; folders named in `MOVEBENCH_FAMILIES` (paths separated by `:`, each
holding family folders) add more, as `movebench.families.<name>`, without editing anything here.
Nothing outside a family's folder names it.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from movebench.spec import Family
from movebench.spec import point_path as _point_path

if TYPE_CHECKING:  # the annotation only: reportkit imports pandas, and the config reads this module
    from movebench.reportkit import FamilyReport

HERE = Path(__file__).resolve().parent
#: where more families live: folders of family folders, e.g. a site's own or a test's
EXTRA = "MOVEBENCH_FAMILIES"

# The extra folders join this package's path, so that `movebench.families.<name>` (and
# `python -m movebench.families.<name>.kernel` in every rank, which inherits the variable) finds them.
for _folder in filter(None, os.environ.get(EXTRA, "").split(os.pathsep)):
    if str(Path(_folder).resolve()) not in __path__:
        __path__.append(str(Path(_folder).resolve()))


def names() -> list[str]:
    return sorted({p.parent.name for root in __path__ for p in Path(root).glob("*/schema.yaml")})


@cache
def load(name: str) -> Family:
    """The spec of family `name`; an unknown name is a config error upstream."""
    return importlib.import_module(f"{__name__}.{name}").FAMILY


def report(name: str) -> FamilyReport:
    """The family's report hooks, `REPORT` of its report.py (imports pandas: aggregate and the report only)."""
    return importlib.import_module(f"{__name__}.{name}.report").REPORT


def folder(name: str) -> Path:
    for root in __path__:
        if (Path(root) / name / "schema.yaml").exists():
            return Path(root) / name
    return HERE / name


@cache
def implicit_values() -> dict:
    """Axis name -> the value point paths leave out, over every family (an axis means one thing everywhere)."""
    merged: dict = {}
    for name in names():
        for key, value in load(name).implicit.items():
            if merged.setdefault(key, value) != value:
                raise ValueError(f"axis {key!r} leaves out {merged[key]!r} in one family and {value!r} in {name}")
    return merged


def point_path(point: dict) -> str:
    """The path of a point of any family: key~value segments in axis order, implicit values left out."""
    return _point_path(point, implicit_values())


__all__ = ["Family", "folder", "implicit_values", "load", "names", "point_path", "report"]
