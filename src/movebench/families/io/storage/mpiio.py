"""MPI-IO (ROMIO in MPICH): `MPI.File`, with the collective `Write_at_all` for sfmw.

sfmw opens one file on the whole communicator and writes with `Write_at_all`,
the collective I/O (two-phase aggregation, file-system hints) that an HPC code
gives up when it moves to object storage. sfsw and mfmw open on COMM_SELF and
write with the independent `Write_at`. `Sync` (MPI_File_sync) stands for fsync.
Hints from `mpiio.hints` (e.g. striping_factor, cb_nodes, romio_cb_write) go to
`MPI.File.Open` as an `MPI.Info`.

Verification reads, corruption and deletion go through POSIX calls on the same
path: they are untimed, and every ROMIO driver used here (ufs, nfs, lustre)
is a POSIX file system underneath.
"""

from __future__ import annotations

from movebench.core.records import free_bytes, free_space
from movebench.families.io.storage.posix import Posix

# MPI counts are C ints: write in pieces below 2 GiB so that any size works with any MPI.
_MAX_COUNT = 1 << 30


class MpiIO(Posix):
    name = "mpiio"

    def _info(self):
        from mpi4py import MPI

        info = MPI.Info.Create()
        for key, value in self.settings.get("hints", {}).items():
            info.Set(str(key), str(value))
        return info

    def _open(self, comm, obj):
        from mpi4py import MPI

        info = self._info()
        try:
            return MPI.File.Open(comm, str(self.path(obj)), MPI.MODE_WRONLY | MPI.MODE_CREATE, info)
        finally:
            info.Free()

    def _close(self, fh) -> None:
        if self.fsync:
            fh.Sync()
        fh.Close()

    def write_whole(self, obj, data):
        from mpi4py import MPI

        fh = self._open(MPI.COMM_SELF, obj)
        view = memoryview(data).cast("B")
        for lo in range(0, len(view), _MAX_COUNT):
            fh.Write_at(lo, view[lo : lo + _MAX_COUNT])
        self._close(fh)

    def write_shared(self, comm, obj, data, offset, total):
        fh = self._open(comm, obj)
        view = memoryview(data).cast("B")
        # Every rank holds the same size here, so all make the same number of collective calls.
        for lo in range(0, len(view), _MAX_COUNT):
            fh.Write_at_all(offset + lo, view[lo : lo + _MAX_COUNT])
        self._close(fh)

    def cause(self, exc, need):
        """A full target named as posix names it: ROMIO turns a write's ENOSPC into the bare "Other I/O error"
        (MPI_ERR_IO) and drops errno, so the target's filesystem is asked whether this rank's part still fits."""
        from mpi4py import MPI

        if not isinstance(exc, MPI.Exception):
            return None
        error_class = exc.Get_error_class()
        free = free_bytes(self.root)
        if error_class in (MPI.ERR_NO_SPACE, MPI.ERR_QUOTA) or (
                error_class == MPI.ERR_IO and free is not None and free < need):
            return f"No space left on device: {self.root} has {free_space(self.root)} free"
        return None

    def describe(self):
        return {**super().describe(), "hints": dict(self.settings.get("hints", {}))}


BACKEND = MpiIO
