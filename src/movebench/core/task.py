"""A point's task: what its kernel receives, the one shape every layer passes around.

Built by the family (`movebench.spec.Family.task`), planned for every point of a campaign
(`movebench.engine.plan.tasks`), handed to the point rule as JSON, written by `movebench.engine.launch` to a task
file with the paths the kernel writes to, and read back by the kernel (`movebench.core.runner`).
The point goes verbatim, keys in axis order, into every record: it is the record's identity.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

from movebench.core.adaptive import RepetitionPolicy


@dataclass
class Task:
    family: str
    #: the point's value of the family's variant axis (the operation measured)
    variant: str
    #: the point: axis name -> value, in the order of the point's path
    point: dict
    #: the config keys the kernel gets besides the point
    settings: dict
    #: a count, or an adaptive rule (movebench.core.adaptive)
    repetitions: int | dict
    warmups: int
    #: processes the launcher starts, and the nodes they span
    ranks: int
    nodes: int
    #: which of the point's launches this is (0, 1, ...): every record carries it
    launch: int = 0
    #: the point's launches: a count, or the adaptive rule {min, max, ci_target} (launch skips a launch the
    #: rule no longer needs)
    launches: int | dict = 1
    #: the point's communication stack when not the default (movebench.engine.stacks.resolve: name, wheel or prefix,
    #: launcher, env): what the runtime starts the ranks with; a changed definition reruns the point
    stack: dict | None = None
    #: where the kernel writes its records and meta; set by launch, empty in the plan
    out: str = ""
    meta: str = ""

    REQUIRED = ("family", "variant", "point", "settings", "repetitions", "warmups", "ranks", "nodes")

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        """A task from its JSON form; ValueError naming what is missing."""
        if not isinstance(data, dict):
            raise ValueError(f"a task is a JSON object, not {type(data).__name__}")
        missing = [k for k in cls.REQUIRED if k not in data]
        if missing:
            raise ValueError(f"the task lacks {', '.join(missing)}")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @property
    def policy(self) -> RepetitionPolicy:
        return RepetitionPolicy.from_config(self.repetitions)

    def to_dict(self) -> dict:
        """The JSON form, which is also the point rule's params (a rerun trigger): `out` and `meta` only once
        launch has set them, `launch` only past launch 0, and `launches` only as an adaptive rule (launch needs
        it to skip a launch), `stack` only when not the default. So a one-launch point's task is what it was
        before launches existed, and raising a count of launches reruns none of the launches already measured."""
        data = asdict(self)
        for key, empty in (("out", ""), ("meta", ""), ("launch", 0)):
            if data[key] == empty:
                del data[key]
        if not isinstance(data["launches"], dict):
            del data["launches"]
        if data["stack"] is None:
            del data["stack"]
        return data


#: the segment a launch adds to its point's path (launch 0 adds none)
LAUNCH = "launch"


def launch_path(point_path: str, launch: int) -> str:
    """The path of a point's launch: the point's own for launch 0, `<point path>/launch~k` after."""
    return point_path if launch == 0 else f"{point_path}/{LAUNCH}~{launch}"


def point_path_of(path: str) -> str:
    """The point's path from a launch's path (its `launch~k` segment left out)."""
    head, _, last = path.rpartition("/")
    return head if last.startswith(f"{LAUNCH}~") and head else path


def planned_launches(launches: int | dict) -> int:
    """Launches a point may run: the count, or the adaptive rule's max (launches it no longer needs are skipped)."""
    return launches["max"] if isinstance(launches, dict) else int(launches)


def launch_digest(task: Task, sources: str) -> str:
    """What a launch is measured as: its task as planned (less the files launch sets) and the digest of its kernel
    sources, hashed. launch keeps it in the meta (`launched_as`); the workflow takes a launch whose meta holds the
    plan's digest as measured, and measures again one whose task or kernel changed (movebench.campaign)."""
    data = {key: value for key, value in task.to_dict().items() if key not in ("out", "meta")}
    text = json.dumps({"task": data, "kernel_sources": sources}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
