"""Files shipped inside the package, found through `importlib.resources`, so that an installed movebench (a wheel,
not only a source checkout) renders reports and reads references: the page templates (`templates/`), the
schemas (`schemas/`) and the shipped copy of the published references (`data/`).

At the bottom of the package: it imports nothing from movebench, and any layer may use it.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from pathlib import Path

import yaml

#: libyaml's parser where PyYAML has it: the pure-Python one took a fifth of a second of every dry run and of every
#: `python -m movebench` command reading the shipped references, claims and schemas
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Where a source checkout keeps the published references (user-editable config, next to config.yaml).
CHECKOUT_REFERENCES = Path("config") / "references" / "published.yaml"
#: ... and the studies' qualitative claims beside it
CHECKOUT_CLAIMS = Path("config") / "references" / "claims.yaml"


def path(*parts: str) -> Path:
    """A file or folder of the package as a filesystem path (movebench is installed unzipped, as pip does)."""
    return Path(str(resources.files("movebench").joinpath(*parts)))


def templates() -> Path:
    """The folder of the report's and compare's page templates (`*.html.j2`)."""
    return path("templates")


def schema(name: str) -> Path:
    """A schema shipped with the package: `schema("references")` is `schemas/references.schema.yaml`."""
    return path("schemas", f"{name}.schema.yaml")


def load_yaml(text: str):
    """A YAML document read with a safe loader (no Python objects), libyaml's where PyYAML was built with it."""
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


@functools.cache
def _schema_document(name: str) -> dict:
    return load_yaml(schema(name).read_text())


def schema_document(name: str) -> dict:
    """A shipped schema, parsed once per process; a copy each call, since callers extend it."""
    return copy.deepcopy(_schema_document(name))


def checkout() -> Path | None:
    """The source checkout the package runs from (an editable install or PYTHONPATH=src), or None when installed."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "movebench").is_dir() else None


def published_references() -> Path:
    """The references file `campaign.references: published` names: the checkout's `config/references/published.yaml`
    where movebench runs from a checkout (so an edit there is what the report reads), else the package's own
    (`data/published.yaml`; the checkout's file is a link to it)."""
    root = checkout()
    if root is not None and (root / CHECKOUT_REFERENCES).is_file():
        return root / CHECKOUT_REFERENCES
    return path("data", "published.yaml")


def published_claims() -> Path:
    """The studies' claims (`movebench.judging.claims`): the checkout's `config/references/claims.yaml`, else the
    package's own (`data/claims.yaml`; the checkout's file is a link to it), as `published_references`."""
    root = checkout()
    if root is not None and (root / CHECKOUT_CLAIMS).is_file():
        return root / CHECKOUT_CLAIMS
    return path("data", "claims.yaml")
