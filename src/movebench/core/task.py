"""A point's task: what its kernel receives, the one shape every layer passes around.

Built by the family (`movebench.spec.Family.task`), planned for every point of a campaign
(`movebench.plan.tasks`), handed to the point rule as JSON, written by `movebench.launch` to a task
file with the paths the kernel writes to, and read back by the kernel (`movebench.core.runner`).
The point goes verbatim, keys in axis order, into every record: it is the record's identity.
"""

from __future__ import annotations

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
        """The JSON form; `out` and `meta` only once launch has set them (the plan's form has neither)."""
        data = asdict(self)
        for key in ("out", "meta"):
            if not data[key]:
                del data[key]
        return data
