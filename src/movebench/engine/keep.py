"""Keep and restore: a launch's finished points that nobody booked wait here for the rerun that will.

Snakemake deletes every output of a failed job, and a launch group that fails in one member must not lose the
others; a snakemake that ended while a launch ran will rerun it. Either way the finished points' files are
linked into the kept folder (`--kept`) with their task, and the rerun puts them back when the task is unchanged
instead of measuring them again. A launch's member (`movebench.engine.launch.Member`) says where its files go.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from movebench.core import records


def kept_files(member) -> tuple[Path, Path, Path]:
    """The member's records, meta and task in the kept folder."""
    base = member.kept / member.task.family / member.where
    return (base.with_name(base.name + ".jsonl"), base.with_name(base.name + ".meta.json"),
            base.with_name(base.name + ".task.json"))


def restore(member) -> bool:
    """A point finished in an earlier run that nobody booked (its launch group failed, or the snakemake that
    started it ended), put back when its task is unchanged."""
    if member.kept is None:
        return False
    records_kept, meta_kept, task_kept = kept_files(member)
    try:
        same = json.loads(task_kept.read_text()) == member.task.to_dict()
    except (OSError, json.JSONDecodeError):
        return False
    if not same or not records_kept.exists() or not meta_kept.exists():
        return False
    member.out.parent.mkdir(parents=True, exist_ok=True)
    for kept, final in ((meta_kept, member.meta), (records_kept, member.out)):
        shutil.copyfile(kept, final)
    member.failed.unlink(missing_ok=True)
    return True


def keep(member) -> None:
    """Links to a finished member's files and its task, for a rerun to put back."""
    if member.kept is None:
        return
    records_kept, meta_kept, task_kept = kept_files(member)
    with contextlib.suppress(OSError):
        records_kept.parent.mkdir(parents=True, exist_ok=True)
        for final, kept in ((member.out, records_kept), (member.meta, meta_kept)):
            kept.unlink(missing_ok=True)
            os.link(final, kept)
        records.write_json(task_kept, member.task.to_dict())


def forget(member) -> None:
    """The member's kept files, once its launch was booked."""
    if member.kept is not None:
        for path in kept_files(member):
            path.unlink(missing_ok=True)
