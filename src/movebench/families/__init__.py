"""The benchmark families: one package each, found by the folder that holds its spec and schema.

A family `X` is `movebench/families/X/` with `__init__.py` (the spec, `FAMILY`), `kernel.py`,
`report.py`, `schema.yaml` and `report.html.j2`, plus its conda environment
`workflow/envs/X.yaml`. Nothing outside this folder names a family.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from movebench.spec import Family, point_path

if TYPE_CHECKING:  # the annotation only: reportkit imports pandas, and the config reads this module
    from movebench.reportkit import FamilyReport

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/schema.yaml"))


@cache
def load(name: str) -> Family:
    """The spec of family `name`; an unknown name is a config error upstream."""
    return importlib.import_module(f"{__name__}.{name}").FAMILY


def report(name: str) -> FamilyReport:
    """The family's report hooks, `REPORT` of its report.py (imports pandas: aggregate and the report only)."""
    return importlib.import_module(f"{__name__}.{name}.report").REPORT


def folder(name: str) -> Path:
    return HERE / name


__all__ = ["Family", "folder", "load", "names", "point_path", "report"]
