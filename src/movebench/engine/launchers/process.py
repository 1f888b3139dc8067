"""The processes of a point's job: every process below a launcher, and stopping its process group."""

from __future__ import annotations

import collections
import functools
import os
import signal
import subprocess
from pathlib import Path

#: What starts `python -m movebench.engine.launch` in the point rules with Ctrl-C and SIGTERM held back (GNU env,
#: coreutils 8.31 on). Python's own start, runpy's import of the package and its compiling launch.py come before any
#: line of launch's: a SIGINT there was a KeyboardInterrupt traceback of <frozen runpy> frames. Held back, it waits
#: until launch's first lines have installed its handlers and let it through (launch.py's top), and the point fails as
#: interrupted like any other. Left uncovered: env's own start, before it blocks them (the default action, silent).
BLOCKED_START = ("env", "--block-signal=INT,TERM")


@functools.cache
def blocked_start() -> tuple[str, ...]:
    """BLOCKED_START where this host's env has --block-signal, else nothing (launch then starts as it did)."""
    try:
        done = subprocess.run([*BLOCKED_START, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    return BLOCKED_START if done.returncode == 0 else ()


def _process_table() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        children[int(text[text.rindex(")") + 2:].split()[1])].append(int(entry.name))
    return children


def _children(pid: int) -> list[int] | None:
    """Children of `pid` from /proc/<pid>/task/*/children (None where the kernel has no such file)."""
    kids = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            kids += [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except FileNotFoundError:
            if not Path(f"/proc/{pid}/task/{task}").exists():
                continue  # the thread ended
            return None
        except OSError:
            continue
    return kids


def descendants(root: int) -> list[int]:
    """`root` and every process below it (Hydra starts each rank in a session of its own).

    Walks the job's own tree through /proc's children files (a few reads per process of the job);
    only where those are missing does it read the whole process table.
    """
    table, found, stack = None, [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        kids = _children(pid)
        if kids is None:
            table = table if table is not None else _process_table()
            kids = table.get(pid, [])
        stack.extend(kids)
    return found


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGINT to `proc`'s process group, then SIGKILL if it has not ended within `grace` seconds."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue
