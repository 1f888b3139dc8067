"""Records: one flat JSON object per measured repetition, written atomically.

A point's records go to `<point>.jsonl`, its environment to `<point>.meta.json`.
Both are written to a temporary file in the same folder and renamed into place,
so a killed job leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

# Every record has family, variant, rep, warmup, elapsed_s, bytes, bandwidth_Bps, ok and error; families add their
# swept parameters and extras.


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def record(family: str, variant: str, params: dict, rep: int, warmup: bool, *, elapsed_s: float,
           nbytes: int, ok: bool = True, error: str | None = None, **extras) -> dict:
    """One repetition's record; bandwidth is bytes / elapsed."""
    rec = {"family": family, "variant": variant, **params, "rep": rep, "warmup": warmup,
           "elapsed_s": elapsed_s, "bytes": nbytes,
           "bandwidth_Bps": nbytes / elapsed_s if elapsed_s and elapsed_s > 0 else None}
    rec.update(extras)
    rec["ok"] = ok
    rec["error"] = error
    return {k: _clean(v) for k, v in rec.items()}


def write_text(path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would hide results from the rest of a group
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path, records) -> None:
    write_text(Path(path), "".join(json.dumps(r, sort_keys=False) + "\n" for r in records))


def write_json(path, obj) -> None:
    write_text(Path(path), json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_jsonl(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def free_bytes(folder) -> int | None:
    """The free bytes of `folder`'s filesystem (or its nearest existing ancestor); None when it cannot be asked."""
    probe = Path(folder).absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def free_space(folder) -> str:
    """The free bytes of `folder`'s filesystem (or its nearest existing ancestor), for a message."""
    free = free_bytes(folder)
    if free is None:
        return "unknown"
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 1024)):
        if free >= factor:
            return f"{free / factor:.1f} {unit}"
    return f"{free} bytes"
