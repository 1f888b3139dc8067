"""io: output patterns of an MPI code to POSIX, MPI-IO, Azure Blob and Azure Files.

Every rank contributes `size_per_proc` bytes to each repetition, in one of
three patterns (one point = one pattern, backend, rank count and size):

- sfsw, single file single writer: rank 0 gathers every rank's part
  (`Gatherv`) and writes the one object alone.
- sfmw, single file multiple writers: each rank writes its part at offset
  rank x size_per_proc of one object: POSIX pwrite, MPI-IO `Write_at_all`,
  Blob staged blocks (<= block_size) then one `commit_block_list` by rank 0 of
  the gathered, sorted ids, Azure Files `upload_range` pieces (<= range_size)
  into a file rank 0 created at its full size.
- mfmw, multiple files multiple writers: each rank writes its own object.

Timing follows IOR. After a barrier each rank takes its start time, writes
(create or open, the data, fsync when `fsync` is on, close or commit), and
takes its end time; the gathered times give

    latency   = max over ranks of end - min over ranks of start   (elapsed_s)
    bytes     = size_per_proc x ranks
    bandwidth = bytes / latency                                   (bandwidth_Bps)

and each rank's own start, end and elapsed are kept in the record
(`rank_start_s`, `rank_end_s` relative to the earliest start). Ranks' clocks
are aligned to rank 0's once per point (barrier, then each rank's offset to
rank 0's `MPI.Wtime`); on one node the offsets are microseconds. Where it differs
from IOR: one repetition writes each rank's part once as one block (IOR's
segment count 1; posix pieces follow `transfer_size`, blob blocks
`block_size`, file ranges `range_size`). sfsw's Gatherv is inside the timed region: it is
part of the pattern's cost, as in the study.

Untimed, after each repetition: with `verify` every rank reads its part back
(sf: its range of the shared object; mf: its own object), compares a CRC-32
with that of what it wrote, and checks the object's size; a mismatch marks the
repetition ok=False. Then the repetition's objects are deleted (with `cleanup`
off the last repetition's objects and the run space are kept; under an adaptive
repetitions rule, where the last is known only after it ran, a counted repetition's
objects are deleted at the start of the next one, untimed). Retries the
storage SDK made are counted: `retries_write` inside the timed region,
`retries` in the whole repetition (summed over ranks).

The data: each rank's buffer is filled once per point with 8-byte words that
encode their position in the object, so a part written at the wrong offset
fails verification; it is touched before the first repetition.

Objects live in a run space (folder, container or share) named
`<prefix>-<run id>`, where the prefix comes from the campaign and the point;
a run first deletes any space with its prefix (leftovers of a killed run),
and deletes its own space at the end (or, on failure, tries to).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
import zlib

import numpy as np

from movebench.families.io.storage import open_backend

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def object_size(pattern: str, size_per_proc: int, ranks: int) -> int:
    """Bytes of one object: the whole output for single-file patterns, one rank's part for mfmw."""
    return size_per_proc if pattern == "mfmw" else size_per_proc * ranks


# --- the kernel: every rank runs it ---


def make_payload(nbytes: int, first_byte: int) -> np.ndarray:
    """`nbytes` bytes whose 8-byte words encode their word position in the object (from `first_byte`)."""
    first_word = first_byte // 8
    words = np.arange(first_word, first_word + -(-nbytes // 8) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        words = (words + np.uint64(1)) * _GOLDEN
    skip = first_byte - first_word * 8
    return words.view(np.uint8)[skip : skip + nbytes].copy()


def clock_offset(comm) -> float:
    """Seconds to add to this rank's MPI.Wtime to read rank 0's clock."""
    from mpi4py import MPI

    comm.Barrier()
    local = MPI.Wtime()
    return comm.bcast(local, root=0) - local


class RankState:
    """One point's state on one rank: the backend, the data, the run space."""

    def __init__(self, comm, task, backend):
        self.comm, self.task, self.backend = comm, task, backend
        self.settings = task.settings
        self.pattern, self.size = task.point["pattern"], task.point["size_per_proc"]
        rank, n = comm.rank, comm.size
        self.total = self.size * n
        # sf: rank r's bytes sit at offset r x size in the object; mf: at 0 in its own object.
        self.offset = 0 if self.pattern == "mfmw" else rank * self.size
        self.data = make_payload(self.size, self.offset)
        self.crc = zlib.crc32(self.data)
        self.gathered = np.ones(self.total, dtype=np.uint8) if self.pattern == "sfsw" and rank == 0 else None
        self.clock = clock_offset(comm)
        self.policy = task.policy
        self.kept = None  # an adaptive point's last counted objects, deleted when another repetition starts

    def objects(self, rep, warmup):
        """This rank's object name, and the names of every object of the repetition."""
        base = f"{'w' if warmup else 'r'}{rep:04d}"
        if self.pattern == "mfmw":
            return f"{base}-rank{self.comm.rank:05d}", [f"{base}-rank{r:05d}" for r in range(self.comm.size)]
        return base, [base]

    def write(self, obj):
        """The timed part: one repetition's output in this point's pattern."""
        comm, backend = self.comm, self.backend
        if self.pattern == "sfsw":
            from mpi4py import MPI

            counts = [self.size] * comm.size
            recv = (
                [self.gathered, counts, [r * self.size for r in range(comm.size)], MPI.BYTE] if comm.rank == 0 else None
            )
            comm.Gatherv([self.data, MPI.BYTE], recv, root=0)
            if comm.rank == 0:
                backend.write_whole(obj, self.gathered)
        elif self.pattern == "sfmw":
            backend.write_shared(comm, obj, self.data, self.offset, self.total)
        else:
            backend.write_whole(obj, self.data)

    def verify(self, obj) -> str | None:
        """Read this rank's part back; None when it matches what was written."""
        expected = self.size if self.pattern == "mfmw" else self.total
        stored = self.backend.size(obj)
        if stored != expected:
            return f"rank {self.comm.rank}: {obj} holds {stored} bytes, {expected} written"
        back = self.backend.read(obj, self.offset, self.size)
        crc = zlib.crc32(back)
        if len(back) != self.size or crc != self.crc:
            return (
                f"rank {self.comm.rank}: bytes {self.offset}..{self.offset + self.size} of {obj} read back with "
                f"CRC-32 {crc:#010x} ({len(back)} bytes), written with {self.crc:#010x}"
            )
        return None

    def delete(self, obj):
        if self.pattern == "mfmw" or self.comm.rank == 0:
            self.backend.delete(obj)

    def measure(self, rep, warmup):
        from mpi4py import MPI

        comm, backend = self.comm, self.backend
        obj, every = self.objects(rep, warmup)
        if self.kept is not None:
            self.delete(self.kept)
            self.kept = None
        before = backend.retries
        comm.Barrier()
        start = MPI.Wtime()
        self.write(obj)
        end = MPI.Wtime()
        retries_write = backend.retries - before
        times = comm.allgather((start + self.clock, end + self.clock))
        first = min(t[0] for t in times)
        elapsed = max(t[1] for t in times) - first
        comm.Barrier()
        if self.settings.get("fault") == "flip-byte" and comm.rank == 0:
            backend.corrupt(every[0], 0)
        error, verify_s = None, None
        if self.settings["verify"]:
            comm.Barrier()
            t0 = MPI.Wtime()
            errors = [e for e in comm.allgather(self.verify(obj)) if e]
            verify_s = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            error = "; ".join(errors) or None
        comm.Barrier()
        if self.settings["cleanup"] or warmup:
            self.delete(obj)
        elif self.policy.fixed:
            if rep != self.policy.max - 1:
                self.delete(obj)
        else:
            self.kept = obj
        retries = comm.allreduce(backend.retries - before)
        extras = {
            "file_size": object_size(self.pattern, self.size, comm.size),
            "files": len(every),
            "rank_start_s": [t[0] - first for t in times],
            "rank_end_s": [t[1] - first for t in times],
            "rank_elapsed_s": [t[1] - t[0] for t in times],
            "retries_write": comm.allreduce(retries_write),
            "retries": retries,
            "verified": None if not self.settings["verify"] else error is None,
            "verify_s": verify_s,
        }
        if error:
            extras.update(ok=False, error=error)
        return elapsed, self.total, extras


def measure_task(comm, task, group_meta=None):
    """One point in a run space of its own, removed after it (with `cleanup`); a failure ends the whole launch."""
    from movebench.core.runner import run_mpi
    from movebench.families.io.storage.azure import describe_error

    settings, pattern, backend_name = task.settings, task.point["pattern"], task.point["backend"]
    if comm.size != task.point["ranks"]:
        raise SystemExit(f"movebench.io: the point has {task.point['ranks']} ranks but {comm.size} started")
    backend, space = None, None
    try:
        backend = open_backend(backend_name, settings)
        removed, space = [], None
        if comm.rank == 0:
            removed = backend.remove_leftovers(settings["name_prefix"] + "-")
            space = f"{settings['name_prefix']}-{secrets.token_hex(4)}"
            backend.bind(space)
            backend.setup()
        backend.bind(comm.bcast(space, root=0))
        backend.check_shared(comm)
        state = RankState(comm, task, backend)
        extra_meta = {
            "storage": {"backend": backend_name, **backend.describe()},
            "leftovers_removed": removed,
            "buffers_reused": True,
            **(group_meta or {}),
        }
        run_mpi(comm, task, state.measure, extra_meta)
        comm.Barrier()
        if comm.rank == 0 and settings["cleanup"]:
            backend.teardown()
    except Exception as exc:  # a failed point must say why in one line, then stop every rank
        dead = backend.reason(exc) if backend is not None else None
        why = _mpi_error(exc) or dead or describe_error(exc)
        # Asked before the teardown below frees what the point wrote.
        cause = backend.cause(exc, task.point["size_per_proc"]) if backend is not None else None
        _line(f"movebench.io: rank {comm.rank}: {pattern} on {backend_name} failed: {why}"
              + (f" ({cause})" if cause else ""))
        if dead:
            # Deleting the run space from an endpoint that does not answer would wait out the whole
            # timeout-and-retry chain a second time; the rerun deletes it (remove_leftovers).
            if comm.rank == 0 and settings["cleanup"] and space:
                _line(f"movebench.io: run space {space} is left for the next run of this point to remove")
        elif backend is not None and comm.rank == 0 and settings["cleanup"]:
            try:
                backend.teardown()
            except Exception as again:  # the rerun removes what is left (remove_leftovers)
                _line(f"movebench.io: could not remove the run space: {describe_error(again)}")
        # Abort tears the job down at once: give mpiexec a moment to forward the line above to the log.
        time.sleep(1.0)
        comm.Abort(1)


def _mpi_error(exc) -> str | None:
    """An MPI error by its class: its text is the class's, then "error stack:" and a stack MPICH leaves empty."""
    from mpi4py import MPI

    if not isinstance(exc, MPI.Exception):
        return None
    error_class = exc.Get_error_class()
    return f"MPI error class {error_class}: {MPI.Get_error_string(error_class).strip()}"


def _line(text: str) -> None:
    """One line in one write: print() makes two (text, then newline) on an unbuffered stderr, and every rank's
    stderr meets in mpiexec's, which glued one rank's line to the next."""
    os.write(sys.stderr.fileno(), (" ".join(text.split("\n")) + "\n").encode(errors="replace"))


def main(argv=None):
    from mpi4py import MPI

    from movebench.core.runner import each_task

    for task, group_meta in each_task(argv):
        measure_task(MPI.COMM_WORLD, task, group_meta)


if __name__ == "__main__":
    main()
