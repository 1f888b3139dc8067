"""A results folder's layout: where each kind of file of a campaign lives, and a point's launch <-> its files.

    <results>/raw/<family>/<launch path>.jsonl       a launch's records (core.records)
    <results>/raw/<family>/<launch path>.meta.json   its meta: environment, host load, timings
    <results>/failed/<family>/<launch path>.json     why a launch failed (no records then)
    <results>/.kept/<family>/<launch path>.*         a finished launch's files while its group reruns
    <results>/tables/<family>.parquet, ...           aggregate's tables, which compare and the report read
    <results>/logs/...                               one log per rule
    <results>/campaign_run.json                      the run's record (python -m movebench run)
    <results>/report.html, report.partial.html       the report, or what a failed run leaves of it
    <results>/launch_order.json                      the order the run gave its launches
    <results>/.retries                               the run's ledger of disturbed launches measured again

A launch path is its point's path (`key~value` segments, core.task.launch_path) plus `launch~k` past
launch 0. The family is the folder under raw/ and the launch path the rest, relative to this layout's
root: never found by searching a path for a family's name, which a results folder may contain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RECORDS_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
FAILURE_SUFFIX = ".json"


@dataclass(frozen=True)
class ResultsLayout:
    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of(cls, config: dict, base: Path | None = None) -> ResultsLayout:
        """The layout of a campaign's `results_dir`, a relative one taken from `base` when given."""
        root = Path(config["campaign"]["results_dir"])
        return cls(root if root.is_absolute() or base is None else Path(base) / root)

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def failed(self) -> Path:
        return self.root / "failed"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kept(self) -> Path:
        return self.root / ".kept"

    @property
    def run_record(self) -> Path:
        return self.root / "campaign_run.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def partial_report(self) -> Path:
        return self.root / "report.partial.html"

    @property
    def launch_order(self) -> Path:
        return self.root / "launch_order.json"

    @property
    def retry_ledger(self) -> Path:
        return self.root / ".retries"

    # --- a launch's files ---

    def records(self, family: str, launch_path: str) -> Path:
        return self.raw / family / f"{launch_path}{RECORDS_SUFFIX}"

    def meta(self, family: str, launch_path: str) -> Path:
        return self.raw / family / f"{launch_path}{META_SUFFIX}"

    def failure(self, family: str, launch_path: str) -> Path:
        return self.failed / family / f"{launch_path}{FAILURE_SUFFIX}"

    def tabled(self) -> list[str]:
        """The families whose records table aggregate wrote here."""
        return sorted(p.stem for p in self.tables.glob("*.parquet"))

    def families(self) -> list[str]:
        """The families with a table or records here."""
        return sorted(set(self.tabled()) | {p.name for p in self.raw.glob("*") if p.is_dir()})

    def table(self, family: str, kind: str = "") -> Path:
        """tables/<family>.parquet (kind ""), or tables/<family>_<kind>.csv (summary, points) or <family>.csv."""
        if kind == "csv":
            return self.tables / f"{family}.csv"
        return self.tables / (f"{family}_{kind}.csv" if kind else f"{family}.parquet")

    def named(self, path: Path) -> str:
        """A file of this layout as the tables and the report name it: relative to the results folder."""
        return Path(path).relative_to(self.root).as_posix()

    # --- and back ---

    def launch_of(self, path: Path) -> tuple[str, str]:
        """(family, launch path) of a file under raw/, failed/ or .kept/; ValueError for any other file."""
        path = Path(path)
        for folder in (self.raw, self.failed, self.kept):
            try:
                rel = path.relative_to(folder)
            except ValueError:
                continue
            if len(rel.parts) < 2:
                break
            name = rel.name
            for suffix in (META_SUFFIX, RECORDS_SUFFIX, FAILURE_SUFFIX):
                if name.endswith(suffix):
                    name = name[: -len(suffix)]
                    break
            return rel.parts[0], "/".join((*rel.parts[1:-1], name))
        raise ValueError(f"{path}: not a launch's file under {self.raw}, {self.failed} or {self.kept}")

    @classmethod
    def holding(cls, records: Path, family: str, launch_path: str) -> ResultsLayout:
        """The layout whose records file of `family`'s launch `launch_path` is `records`."""
        records = Path(records)
        depth = 2 + launch_path.count("/")  # raw/<family>/ and the launch path's folders
        layout = cls(records.parents[depth])
        if layout.records(family, launch_path) != records:
            raise ValueError(f"{records}: not {family}'s launch {launch_path} in a results folder")
        return layout

    @staticmethod
    def meta_of(records: Path) -> Path:
        """The meta beside a records file."""
        records = Path(records)
        return records.with_name(records.name.removesuffix(RECORDS_SUFFIX) + META_SUFFIX)
