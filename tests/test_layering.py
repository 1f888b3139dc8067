"""The package's imports point one way: core at the bottom, the family contract, the families, the engine,
judging, the entry points on top (docs/architecture.md, "Layers"). Every import counts, deferred ones too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from movebench.core import sources

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "movebench"

#: bottom to top; a module may import its own layer and those below. A layer is a folder of the package (the contract:
#: two modules at the top, docs/architecture.md says why). The first matching prefix wins.
LAYERS = [
    ("core", ["movebench.core", "movebench.services"]),
    ("contract", ["movebench.spec", "movebench.reportkit"]),
    ("families", ["movebench.families"]),
    ("engine", ["movebench.engine"]),
    ("judging", ["movebench.judging"]),
    ("entry", ["movebench.campaign", "movebench.cli", "movebench.__main__"]),
]
#: the registry of families (`movebench.families/__init__.py`) is part of the contract: families load through it
REGISTRY = "movebench.families"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    if module == REGISTRY:
        return 1
    if module == "movebench":
        return 0
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} belongs to no layer: add it to tests/test_layering.py and docs/architecture.md")


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> every movebench module it imports: at the top or deferred, absolute, relative, or a literal
    importlib.import_module (core.sources, which the report's rerun trigger also reads)."""
    return {module_name(p, src): sources.imports_of(p, module_name(p, src))
            for p in sorted((src / "movebench").rglob("*.py"))}


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "families" else None


def test_every_module_has_a_layer():
    for module in graph():
        layer_of(module)


def upward_imports(src: Path = SRC) -> list[str]:
    upward = []
    for module, targets in graph(src).items():
        for target in targets:
            if target.startswith("movebench_"):
                upward.append(f"{module} -> {target} (the test cluster's package: no campaign imports it)")
            elif layer_of(target) > layer_of(module):
                upward.append(f"{module} ({LAYERS[layer_of(module)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})")
    return upward


def test_no_import_points_up():
    assert upward_imports() == []


def test_a_family_imports_no_other_family():
    crossing = [f"{m} -> {t}" for m, targets in graph().items() for t in targets
                if family_of(m) and family_of(t) and family_of(m) != family_of(t)]
    assert crossing == []


def test_the_import_graph_has_no_cycle():
    edges = graph()
    # a package's __init__ and its own modules are one unit for Python's import machinery; leave those edges out
    edges = {m: {t for t in ts if t in edges and not t.startswith(m + ".") and not m.startswith(t + ".")}
             for m, ts in edges.items()}
    cycles, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []


PLANTED = {
    "absolute, deferred": "def f():\n    from movebench.judging import report\n",
    "relative": "from ..judging import report\n",
    "relative, from a module": "from ..judging.report import render\n",
    "a string": "import importlib\nreport = importlib.import_module('movebench.judging.report')\n",
    "an f-string": "import importlib\ndef f(x):\n    return importlib.import_module(f'movebench.judging.report.{x}')\n",
}


@pytest.mark.parametrize("how", PLANTED)
def test_the_check_reports_an_upward_import_planted_in_core(how, tmp_path):
    """The real check, not its helpers, on a copy of the package: a core module importing the report, however it is
    spelled, is reported."""
    shutil.copytree(PACKAGE, tmp_path / "movebench", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "movebench" / "core" / "_planted.py").write_text(PLANTED[how])
    assert upward_imports(tmp_path) == ["movebench.core._planted (core) -> movebench.judging.report (judging)"]


@pytest.mark.parametrize("module", ["movebench.engine.config", "movebench.engine.plan", "movebench.spec"])
def test_validation_and_planning_load_no_tables_or_templates(module):
    """Validating and planning a campaign needs neither pandas nor jinja2 (nor the report code)."""
    probe = (f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pandas', 'jinja2', 'matplotlib') or m in ('movebench.judging.report', 'movebench.judging.compare', "
             "'movebench.judging.references', 'movebench.judging.report_verdicts', 'movebench.judging.findings')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
