"""The benchmark families: one package each, found by the folder that holds its spec and schema.

A family `X` is `movebench/families/X/` with `__init__.py` (the spec, `FAMILY`), `kernel.py`,
`report.py`, `schema.yaml` and `report.html.j2`, plus its conda environment
`workflow/envs/X.yaml`. Nothing outside this folder names a family.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from movebench.spec import Family, point_path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/schema.yaml"))


@cache
def load(name: str) -> Family:
    """The spec of family `name`; an unknown name is a config error upstream."""
    return importlib.import_module(f"{__name__}.{name}").FAMILY


def report_module(name: str):
    """The family's tables and figures (imports pandas and seaborn: aggregate and report only)."""
    return importlib.import_module(f"{__name__}.{name}.report")


def folder(name: str) -> Path:
    return HERE / name


__all__ = ["Family", "folder", "load", "names", "point_path", "report_module"]
