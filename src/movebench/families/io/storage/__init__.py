"""Storage backends of the io family behind one small interface.

A backend stores named objects (files or blobs) inside one *run space*: a
folder (posix, mpiio), a container (blob) or a share (fileshare) that is
created for one run of one point and deleted after it. Every rank holds its own
backend object; the methods say which ranks call them.

    bind(space)                       every rank: name the run space of this run
    setup()                           rank 0, untimed: create the run space
    check_shared(comm)                collective, untimed: every rank reaches the run space (else it raises)
    remove_leftovers(prefix)          rank 0, untimed: delete run spaces an earlier run left behind
    write_whole(obj, data)            one rank writes a whole object (sfsw on rank 0, mfmw on every rank)
    write_shared(comm, obj, data, offset, total)
                                      collective: each rank writes its part of one object (sfmw)
    size(obj), read(obj, offset, n)   untimed: verification reads
    corrupt(obj, offset)              fault injection: flip one stored byte (proves that verify works)
    reason(exc)                       a failure's one line when the backend knows better (a silent endpoint)
    delete(obj), teardown()           untimed: remove an object, then the run space
    retries                           requests the SDK retried so far (cloud backends; 0 otherwise)

`write_whole` and `write_shared` are the timed calls: they include what IOR's
timers include (create or open, the data, fsync when asked, close or commit).
"""

from __future__ import annotations

import importlib
import io

NAMES = ("posix", "mpiio", "blob", "fileshare")
CLOUD = ("blob", "fileshare")


class Backend:
    name = ""
    retries = 0

    def __init__(self, settings: dict):
        self.settings = settings

    def bind(self, space: str) -> None:
        raise NotImplementedError

    def setup(self) -> None:
        raise NotImplementedError

    def remove_leftovers(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def write_whole(self, obj: str, data) -> None:
        raise NotImplementedError

    def write_shared(self, comm, obj: str, data, offset: int, total: int) -> None:
        raise NotImplementedError

    def size(self, obj: str) -> int:
        raise NotImplementedError

    def read(self, obj: str, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def corrupt(self, obj: str, offset: int) -> None:
        raise NotImplementedError

    def delete(self, obj: str) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        raise NotImplementedError

    def describe(self) -> dict:
        """Facts for the point's meta (never a secret)."""
        return {}

    def cause(self, exc: BaseException, need: int) -> str | None:
        """What the storage says about a failed call when the error itself does not (None: nothing to add)."""
        return None

    def reason(self, exc: BaseException) -> str | None:
        """One line that says why the point failed in place of the error's own text (None: the error's text)."""
        return None

    def check_shared(self, comm) -> None:
        """Collective, after setup: raise when a rank cannot reach the run space rank 0 made (file backends)."""


def open_backend(name: str, settings: dict) -> Backend:
    if name not in NAMES:
        raise ValueError(f"unknown storage backend {name!r}: expected one of {', '.join(NAMES)}")
    module = importlib.import_module(f"movebench.families.io.storage.{name}")
    return module.BACKEND(settings)


def pieces(length: int, piece: int):
    """(start, stop) of consecutive pieces of at most `piece` bytes covering `length` bytes."""
    return [(lo, min(lo + piece, length)) for lo in range(0, length, piece)]


class ReadOnlyView(io.RawIOBase):
    """A seekable stream over a buffer, for SDK calls that take a stream.

    `read` copies only the bytes it returns, which is what the SDK does with
    `bytes` input too (it wraps them in BytesIO); wrapping the buffer in BytesIO
    would first copy all of it.
    """

    def __init__(self, buffer):
        self._view = memoryview(buffer).cast("B")
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def __len__(self):
        return len(self._view)

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size=-1):
        stop = len(self._view) if size is None or size < 0 else min(self._pos + size, len(self._view))
        chunk = self._view[self._pos : stop].tobytes()
        self._pos = stop
        return chunk

    def readinto(self, buffer):
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)
