"""A campaign's services stay stopped (SIGSTOP) except while a launch that needs them runs.

Nothing the campaign starts may compete with a measuring point: Azurite, a Node.js process, keeps timers and a
garbage collector going even when idle, so it runs only while a point that talks to it runs. The campaign
enters its services, `publish`es their pids in the environment every point job inherits, and `pause_all`s
them; launch wraps the kernel in `held(family, points)`, which resumes the family's services when one of the
points needs them (the family spec's `service_needed`, decided by the campaign and published with the pids:
this module is below the spec) and stops them again afterwards. `withdraw` resumes them all before they are
stopped for good, since a stopped process acts on no SIGTERM.

Each pid is signalled with its process group when it leads one (Azurite starts in a session of its own), so
whatever it spawned pauses with it. Launches that overlap (a profile without the one-point-at-a-time slot) share
a service: each holds a shared flock on the service's /proc stat file while it runs, and the last one out stops
it (procfs needs no lock file to clean up, and the lock ends with the process or its holder).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import time

ENV_VAR = "MOVEBENCH_SERVICES"
#: Above this the published list of points is left out and every launch of the family holds its services:
#: one environment string may not exceed 128 KiB (Linux's MAX_ARG_STRLEN), and every job's exec would fail.
MAX_PUBLISHED = 64 * 1024
_TICKS = os.sysconf("SC_CLK_TCK")


def digest(point: dict) -> str:
    return hashlib.sha1(json.dumps(point, sort_keys=True).encode()).hexdigest()[:12]


def pids_of(service) -> list[int]:
    """The pids of what a family's `services` context manager yielded (anything with a `pid`), else none."""
    pid = getattr(service, "pid", None)
    return [pid] if pid else []


def publish(services: dict[str, list[int]], needed: dict[str, list[dict]] | None = None) -> dict[str, str]:
    """The environment that tells launches which pids serve which family and, in `needed`, which of its points
    need them (a family left out of `needed`: all of them)."""
    needed = needed or {}
    entries = {family: {"pids": pids, "starts": [_start(pid) for pid in pids],
                        "points": [digest(p) for p in needed[family]] if family in needed else None}
               for family, pids in services.items() if pids}
    text = json.dumps(entries, separators=(",", ":"))
    if len(text) > MAX_PUBLISHED:
        text = json.dumps({family: {**entry, "points": None} for family, entry in entries.items()})
    return {ENV_VAR: text} if entries else {}


def published(environ=None) -> dict[str, dict]:
    try:
        return json.loads((os.environ if environ is None else environ).get(ENV_VAR) or "{}")
    except ValueError:
        return {}


def _signal(pids, signum) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)


def pause(pids, wait: float = 1.0) -> None:
    """Stop them, and wait until they are (a signal lands when the process next runs): a launch about to measure
    must not start beside a service still on its way to stopping."""
    _signal(pids, signal.SIGSTOP)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.001)


def _running(pid) -> bool:
    try:
        return _stat_fields(pid)[0] not in "TtZX"
    except (OSError, IndexError):
        return False


def resume(pids) -> None:
    _signal(pids, signal.SIGCONT)


def _start(pid) -> int | None:
    try:
        return int(_stat_fields(pid)[19])
    except (OSError, ValueError, IndexError):
        return None


def _same(entry: dict) -> list[int]:
    """The entry's pids that are still the processes published: a pid reused after the service died (a launch
    that outlived its campaign) must never be stopped."""
    return [pid for pid, start in zip(entry["pids"], entry["starts"], strict=True)
            if start is not None and _start(pid) == start]


def _all_pids(environ=None) -> list[int]:
    return [pid for entry in published(environ).values() for pid in _same(entry)]


def pause_all(environ=None) -> None:
    pause(_all_pids(environ))


def withdraw(environ=None) -> None:
    """Resume every published service (so that the SIGTERM stopping it is acted on) and unpublish them."""
    environ = os.environ if environ is None else environ
    resume(_all_pids(environ))
    environ.pop(ENV_VAR, None)


def _stat_fields(pid) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rindex(")") + 2:].split()  # comm may hold spaces and parentheses


def cpu_seconds(pids) -> float:
    """User and system time of the processes in `pids` and their process groups, reaped children included."""
    pids, ticks = set(pids), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(entry)
        except (OSError, ValueError):
            continue  # gone meanwhile
        if int(entry) in pids or int(fields[2]) in pids:
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / _TICKS


class Held:
    """What `held` did: the pids it resumed (none when the points needed no service) and their CPU time."""

    def __init__(self, family: str, pids: list[int]):
        self.family, self.pids = family, pids
        self._before = cpu_seconds(pids) if pids else None
        self._cpu = None

    def finish(self) -> None:
        if self.pids:
            self._cpu = cpu_seconds(self.pids) - self._before

    def cpu_seconds(self) -> float | None:
        """CPU time the services used while held (after the block); None when none was held."""
        return self._cpu


def _pause_unless_held(pid, fd=None) -> None:
    """Stop the service unless a launch holds it (its shared lock keeps an exclusive one from being taken)."""
    try:
        mine = fd if fd is not None else os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return  # gone
    try:
        fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)
        pause([pid])
    except BlockingIOError:
        pass
    finally:
        if fd is None:
            os.close(mine)


@contextlib.contextmanager
def held(family: str, points: list[dict], environ=None):
    """Around one launch of `points` of `family`: the family's published services run while the block runs, if
    any of the points needs them, and are stopped again on the way out, whatever ends the block. Every other
    published service is stopped first unless a launch holds it: one killed inside `held` left it running."""
    services = published(environ)
    entry = services.get(family)
    mine = []
    if entry is not None and (entry["points"] is None or {digest(p) for p in points} & set(entry["points"])):
        mine = _same(entry)
    for pid in (pid for other in services.values() for pid in _same(other) if pid not in mine):
        _pause_unless_held(pid)
    fds = {}
    for pid in mine:
        with contextlib.suppress(OSError):
            fds[pid] = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
            fcntl.flock(fds[pid], fcntl.LOCK_SH)
    state = Held(family, list(fds))
    resume(state.pids)
    try:
        yield state
    finally:
        for pid, fd in fds.items():
            fcntl.flock(fd, fcntl.LOCK_UN)
            _pause_unless_held(pid, fd)
            os.close(fd)
        state.finish()
