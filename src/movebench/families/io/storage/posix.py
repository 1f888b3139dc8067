"""POSIX files: pwrite at each rank's offset in one file (sfmw) or into its own file.

Writes go out in `transfer_size` pieces (IOR's transfer size), fsync'd before
close when `fsync` is set, so that the time includes reaching storage
(IOR's -e); without it, the time is that of the page cache.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from movebench.families.io.storage import Backend, pieces


def pwrite_all(fd: int, data, offset: int, transfer_size: int) -> None:
    view = memoryview(data).cast("B")
    for lo, hi in pieces(len(view), transfer_size):
        done = lo
        while done < hi:  # pwrite may write less than asked (and at most 2 GiB at once on Linux)
            done += os.pwrite(fd, view[done:hi], offset + done)


class Posix(Backend):
    name = "posix"

    def __init__(self, settings):
        super().__init__(settings)
        self.root = Path(settings["path"])
        self.transfer_size = settings["transfer_size"]
        self.fsync = settings["fsync"]
        self.space: Path | None = None

    def bind(self, space):
        self.space = self.root / space

    def setup(self):
        self.space.mkdir(parents=True, exist_ok=False)

    def check_shared(self, comm):
        # On more than one node a node-local path (/tmp, /dev/shm on most clusters) gives every node a folder of
        # its own: without this check sfmw fails on a missing file and mfmw "succeeds" into separate folders.
        import socket

        seen = comm.allgather((socket.gethostname(), self.space.is_dir()))
        blind = sorted({host for host, found in seen if not found})
        if blind:
            raise RuntimeError(f"posix.path {self.root}: the run folder rank 0 made on {seen[0][0]} is not there on "
                               f"{', '.join(blind)}: points on more than one node need a path every node shares "
                               "(a parallel or network file system), not a node's own /tmp or /dev/shm")

    def remove_leftovers(self, prefix):
        if not self.root.is_dir():
            return []
        found = sorted(p for p in self.root.iterdir() if p.name.startswith(prefix))
        for path in found:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        return [p.name for p in found]

    def path(self, obj: str) -> Path:
        return self.space / obj

    def _finish(self, fd: int) -> None:
        try:
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def write_whole(self, obj, data):
        fd = os.open(self.path(obj), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite_all(fd, data, 0, self.transfer_size)
        except BaseException:
            os.close(fd)
            raise
        self._finish(fd)

    def write_shared(self, comm, obj, data, offset, total):
        # Rank 0 creates the file; the others open it once it exists (IOR's shared-file open).
        if comm.rank == 0:
            fd = os.open(self.path(obj), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        comm.Barrier()
        if comm.rank != 0:
            fd = os.open(self.path(obj), os.O_WRONLY)
        try:
            pwrite_all(fd, data, offset, self.transfer_size)
        except BaseException:
            os.close(fd)
            raise
        self._finish(fd)

    def size(self, obj):
        return self.path(obj).stat().st_size

    def read(self, obj, offset, length):
        with open(self.path(obj), "rb") as f:
            f.seek(offset)
            return f.read(length)

    def corrupt(self, obj, offset):
        with open(self.path(obj), "r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0xFF]))

    def delete(self, obj):
        self.path(obj).unlink(missing_ok=True)

    def teardown(self):
        if self.space is not None and self.space.exists():
            shutil.rmtree(self.space)

    def describe(self):
        return {
            "path": str(self.root),
            "filesystem": filesystem_type(self.root),
            "transfer_size": self.transfer_size,
            "fsync": self.fsync,
        }


def filesystem_type(path: Path) -> str | None:
    """The mount type holding `path` (ext4, lustre, tmpfs...), from /proc/mounts."""
    try:
        target = os.path.realpath(path)
        best = ("", None)
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3:
                mount = fields[1].replace("\\040", " ")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best[0]):
                    best = (mount, fields[2])
        return best[1]
    except OSError:
        return None


BACKEND = Posix
