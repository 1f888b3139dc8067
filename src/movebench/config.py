"""The campaign config: schema validation with defaults, family checks, the grid.

Everything that can be wrong with a config is found here, before any job exists,
and reported as one message with a line per problem:
`<key path> = <bad value>: <what would be valid>`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import yaml

from movebench import family as families

CAMPAIGN = "campaign"


class ConfigError(Exception):
    """Bad config; `problems` holds (key path, value, hint) triples."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__(self.message())

    def message(self) -> str:
        lines = [f"  {path} = {_show(value)}: {hint}" for path, value, hint in self.problems]
        noun = "problem" if len(lines) == 1 else "problems"
        return f"invalid movebench config ({len(lines)} {noun}):\n" + "\n".join(lines)


def _show(value) -> str:
    if isinstance(value, (dict, list)):
        text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def schema_dir_default() -> Path:
    return Path(__file__).resolve().parents[2] / "workflow" / "schemas"


def family_names(schema_dir: Path) -> list[str]:
    return sorted(p.name.removesuffix(".schema.yaml") for p in (schema_dir / "families").glob("*.schema.yaml"))


def full_schema(schema_dir: Path) -> dict:
    """The campaign schema with one property per family schema block."""
    schema = yaml.safe_load((schema_dir / "config.schema.yaml").read_text())
    for name in family_names(schema_dir):
        block = yaml.safe_load((schema_dir / "families" / f"{name}.schema.yaml").read_text())
        block.setdefault("properties", {})["enabled"] = {
            "type": "boolean", "default": True, "description": "Run this family's points."}
        schema["properties"][name] = block
    return schema


def _with_defaults(validator_class):
    """A validator that fills in `default` of missing properties as it validates."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _hint(error) -> str:
    v, s = error.validator, error.schema
    if v == "additionalProperties":
        allowed = sorted(s.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"unknown key {', '.join(map(repr, extra))}; valid keys: {', '.join(allowed)}"
    if v == "enum":
        return "must be one of " + ", ".join(map(str, s["enum"]))
    if v == "type":
        return f"must be of type {s['type'] if isinstance(s['type'], str) else ' or '.join(s['type'])}"
    if v == "minItems":
        return "must not be empty" if s["minItems"] == 1 else f"needs at least {s['minItems']} items"
    if v == "minimum":
        return f"must be >= {s['minimum']}"
    if v == "exclusiveMinimum":
        return f"must be > {s['exclusiveMinimum']}"
    if v == "maximum":
        return f"must be <= {s['maximum']}"
    if v == "required":
        return error.message
    if v in ("oneOf", "anyOf"):
        descs = [sub.get("description") or sub.get("type") for sub in s[v]]
        return "must be " + " or ".join(str(d) for d in descs if d)
    if v == "pattern":
        return s.get("description") or f"must match {s['pattern']}"
    return error.message


def _schema_problems(config: dict, schema: dict):
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    problems = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        parts = list(error.absolute_path)
        value = error.instance
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            parts, value = parts + [extra[0]], error.instance[extra[0]]
        elif error.validator == "required":
            value = None
        problems.append((_path(parts), value, _hint(error)))
    return problems


def load(path) -> dict:
    with open(path) as f:
        return yaml.safe_load(f) or {}


def validate(config: dict, schema_dir: Path | None = None) -> dict:
    """The config with defaults filled in; raises ConfigError listing every problem."""
    schema_dir = Path(schema_dir or schema_dir_default())
    config = copy.deepcopy(config)
    problems = _schema_problems(config, full_schema(schema_dir))
    broken = {path.split(".")[0].split("[")[0] for path, _, _ in problems}
    if CAMPAIGN not in broken:
        # A family's own checks assume its section passed the schema; others still get checked.
        for name in enabled_families(config, schema_dir):
            if name not in broken:
                for path, value, hint in families.load(name).check(config[name], config[CAMPAIGN]):
                    problems.append((f"{name}.{path}", value, hint))
    if problems:
        raise ConfigError(problems)
    return config


def enabled_families(config: dict, schema_dir: Path | None = None) -> list[str]:
    names = family_names(Path(schema_dir or schema_dir_default()))
    return [n for n in names if n in config and config[n].get("enabled", True)]


def grid(config: dict, schema_dir: Path | None = None) -> dict[str, list[dict]]:
    """Family name -> its points (ordered parameter dicts) for a validated config."""
    return {name: families.load(name).points(config[name], config[CAMPAIGN])
            for name in enabled_families(config, schema_dir)}
