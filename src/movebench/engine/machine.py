"""What movebench runs share on one machine: the benchmark lock, and the points running right now.

- `BenchmarkLock`: two campaigns run side by side on one machine measure each other. A local run
  takes this machine-wide lock (an flock on one file, held by snakemake until it exits, so a killed
  run never leaves it behind) before its first job; a second campaign waits, saying for which one,
  or refuses. `MOVEBENCH_LOCK=wait` (default), `no-wait` (refuse at once) or `off`;
  `MOVEBENCH_LOCK_FILE` moves the lock (default /tmp/movebench-benchmark.lock: /tmp is the one
  folder every user of the machine shares).
- `RunningPoints`: every point `movebench.engine.launch` runs is registered in a machine-wide folder while
  its kernel runs. When a point ends it lists the points still running (they overlapped it) and
  leaves its name with each of them, so that a point that ended earlier is known to the later one
  too. The lists go to each point's meta (`overlapped_with`) and the report flags those points:
  with the lock off, or points run side by side in one campaign (benchmark_slots > 1), or a
  campaign that did not take the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path

LOCK_ENV = "MOVEBENCH_LOCK"
LOCK_FILE_ENV = "MOVEBENCH_LOCK_FILE"
POINTS_DIR_ENV = "MOVEBENCH_POINTS_DIR"
LOCK_MODES = ("wait", "no-wait", "off")


class LockBusy(RuntimeError):
    """Another campaign holds the lock and the run asked not to wait."""


def lock_mode(environ=os.environ) -> str:
    mode = environ.get(LOCK_ENV, "wait").strip().lower() or "wait"
    if mode not in LOCK_MODES:
        raise ValueError(f"{LOCK_ENV}={environ.get(LOCK_ENV)!r}: use one of {', '.join(LOCK_MODES)}")
    return mode


def lock_path(environ=os.environ) -> Path:
    return Path(environ.get(LOCK_FILE_ENV) or "/tmp/movebench-benchmark.lock")


def _shared_open(path: Path, flags: int) -> int:
    """Open (creating) a file every user of the machine may use."""
    fd = os.open(path, flags | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # not the creator's umask: the next campaign may be another user's
    return fd


def describe(holder: dict) -> str:
    if not holder:
        return "another campaign"
    since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", 0)))
    return (f"campaign {holder.get('campaign')!r} (pid {holder.get('pid')} on {holder.get('host')}, results in "
            f"{holder.get('results')}, since {since})")


class BenchmarkLock:
    """The machine-wide lock of local campaigns; see the module's docstring."""

    def __init__(self, path: Path | None = None, mode: str | None = None):
        self.path = Path(path or lock_path())
        self.mode = mode or lock_mode()
        self.fd: int | None = None

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def acquire(self, who: dict, say=print, poll_s: float = 1.0) -> None:
        """Take the lock for `who` (campaign, results); waits, or raises LockBusy under no-wait."""
        if self.mode == "off":
            return
        fd = _shared_open(self.path, os.O_RDWR)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self.holder()
                if self.mode == "no-wait":
                    os.close(fd)
                    raise LockBusy(f"{describe(holder)} is running on this machine; its points and this "
                                   f"campaign's would measure each other ({LOCK_ENV}=no-wait: not waiting)") from None
                if not told:
                    say(f"movebench: waiting for {describe(holder)} to finish: two campaigns on one machine "
                        f"measure each other ({LOCK_ENV}=no-wait refuses instead, {LOCK_ENV}=off runs anyway)")
                    told = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({**who, "pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.time()}).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _stat_field(pid: int, index: int) -> int | None:
    """Field `index` of /proc/<pid>/stat, counted from the state after the command's closing parenthesis."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2:].split()[index])


def _start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks (tells a live process from a reused PID)."""
    return _stat_field(pid, 19)


def _parent(pid: int) -> int | None:
    return _stat_field(pid, 1)


class Starter:
    """The snakemake that started this process (its nearest ancestor running snakemake), watched: when it is gone
    (SIGKILL, OOM) nobody will book this point's outcome, and a rerun would start the same point beside it."""

    LOOK_EVERY_S = 1.0

    def __init__(self, pid: int | None = None, depth: int = 6):
        self.pid = self.ticks = None
        self._looked = 0.0
        pid = os.getppid() if pid is None else pid
        for _ in range(depth):
            if pid is None or pid <= 1:
                return
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                return
            if any(part.endswith(b"snakemake") or part == b"snakemake" for part in cmdline[:3]):
                self.pid, self.ticks = pid, _start_ticks(pid)
                return
            pid = _parent(pid)

    def gone(self, force: bool = False) -> bool:
        """Whether the snakemake seen at the start has ended (looked at most once a second unless `force`); False
        without one."""
        if self.pid is None:
            return False
        now = time.monotonic()
        if not force and now - self._looked < self.LOOK_EVERY_S:
            return False
        self._looked = now
        return _start_ticks(self.pid) != self.ticks


class RunningPoints:
    """This point's entry in the machine-wide folder of running points; see the module's docstring."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder or os.environ.get(POINTS_DIR_ENV) or "/tmp/movebench-points")
        self.me = self.folder / f"{os.getpid()}.json"
        self.notes = self.folder / f"{os.getpid()}.overlaps"
        self.entry: dict = {}

    def enter(self, entry: dict) -> None:
        try:
            self.folder.mkdir(mode=0o1777, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(self.folder, 0o1777)  # sticky and open to every user, as /tmp
            self._remove_stale()
            self.entry = {**entry, "pid": os.getpid(), "ticks": _start_ticks(os.getpid()), "start": time.time()}
            for path in (self.notes, self.me):
                os.close(_shared_open(path, os.O_WRONLY))
            self.me.write_text(json.dumps(self.entry))
        except OSError:
            self.entry = {}  # the registry is a check, never a reason for a point to fail

    def _remove_stale(self) -> None:
        """Entries of points whose launch was killed (SIGKILL leaves them); only our own can be removed."""
        for path in self.folder.glob("*.json"):
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if entry.get("ticks") is None or _start_ticks(entry.get("pid", -1)) != entry["ticks"]:
                for stale in (path, path.with_suffix(".overlaps")):
                    with contextlib.suppress(OSError):
                        stale.unlink()

    def others(self) -> list[dict]:
        """The other points running now (entries of dead processes are stale and skipped)."""
        found = []
        for path in self.folder.glob("*.json"):
            if path == self.me:
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if _start_ticks(entry.get("pid", -1)) == entry.get("ticks") and entry.get("ticks") is not None:
                found.append(entry)
        return found

    def leave(self) -> list[dict]:
        """Leave the registry; the points that ran while this one did."""
        if not self.entry:
            return []
        mine = {k: self.entry[k] for k in ("campaign", "family", "running", "pid", "start") if k in self.entry}
        mine["end"] = time.time()
        overlapped = []
        with contextlib.suppress(OSError):
            overlapped = [json.loads(line) for line in self.notes.read_text().splitlines() if line.strip()]
        for other in self.others():
            overlapped.append({k: other[k] for k in ("campaign", "family", "running", "pid", "start") if k in other})
            with contextlib.suppress(OSError):
                fd = os.open(self.folder / f"{other['pid']}.overlaps", os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, (json.dumps(mine) + "\n").encode())
                finally:
                    os.close(fd)
        for path in (self.me, self.notes):
            with contextlib.suppress(OSError):
                path.unlink()
        return overlapped
