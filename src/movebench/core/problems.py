"""Problems with a document checked against a JSON schema: what is wrong, where, and what would be valid.

A problem is a triple (key path, bad value, what would be valid); `ConfigError` shows a list of them
as one message, a line each (`<key path> = <bad value>: <what would be valid>`). The campaign config
(movebench.engine.config) and the references file (movebench.judging.references) both report through here.
"""

from __future__ import annotations

import copy
import difflib
import math
import unicodedata
from typing import Any

import jsonschema
import yaml

Problem = tuple[str, Any, str]  # (key path, bad value, what would be valid)


class ConfigError(Exception):
    """Bad config; `problems` holds (key path, value, hint) triples."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__(self.message())

    def message(self) -> str:
        lines = [f"  {path} = {show(value)}: {hint}" for path, value, hint in self.problems]
        noun = "problem" if len(lines) == 1 else "problems"
        return f"invalid movebench config ({len(lines)} {noun}):\n" + "\n".join(lines)


class Verbatim(str):
    """A problem's value shown as it is, without quotes (e.g. a count that stands for the value)."""


def show(value) -> str:
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[repr(value)]  # as YAML spells them
    if isinstance(value, (dict, list)):
        text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


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


def not_ascii(text, valid=()) -> str:
    """Which characters of `text` are not ASCII, and the valid text it is closest to: '' when all are ASCII.

    A look-alike letter (Cyrillic е in `message_sizеs`, a no-break space) prints like the valid one, so
    "unknown key 'message_sizеs'" beside a list holding message_sizes reads as a bug of movebench's.
    """
    if not isinstance(text, str) or text.isascii():
        return ""
    odd = [f"character {i} is U+{ord(c):04X}" + (f" {unicodedata.name(c)}" if unicodedata.name(c, "") else "")
           for i, c in enumerate(text, 1) if not c.isascii()]
    shown = odd[:3] + ([f"and {len(odd) - 3} more"] if len(odd) > 3 else [])
    guess = difflib.get_close_matches(text, [v for v in valid if isinstance(v, str)], n=1, cutoff=0.6)
    return ", ".join(shown) + ", not ASCII" + (f"; did you mean {guess[0]}?" if guess else "")


def _hint(error) -> str:
    v, s = error.validator, error.schema
    if v == "additionalProperties":
        allowed = sorted(s.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        named = [repr(k) + (f" ({not_ascii(k, allowed)})" if not_ascii(k) else "") for k in extra]
        return f"unknown key {', '.join(named)}; valid keys: {', '.join(allowed)}"
    if v == "enum":
        note = not_ascii(error.instance, s["enum"])
        return "must be one of " + ", ".join(map(str, s["enum"])) + (f" ({note})" if note else "")
    if v == "type":
        return f"must be of type {s['type'] if isinstance(s['type'], str) else ' or '.join(s['type'])}"
    if v == "minItems":
        return "must not be empty" if s["minItems"] == 1 else f"needs at least {s['minItems']} items"
    if v == "minLength":
        return "must not be empty"
    if v == "minimum":
        return f"must be >= {s['minimum']}"
    if v == "exclusiveMinimum":
        return f"must be > {s['exclusiveMinimum']}"
    if v == "maximum":
        return f"must be <= {s['maximum']}"
    if v == "exclusiveMaximum":
        return f"must be < {s['exclusiveMaximum']}"
    if v == "required":
        return error.message
    if v in ("oneOf", "anyOf"):
        descs = [sub.get("description") or sub.get("type") for sub in s[v]]
        return "must be " + " or ".join(str(d) for d in descs if d)
    if v == "pattern":
        return s.get("description") or f"must match {s['pattern']}"
    return error.message


def _specific(error):
    """For a mapping that fails every branch of a oneOf: the error of the mapping's branch, which names the key
    (`repetitions: {min: 0}` is `repetitions.min = 0: must be >= 1`, not "must be a count or a rule")."""
    if error.validator not in ("oneOf", "anyOf") or not error.context or not isinstance(error.instance, dict):
        return error
    wrong_type = {e.schema_path[0] for e in error.context if e.validator == "type" and not e.relative_path}
    inner = [e for e in error.context if e.schema_path[0] not in wrong_type]
    return _specific(inner[0]) if inner else error


def schema_problems(config: dict, schema: dict) -> list[Problem]:
    """Every schema error of `config` as a problem; `default`s of missing properties are filled in, in place."""
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    problems = []
    errors = [_specific(e) for e in validator.iter_errors(config)]
    for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        parts = list(error.absolute_path)
        value = error.instance
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            parts, value = parts + [extra[0]], error.instance[extra[0]]
        elif error.validator == "required":
            value = None
        problems.append((key_path(parts), value, _hint(error)))
    return problems
