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

from movebench import families

CAMPAIGN = "campaign"
# Keys every family section has besides its own; the engine applies them (campaign values as defaults).
ENGINE_KEYS = {
    "enabled": {"type": "boolean", "default": True, "description": "Run this family's points."},
    "repetitions": {"type": "integer", "minimum": 1,
                    "description": "Measured repetitions per point; campaign.repetitions when absent."},
    "warmups": {"type": "integer", "minimum": 0,
                "description": "Warm-up repetitions per point (flagged, left out of statistics); "
                               "campaign.warmups when absent."},
}


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


def family_schema(name: str) -> dict:
    """A family's config block (its package's schema.yaml) with the keys every family has."""
    block = yaml.safe_load((families.folder(name) / "schema.yaml").read_text())
    block.setdefault("properties", {}).update(copy.deepcopy(ENGINE_KEYS))
    return block


def full_schema(schema_dir: Path) -> dict:
    """The campaign schema with one property per family."""
    schema = yaml.safe_load((schema_dir / "config.schema.yaml").read_text())
    for name in families.names():
        schema["properties"][name] = family_schema(name)
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


def _renamed_problems(config: dict) -> list:
    """Keys a family renamed: the old name gets its own line naming the new one (and is dropped here)."""
    problems = []
    for name in families.names():
        section = config.get(name)
        if not isinstance(section, dict):
            continue
        for old, hint in families.load(name).renamed.items():
            if old in section:
                problems.append((f"{name}.{old}", section.pop(old), hint))
    return problems


def constraint_problems(fam, section: dict) -> list:
    """Axis values that leave out every point because no combination with them can run."""
    runnable: dict[str, set] = {axis.name: set() for axis in fam.axes}
    reasons: dict[tuple, str] = {}
    for point in fam.combinations(section):
        why = fam.constraint(point)
        for key, value in point.items():
            if why is None:
                runnable[key].add(value)
            else:
                reasons.setdefault((key, value), why)
    problems = []
    for axis in fam.axes:
        for value in dict.fromkeys(axis.expand(section[axis.key])):
            if (axis.name, value) in reasons and value not in runnable[axis.name]:
                problems.append((axis.key, value, reasons[(axis.name, value)]))
    return problems


def validate(config: dict, schema_dir: Path | None = None) -> dict:
    """The config with defaults filled in; raises ConfigError listing every problem."""
    schema_dir = Path(schema_dir or schema_dir_default())
    config = copy.deepcopy(config)
    problems = _renamed_problems(config)
    problems += _schema_problems(config, full_schema(schema_dir))
    broken = {path.split(".")[0].split("[")[0] for path, _, _ in problems}
    if CAMPAIGN not in broken:
        # A family's own checks assume its section passed the schema; others still get checked.
        for name in enabled_families(config):
            if name in broken:
                continue
            fam, section = families.load(name), config[name]
            own = fam.check(section, config[CAMPAIGN])
            if not own:
                own = constraint_problems(fam, section)
            problems += [(f"{name}.{path}", value, hint) for path, value, hint in own]
        from movebench import report_verdicts  # imports pandas: only once the schema passed

        problems += report_verdicts.config_problems(config)
    if problems:
        raise ConfigError(problems)
    for name in enabled_families(config):
        for key in ("repetitions", "warmups"):
            config[name].setdefault(key, config[CAMPAIGN][key])
    return config


def enabled_families(config: dict) -> list[str]:
    return [n for n in families.names() if n in config and config[n].get("enabled", True)]


def grid(config: dict) -> dict[str, list[dict]]:
    """Family name -> its points (ordered parameter dicts) for a validated config."""
    return {name: families.load(name).points(config[name]) for name in enabled_families(config)}


def tasks(config: dict, grid_: dict[str, list[dict]]) -> dict[str, dict[str, dict]]:
    """Family -> point path -> the point's task: what its kernel receives (see movebench.runner)."""
    campaign, out = config[CAMPAIGN], {}
    for name, points in grid_.items():
        fam, section = families.load(name), config[name]
        out[name] = {}
        for point in points:
            ranks, nodes = fam.placement(point)
            out[name][families.point_path(point)] = {
                "family": name, "variant": point[fam.variant], "point": point,
                "settings": fam.kernel_settings(point, section, campaign),
                "repetitions": section["repetitions"], "warmups": section["warmups"], "ranks": ranks, "nodes": nodes}
    return out
