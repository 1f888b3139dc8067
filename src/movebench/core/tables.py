"""What every reader of records agrees on: which repetitions count."""

from __future__ import annotations


def counted(table):
    """The measured repetitions: warm-ups and failed repetitions left out.

    `table`: a records DataFrame (aggregate's tables, compare's records), returned filtered (an empty one as it
    is), or a list of records (a kernel's `.jsonl`, as the bench scripts read it), returned as a list.
    """
    if isinstance(table, list):
        return [r for r in table if not r["warmup"] and r.get("ok", True)]
    if table.empty:
        return table
    return table[~table["warmup"].astype(bool) & table["ok"].astype(bool)]
