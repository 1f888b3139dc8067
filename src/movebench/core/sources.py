"""Which movebench modules a module imports, read from the source: the report's rerun trigger and the layering
test both ask. Every import counts: at the top or deferred inside a function, absolute or relative, and a
literal `importlib.import_module("movebench....")` (of an f-string, the package its literal part names)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
SRC = PACKAGE.parent


def module_name(path: Path) -> str:
    parts = list(Path(path).resolve().relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: package -> more folders its modules live in (a package's `__path__`, e.g. the families a site adds)
Search = dict[str, list[Path]]


def module_file(name: str, search: Search | None = None) -> Path | None:
    """The source file of a movebench module, None for a name that is not one (an attribute, a class)."""
    bases = [SRC.joinpath(*name.split("."))]
    for package, folders in (search or {}).items():
        if name.startswith(package + "."):
            rest = name[len(package) + 1:].split(".")
            bases += [Path(folder).joinpath(*rest) for folder in folders]
    for base in bases:
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def imports_of(path: Path, name: str | None = None, search: Search | None = None) -> set[str]:
    """Every movebench module the file at `path` (module `name`, by default from its place under src/) imports;
    `from a import b` counts as a.b where a.b is a module, else as a."""
    path = Path(path)
    here = (name or module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                found.add(candidate if module_file(candidate, search) else module)
        elif isinstance(node, ast.Call) and _called(node.func) == "import_module" and node.args:
            named = _literal_prefix(node.args[0])
            if named:
                found.add(named)
    found.discard(".".join(here))  # a package loading its own modules by name
    # movebench_testcluster too: the layering test proves no campaign module imports it
    return {name for name in found if name.split(".")[0].startswith("movebench")}


def _literal_prefix(arg: ast.expr) -> str:
    """The module a literal import_module argument names: "a.b" itself, or of f"a.b.{x}" the package a.b."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rpartition(".")[0]
    return ""


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def closure(roots, search: Search | None = None) -> list[Path]:
    """The files of the modules `roots` (names) and of every movebench module they import, transitively: the
    parents of a module included, since importing a.b runs a/__init__.py first."""
    seen: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in seen:
                continue
            path = module_file(prefix, search)
            if path is None:
                continue
            seen[prefix] = path
            todo.extend(imports_of(path, prefix, search))
    return sorted(seen.values())
