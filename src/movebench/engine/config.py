"""The campaign config: the file, schema validation with defaults, family checks, the grid.

Everything that can be wrong with a config is found here, before any job exists,
and reported as one message with a line per problem:
`<key path> = <bad value>: <what would be valid>`. A file that is not a campaign at all
(missing, not YAML, empty, not a mapping, a key given twice) is one line naming the file
and, for YAML, the line (`load`).
"""

from __future__ import annotations

import copy
import errno
import itertools
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from movebench import families, spec
from movebench.core import resources
from movebench.core.problems import ConfigError, Problem, Verbatim, key_path, schema_problems, show
from movebench.engine import stacks

CAMPAIGN = "campaign"
# Keys every family section has besides its own; the engine applies them (campaign values as defaults).
ENGINE_KEYS = {
    "enabled": {"type": "boolean", "default": True, "description": "Run this family's points."},
    # campaign.repetitions' schema (a count or an adaptive rule) without its default, filled in by family_schema.
    "repetitions": {"description": "Measured repetitions per point, a count or an adaptive rule; "
                                   "campaign.repetitions when absent."},
    "warmups": {"type": "integer", "minimum": 0,
                "description": "Warm-up repetitions per launch of a point (flagged, left out of statistics); "
                               "campaign.warmups when absent."},
    # campaign.launches' schema, filled in by family_schema.
    "launches": {"description": "Launches per point, a count or an adaptive rule; campaign.launches, else the "
                                "family's default, when absent."},
}

#: The key of the families whose points may share a launch (Family.launch_group_axes).
LAUNCH_GROUPS_KEY = {
    "type": "boolean",
    "description": "Run the points that share what a launch fixes (the family's launch group axes, e.g. kv's "
                   "nodes, clients, managers and data format) in one launch, one after another in a shuffled "
                   "order; each point still writes its own records and gets its launches. The family's default "
                   "when absent (kv: true, else false).",
}

#: The config keys of the factors the engine defines (movebench.spec.MPI_THREAD_LEVEL, MEMORY_MODE), in the
#: block of every family whose axes include them.
FACTOR_KEYS = {
    "mpi_thread_levels": {
        "type": "array", "minItems": 1, "default": ["multiple"], "items": {"enum": list(spec.THREAD_LEVELS)},
        "description": "MPI thread level the ranks ask of MPI_Init_thread (MPI4PY_RC_THREAD_LEVEL), swept like any "
                       "key. multiple (mpi4py's default) stays usable when ranks outnumber free cores; single lowers "
                       "small-message latency at ranks <= cores and busy-polls to a crawl beyond "
                       "(docs/notes/kernels.md)."},
    "memory_modes": {
        "type": "array", "minItems": 1, "default": ["4k"], "items": {"enum": list(spec.MEMORY_MODES)},
        "description": "Pages behind the buffers the kernel times, swept like any key: 4k base pages whatever the "
                       "system's THP setting (what OSU's C buffers get), thp transparent huge pages on a 2 MiB "
                       "boundary. Moves large messages as much as many effects measured "
                       "(docs/notes/kernels.md, section 5); "
                       "meta records what each buffer got."},
    "stacks": {
        "type": "array", "minItems": 1, "default": ["default"], "items": {"type": "string"},
        "description": "Communication stacks the points run on, swept like any key (docs/stacks.md): default (the "
                       "campaign's own Python and MPI, the profile's launcher; kept out of the point path), the "
                       "built-in mpich-ucx, mpich-ofi, openmpi, openmpi-ucx, impi, or a name of campaign.stacks."},
    "env": {
        "type": "object", "default": {},
        "additionalProperties": {"oneOf": [
            {"type": "array", "items": {"type": ["string", "number", "null"]}},
            {"type": ["string", "number", "null"]}]},
        "description": "Tuning variables set for the ranks, each a list of values swept like a key (null: not set), "
                       "e.g. {UCX_TLS: [tcp, 'sm,tcp']}; names from the allow-list of docs/stacks.md (MPIR_CVAR_*, "
                       "OMPI_MCA_*, UCX_TLS, FI_PROVIDER, ...). Recorded in every point; none set stays out of the "
                       "path."},
}


class ConfigFileError(Exception):
    """A config file that is not a campaign: one line naming the file (and the line, for YAML)."""


def family_schema(name: str) -> dict:
    """A family's config block (its package's schema.yaml) with the keys every family has."""
    block = resources.load_yaml((families.folder(name) / "schema.yaml").read_text())
    engine = copy.deepcopy(ENGINE_KEYS)
    campaign = resources.schema_document("config")
    repetitions = campaign["properties"][CAMPAIGN]["properties"]["repetitions"]  # schema_document gave a copy
    repetitions.pop("default", None)
    engine["repetitions"] = {**repetitions, **engine["repetitions"]}
    launches = campaign["properties"][CAMPAIGN]["properties"]["launches"]
    engine["launches"] = {**launches, **engine["launches"]}
    block.setdefault("properties", {}).update(engine)
    if families.load(name).launch_group_axes:
        block["properties"]["launch_groups"] = copy.deepcopy(LAUNCH_GROUPS_KEY)
    for axis in families.load(name).axes:
        if axis.key in FACTOR_KEYS:
            block["properties"][axis.key] = copy.deepcopy(FACTOR_KEYS[axis.key])
    return block


def full_schema() -> dict:
    """The campaign schema (the package's schemas/config.schema.yaml) with one property per family."""
    schema = resources.schema_document("config")
    for name in families.names():
        schema["properties"][name] = family_schema(name)
    return schema


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error (PyYAML keeps the last).

    Merge keys (`<<: *common`, `<<: [*a, *b]`) are YAML's own and Snakemake's loader takes them: a key
    they bring in may be overridden by one written in the mapping, which is what they are for, so only
    the keys written in a mapping are compared with each other.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node):
        # PyYAML flattens a mapping in place (the merged keys join its own) and may do so for an anchored
        # mapping before constructing it, when another mapping merges it: the check runs once, on the
        # mapping as written, whichever comes first.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            self._refuse_repeated_keys(node)
        super().flatten_mapping(node)

    def _refuse_repeated_keys(self, node):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            mark = key_node.start_mark
            try:
                first = seen.setdefault(key, mark)
            except TypeError:  # an unhashable key: PyYAML's own error says so
                return
            if first is mark:
                continue
            # Two on one line (a flow mapping, `{ranks: [2], ranks: [4]}`) are told apart by their column.
            if first.line == mark.line:
                raise ConfigFileError(f"line {mark.line + 1}, column {mark.column + 1}: key {key!r} is given twice "
                                      f"(first at column {first.column + 1} of the same line); YAML would silently "
                                      "keep only the last one")
            raise ConfigFileError(f"line {mark.line + 1}: key {key!r} is given twice (first on line "
                                  f"{first.line + 1}); YAML would silently keep only the last one")


def load(path) -> dict:
    """The campaign in a YAML (or JSON) file; ConfigFileError, one line, for a file that is not a campaign."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigFileError(f"config file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"config file {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigFileError as exc:
        raise ConfigFileError(f"config file {path}, {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "a syntax error"
        if exc.context and exc.problem:
            started = exc.context_mark
            what += f" ({exc.context.removeprefix('while ')}" + (
                f" that starts on line {started.line + 1})" if started and started.line != mark.line else ")")
        raise ConfigFileError(f"config file {path}{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"config file {path}: not valid YAML: {exc}") from None
    if data is None:
        raise ConfigFileError(f"config file {path} is empty: a campaign is a mapping with a `campaign:` section and "
                              "one section per family to run, e.g. `campaign: {name: mine}` and `shuffle: {}`")
    if not isinstance(data, dict):
        raise ConfigFileError(f"config file {path}: the top level is {_kind(data)}, not a mapping: a campaign is "
                              "`campaign:` and one section per family to run (config/config.yaml shows one)")
    return data


def _kind(value) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {show(value)}"
    return f"the value {show(value)}"


def recheck_files(paths) -> None:
    """What Snakemake's loader lets through in files it already read: a key given twice (PyYAML keeps the last)."""
    for path in paths:
        try:
            if Path(path).suffix != ".json" and "__use_yte__" not in Path(path).read_text():
                load(path)
        except OSError:
            continue


def _renamed_problems(config: dict) -> list:
    """Keys a family renamed: the old name gets its own line naming the new one (and is dropped here)."""
    problems = []
    for name in families.names():
        section = config.get(name)
        if not isinstance(section, dict):
            continue
        for old, hint in families.load(name).renamed_keys.items():
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


def _non_finite_problems(value, parts=()) -> list:
    """Every .nan / .inf in the config: YAML reads them as floats that every number check lets through."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(key_path(parts), value, "must be a finite number (YAML's .nan and .inf are not)")]
    if isinstance(value, dict):
        return [p for key, sub in value.items() for p in _non_finite_problems(sub, (*parts, key))]
    if isinstance(value, list):
        return [p for i, sub in enumerate(value) for p in _non_finite_problems(sub, (*parts, i))]
    return []


def _section_problems(config: dict) -> list:
    """A family section that is not a mapping (`shuffle:` with nothing after it is null)."""
    problems = []
    for name in families.names():
        if name in config and not isinstance(config[name], dict):
            problems.append((name, config[name], f"must be a mapping of {name}'s keys: `{name}: {{}}` runs it with "
                             f"its defaults, `{name}: {{enabled: false}}` or no section leaves it out"))
            del config[name]
    return problems


def results_dir_problems(campaign: dict) -> list:
    """A results_dir that cannot hold a campaign's files: empty, the filesystem root, a file, braces, unwritable."""
    value = campaign.get("results_dir")
    if not isinstance(value, str):
        return []
    key = "campaign.results_dir"
    if not value.strip():
        return [(key, value, "must name a folder, e.g. results")]
    if value != value.strip() or "\n" in value:
        return [(key, value, "must not start or end with spaces or hold a line break")]
    if "{" in value or "}" in value:
        return [(key, value, "must not contain { or }: Snakemake reads them as wildcards in output paths")]
    path = Path(value).expanduser()
    if path.resolve() == Path(path.resolve().anchor):
        return [(key, value, "must not be the filesystem root: the campaign writes raw/, tables/, logs/ there")]
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is" if probe == path else f"is inside {probe}, which is"
        return [(key, value, f"{what} an existing file, not a folder")]
    why = _cannot_write(probe) if probe.is_dir() else None
    if why:
        what = "it" if probe == path else f"{probe}, the nearest folder of it that exists,"
        return [(key, value, f"cannot be written: {what} {why}; name a folder this user can write")]
    return []


def _cannot_write(folder: Path) -> str | None:
    """Why a file cannot be made in `folder`, found by making one; None when it can.

    Permission bits and os.access do not tell: root passes every bit yet cannot write a read-only mount,
    and an ACL, a root-squashed NFS export or a quota answers only when a file is made. Without this a
    results_dir nobody can write passes `plan` and the dry run, and the run fails at its first job.
    """
    try:
        fd, name = tempfile.mkstemp(prefix=".movebench-write-check-", dir=folder)
    except OSError as exc:
        reasons = {errno.EROFS: "is on a read-only filesystem", errno.EACCES: "is not writable by this user",
                   errno.EPERM: "is not writable by this user", errno.ENOSPC: "is on a full filesystem",
                   errno.EDQUOT: "is over this user's disk quota"}
        return reasons.get(exc.errno, f"refuses a new file ({exc.strerror or exc})")
    os.close(fd)
    os.unlink(name)
    return None


def repetitions_problems(config: dict, names) -> list:
    """Adaptive rules the schema lets through but no point can follow: min above max, a budget the timeout cuts."""
    timeout = config[CAMPAIGN]["timeout"]
    problems = []
    for where in (CAMPAIGN, *names):
        rule = config[where].get("repetitions")
        if not isinstance(rule, dict):
            continue
        if rule["min"] > rule["max"]:
            problems.append((f"{where}.repetitions", rule, f"min {rule['min']} is above max {rule['max']}: "
                             "need min <= max"))
        if rule.get("max_seconds") is not None and rule["max_seconds"] >= timeout:
            problems.append((f"{where}.repetitions.max_seconds", rule["max_seconds"],
                             f"must be below campaign.timeout = {timeout:g} s, which kills the point first"))
    for where in (CAMPAIGN, *names):
        rule = config[where].get("launches")
        if isinstance(rule, dict) and rule.get("min", 2) > rule["max"]:
            problems.append((f"{where}.launches", rule, f"min {rule['min']} is above max {rule['max']}: "
                             "need min <= max"))
    return problems


def stack_problems(config: dict, names) -> list:
    """The campaign's stack definitions, each family's stacks (defined ones only) and tuning variables (the
    allow-list, no secret, values a path can hold)."""
    used, problems = {}, []
    for name in names:
        keys = {axis.key for axis in families.load(name).axes}
        if "stacks" in keys:
            used[name] = config[name].get("stacks", ["default"])
        if "env" in keys:
            problems += stacks.env_problems(name, config[name].get("env", {}))
    return stacks.problems(config[CAMPAIGN], used) + problems


def _axis_values(fam, section) -> dict[str, list]:
    return {axis.key: list(dict.fromkeys(axis.expand(section[axis.key]))) for axis in fam.axes}


def count_points(fam, section: dict, limit: int) -> int:
    """The family's combinations, counted up to limit + 1 (never built when there are more)."""
    return sum(1 for _ in itertools.islice(fam.combinations(section), limit + 1))


def _multiplying_keys(fam, section) -> str:
    counts = {key: len(values) for key, values in _axis_values(fam, section).items()}
    parts = []
    for axis in fam.axes:
        note = " (some points only)" if axis.conditional else ""
        parts.append(f"{axis.key} {counts[axis.key]}{note}")
    return " x ".join(parts)


def grid_size_problems(config: dict, names) -> tuple[list, set]:
    """Families whose grid has more points than campaign.max_points, and the total; counted before any list."""
    limit = config[CAMPAIGN]["max_points"]
    problems, too_big, counts = [], set(), {}
    for name in names:
        fam, section = families.load(name), config[name]
        try:
            counts[name] = count_points(fam, section, limit)
        except (ValueError, TypeError, KeyError):
            continue  # the family's own check names the bad value
        if counts[name] > limit:
            too_big.add(name)
            problems.append((f"{name} points", Verbatim(f"more than {limit}"), f"{_multiplying_keys(fam, section)}, "
                             f"above campaign.max_points = {limit}: sweep fewer values or raise max_points"))
    total = sum(counts.values())
    if not too_big and total > limit:
        per_family = ", ".join(f"{name} {n}" for name, n in counts.items())
        problems.append(("campaign.max_points", limit, f"the campaign has {total} points ({per_family}): sweep "
                         "fewer values or raise max_points"))
    return problems, too_big


def duplicate_warnings(config: dict) -> list[str]:
    """Values given more than once in a swept list (4KiB and 4096 alike): each point runs once."""
    lines = []
    for name in enabled_families(config):
        fam, section = families.load(name), config[name]
        for axis in fam.axes:
            raw = section.get(axis.key)
            if not isinstance(raw, list):
                continue
            try:
                values = [axis.expand([v]) for v in raw]
            except (ValueError, TypeError):
                continue
            seen: dict = {}
            for given, expanded in zip(raw, values, strict=True):
                for value in expanded:
                    seen.setdefault(value, []).append(given)
            for value, given in seen.items():
                if len(given) > 1:
                    lines.append(f"{name}.{axis.key}: {show(value)} is given {len(given)} times "
                                 f"({', '.join(show(g) for g in given)}); its points run once")
    return lines


def validate(config: dict, warn=None, checks: Iterable[Callable[[dict], list[Problem]]] = ()) -> dict:
    """The config with defaults filled in; raises ConfigError listing every problem.

    `warn(line)` gets what is accepted but probably not meant (default: printed to stderr). `checks` are
    run on a config whose campaign section passed, their problems listed with the others: the layers above
    check the campaign keys they own (compare_to, references: `movebench.campaign.validate`), so that this
    module depends on no report or verdict code.
    """
    if not isinstance(config, dict):
        raise ConfigError([("(top level)", config, "must be a mapping: `campaign:` and one section per family")])
    config = copy.deepcopy(config)
    problems = _non_finite_problems(config)
    if problems:
        raise ConfigError(problems)
    problems = _section_problems(config)
    problems += _renamed_problems(config)
    problems += schema_problems(config, full_schema())
    broken = {path.split(".")[0].split("[")[0] for path, _, _ in problems}
    if CAMPAIGN not in broken:
        problems += results_dir_problems(config[CAMPAIGN])
        named = enabled_families(config)
        if not named and not problems:
            off = sorted(n for n in families.names() if n in config)
            problems.append(("families", Verbatim(f"none enabled ({', '.join(off)} off)" if off else "none"),
                             "the campaign has no point to run: add a family section such as `shuffle: {}` "
                             f"(families: {', '.join(families.names())})"))
        # A family's own checks assume its section passed the schema; others still get checked.
        healthy = [name for name in named if name not in broken]
        problems += repetitions_problems(config, healthy)
        size_problems, too_big = grid_size_problems(config, healthy)
        problems += size_problems
        for name in healthy:
            if name in too_big:
                continue
            fam, section = families.load(name), config[name]
            own = fam.check(section, config[CAMPAIGN])
            if not own:
                own = constraint_problems(fam, section)
            problems += [(f"{name}.{path}", value, hint) for path, value, hint in own]
        problems += stack_problems(config, healthy)
        for check in checks:
            problems += check(config)
    if problems:
        raise ConfigError(problems)
    for line in duplicate_warnings(config):
        (warn or _stderr)(f"movebench: warning: {line}")
    for name in enabled_families(config):
        for key in ("repetitions", "warmups"):
            config[name].setdefault(key, config[CAMPAIGN][key])
        config[name].setdefault("launches", config[CAMPAIGN].get("launches", families.load(name).launches))
        config[name].setdefault("launch_groups", families.load(name).launch_groups)
    return config


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def enabled_families(config: dict) -> list[str]:
    return [n for n in families.names() if isinstance(config.get(n), dict) and config[n].get("enabled", True)]
