"""osu_bw and osu_bibw between rank pairs (i, i + n/2) with persistent requests.

The W sends and receives of one iteration are built once per point (`Send_init`, `Recv_init`),
so an iteration costs Python two calls (`Prequest.Startall`, `Request.Waitall`) whatever the window,
where building W requests per iteration costs 2W + 1: at 1-4 KiB that was a third of the time
(docs/notes/kernels.md has the measurements against the C loop). What goes on the wire is unchanged:
W messages of `size` bytes in flight per iteration, receives posted before sends, and for uni the
4-byte ack after each window, as osu_bw.

Every repetition is verified: the receive buffer is zeroed before it (untimed) and must hold the
peer's bytes after it. Each rank sends its own bytes (`fill_bytes`), so a stale or misdirected receive shows.
Buffers are any writable byte buffers (movebench.core.memory.allocate_bytes, or numpy arrays):
nothing here needs numpy, so a streaming rank never imports it.
"""

from __future__ import annotations

_PERIOD = 251  # fill_bytes's period: (i * 7) mod 251 repeats every 251 bytes

ACK_BYTES = 4
TAG_DATA, TAG_ACK = 100, 101


def pair(rank: int, ranks: int) -> tuple[bool, int]:
    """(whether `rank` is in the sending half, its peer): osu_mbw_mr's pairing i <-> i + n/2."""
    half = ranks // 2
    return (rank < half, rank + half) if rank < half else (False, rank - half)


def fill_bytes(rank: int, size: int) -> bytes:
    """The bytes rank `rank` sends, (7 i + 31 rank + 1) mod 251 at byte i: differ between ranks and along it."""
    period = bytes((i * 7 + 31 * rank + 1) % _PERIOD for i in range(_PERIOD))
    return (period * (size // _PERIOD + 1))[:size]


class PairStream:
    """One point's uni or bidi stream: its requests, buffers and the expected receive, made once.

    `sbuf` and `rbuf` are writable byte buffers of at least `size` bytes (movebench.core.memory.allocate_bytes);
    `sbuf` is filled with this rank's `fill_bytes`. Call `free()` (or use `with`) before MPI ends.
    """

    def __init__(self, comm, sbuf, rbuf, size: int, window: int, bidirectional: bool):
        from mpi4py import MPI

        if comm.size % 2:
            raise ValueError(f"uni and bidi pair ranks (i, i + n/2): {comm.size} ranks is odd")
        self.comm, self.size, self.window, self.bidirectional = comm, size, window, bidirectional
        self.first, self.peer = pair(comm.rank, comm.size)
        self.sbuf, self.rbuf = sbuf, rbuf
        memoryview(sbuf).cast("B")[:size] = fill_bytes(comm.rank, size)
        self.receives = bidirectional or not self.first
        self.expected = fill_bytes(self.peer, size) if self.receives else None
        self._received = memoryview(rbuf).cast("B")[:size]
        self._zeros = bytes(size) if self.receives else b""
        self.ack = bytearray(ACK_BYTES)
        self._ack = [self.ack, ACK_BYTES, MPI.BYTE]
        smsg, rmsg = [sbuf, size, MPI.BYTE], [rbuf, size, MPI.BYTE]
        recvs = [comm.Recv_init(rmsg, self.peer, TAG_DATA) for _ in range(window)] if self.receives else []
        sends = [comm.Send_init(smsg, self.peer, TAG_DATA) for _ in range(window)] \
            if bidirectional or self.first else []
        self.requests = recvs + sends

    def run(self, iterations: int, skip: int = 0) -> float:
        """`skip` untimed then `iterations` timed iterations; the slowest sender's seconds, on every rank."""
        from mpi4py import MPI

        comm, peer, reqs, ack = self.comm, self.peer, self.requests, self._ack
        startall, waitall, wtime = MPI.Prequest.Startall, MPI.Request.Waitall, MPI.Wtime
        if self.receives:
            self._received[:] = self._zeros
        uni_sender = not self.bidirectional and self.first
        uni_receiver = not self.bidirectional and not self.first
        comm.Barrier()
        start = wtime()
        for i in range(skip + iterations):
            if i == skip:
                start = wtime()
            startall(reqs)
            waitall(reqs)
            if uni_sender:
                comm.Recv(ack, peer, TAG_ACK)
            elif uni_receiver:
                comm.Send(ack, peer, TAG_ACK)
        # OSU times the sending side (rank 0): the slowest of ranks 0 .. n/2 - 1 here.
        return comm.allreduce(wtime() - start if self.first else 0.0, op=MPI.MAX)

    def verified(self) -> bool:
        """Whether every receiving rank holds its peer's bytes (collective)."""
        from mpi4py import MPI

        ok = not self.receives or self._received.tobytes() == self.expected  # memcmp; a memoryview == compares per byte
        return self.comm.allreduce(ok, op=MPI.LAND)

    def free(self) -> None:
        for request in self.requests:
            request.Free()
        self.requests = []
        self._received.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
