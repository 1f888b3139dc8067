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
off the last repetition's objects and the run space are kept). Retries the
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

import contextlib
import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from movebench.core.sizes import SIZE_HINT, SizeError, expand_sizes, format_size, parse_size
from movebench.family import Family, point_path
from movebench.storage import CLOUD, NAMES, open_backend

PATTERNS = ("sfsw", "sfmw", "mfmw")
MiB = 1024**2
MAX_BLOCK = 4000 * MiB  # Put Block limit
MAX_BLOCKS = 50_000  # committed blocks per blob
MAX_BLOB = MAX_BLOCKS * MAX_BLOCK  # ~190.7 TiB
MAX_RANGE = 4 * MiB  # Put Range limit
MAX_FILE = 4 * 1024**4  # Azure Files: 4 TiB per file
SERVICE = {"blob": "blob", "fileshare": "file"}
# Backends left out of the grid, comma-separated (make run sets it to "blob" when Node.js is missing).
SKIP_ENV = "MOVEBENCH_SKIP_BACKENDS"
# blob.emulator = azurite: the connection string of the Azurite that `make run` starts travels in this
# variable, apart from AZURE_STORAGE_CONNECTION_STRING, so that a real account's string in the user's
# environment is never used (nor overwritten) by an emulated run.
AZURITE_ENV = "MOVEBENCH_AZURITE_CONNECTION_STRING"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def skipped_backends() -> list[str]:
    return [b.strip() for b in os.environ.get(SKIP_ENV, "").split(",") if b.strip()]


def emulated(section) -> bool:
    return section["blob"]["emulator"] == "azurite"


def azurite_unavailable(section) -> str | None:
    """Why blob on Azurite cannot run here (Node.js missing and no Azurite given), or None."""
    from movebench.services import azurite

    if not emulated(section) or os.environ.get(AZURITE_ENV):
        return None
    return azurite.node_missing()


def connection_env(section, backend) -> str:
    return AZURITE_ENV if backend == "blob" and emulated(section) else section[backend]["connection_string_env"]


def default_path() -> str:
    return os.path.join(tempfile.gettempdir(), "movebench-io")


def object_size(pattern: str, size_per_proc: int, ranks: int) -> int:
    """Bytes of one object: the whole output for single-file patterns, one rank's part for mfmw."""
    return size_per_proc if pattern == "mfmw" else size_per_proc * ranks


def name_prefix(point: dict, campaign_name: str) -> str:
    """Run-space prefix of a point: readable, short, valid as a container and share name."""
    digest = hashlib.sha1(f"{campaign_name}:{point_path(point)}".encode()).hexdigest()[:10]
    return f"mbio-{point['pattern']}-{point['backend']}-{digest}"


def _writable_problem(path: str) -> str | None:
    """Why nothing can be created under `path` (or its nearest existing ancestor), or None."""
    target = Path(path).expanduser()
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            return "no part of it exists"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        return f"cannot create a file in {probe}: {exc.strerror}"
    return None


@contextlib.contextmanager
def _environ(**values):
    """Set environment variables for the duration of the block, then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


class IO(Family):
    name = "io"
    point_keys = ("pattern", "backend", "nodes", "ranks", "size_per_proc")
    summary_measures = ("retries",)

    def backends(self, section) -> list[str]:
        skip = skipped_backends() + (["blob"] if azurite_unavailable(section) else [])
        return [b for b in section["backends"] if b not in skip]

    @contextlib.contextmanager
    def services(self, section, campaign):
        """Azurite for the whole run when blob runs on the emulator; called by `make run` (python -m movebench run).

        Its connection string goes into the environment that Snakemake, and so every point job, inherits.
        Without Node.js, blob is left out, loudly, and the report says so.
        """
        from movebench.services import azurite

        wanted = "blob" in section["backends"] and "blob" not in skipped_backends() and emulated(section)
        if not wanted or os.environ.get(AZURITE_ENV):
            yield
            return
        why = azurite.node_missing()
        if why:
            print(
                f"movebench: WARNING: {why}; the io family's blob backend is skipped in this run.",
                file=sys.stderr,
                flush=True,
            )
            with _environ(**{SKIP_ENV: ",".join([*skipped_backends(), "blob"])}):
                yield
            return
        with azurite.Azurite() as service:
            print(
                f"movebench: Azurite up on 127.0.0.1:{service.port} (pid {service.pid}) for io's blob backend",
                file=sys.stderr,
                flush=True,
            )
            with _environ(**{AZURITE_ENV: service.connection_string}):
                yield
        print(f"movebench: Azurite stopped (pid {service.pid})", file=sys.stderr, flush=True)

    def check(self, section, campaign):
        from movebench.storage import azure

        problems = []
        try:
            sizes = expand_sizes(section["size_per_proc"])
        except (SizeError, KeyError, TypeError) as exc:
            return [("size_per_proc", section["size_per_proc"], str(exc))]
        if any(s < 1 for s in sizes):
            problems.append(("size_per_proc", section["size_per_proc"], "every size must be at least 1 byte"))
        limits = {}
        for key, limit, why in (
            ("block_size", MAX_BLOCK, "Azure's Put Block limit"),
            ("range_size", MAX_RANGE, "Azure Files' Put Range limit"),
            ("posix.transfer_size", None, None),
        ):
            value = section["posix"]["transfer_size"] if key == "posix.transfer_size" else section[key]
            try:
                limits[key] = parse_size(value)
            except SizeError as exc:
                problems.append((key, value, str(exc)))
                continue
            if limits[key] < 1:
                problems.append((key, value, "must be at least 1 byte"))
            elif limit and limits[key] > limit:
                problems.append((key, value, f"must be at most {format_size(limit)} ({why})"))
        for i, ranks in enumerate(section["ranks"]):
            for nodes in section["nodes"]:
                if nodes > ranks:
                    problems.append(
                        (
                            "nodes",
                            nodes,
                            f"more nodes than the {ranks} ranks of ranks[{i}]: each node needs at least one rank",
                        )
                    )
        backends = self.backends(section)
        biggest = {p: max(object_size(p, max(sizes), r) for r in section["ranks"]) for p in section["patterns"]}
        if "blob" in backends and "block_size" in limits:
            block = limits["block_size"]
            for pattern, size in biggest.items():
                per_rank = max(sizes) if pattern == "sfmw" else size
                blocks = -(-per_rank // block) * (max(section["ranks"]) if pattern == "sfmw" else 1)
                if size > MAX_BLOB or blocks > MAX_BLOCKS:
                    problems.append(
                        (
                            "size_per_proc",
                            section["size_per_proc"],
                            f"pattern {pattern} makes a {format_size(size)} blob of {blocks} blocks of "
                            f"block_size {format_size(block)}; a block blob holds at most {MAX_BLOCKS} "
                            "blocks: use fewer ranks, smaller sizes or a larger block_size",
                        )
                    )
        if "fileshare" in backends:
            for pattern, size in biggest.items():
                if size > MAX_FILE:
                    problems.append(
                        (
                            "size_per_proc",
                            section["size_per_proc"],
                            f"pattern {pattern} makes a {format_size(size)} file; an Azure file holds at "
                            f"most {format_size(MAX_FILE)}: use fewer ranks or smaller sizes",
                        )
                    )
        if {"posix", "mpiio"} & set(backends):
            path = section["posix"]["path"] or default_path()
            why = _writable_problem(path)
            if why:
                problems.append(("posix.path", path, f"must be a writable folder (or creatable): {why}"))
            else:
                need = max(
                    object_size(p, max(sizes), r) * (1 if p != "mfmw" else r)
                    for p in section["patterns"]
                    for r in section["ranks"]
                )
                probe = Path(path).expanduser()
                while not probe.exists():
                    probe = probe.parent
                free = shutil.disk_usage(probe).free
                if need > free:
                    problems.append(
                        (
                            "posix.path",
                            path,
                            f"the largest point writes {format_size(need)} but only "
                            f"{free / 2**30:.1f} GiB are free there",
                        )
                    )
        for backend in (b for b in backends if b in CLOUD):
            creds = section[backend]
            if backend == "blob" and emulated(section):
                # Started by `make run` when it is not there yet; a given one must be local.
                text = os.environ.get(AZURITE_ENV)
                if text and "127.0.0.1" not in azure.endpoint_of(text, "blob"):
                    problems.append(
                        (
                            "blob.emulator",
                            "azurite",
                            f"{AZURITE_ENV} names a blob endpoint that is not "
                            "a local Azurite: unset it, or set blob.emulator to null for a real account",
                        )
                    )
                continue
            where = f"{backend}.credentials_file" if creds["credentials_file"] else f"{backend}.connection_string_env"
            shown = creds["credentials_file"] or creds["connection_string_env"]
            try:
                text = azure.read_connection_string(creds["connection_string_env"], creds["credentials_file"])
            except azure.CredentialError as exc:
                problems.append((where, shown, f"backend {backend} is enabled but has no credentials: {exc}"))
                continue
            why = azure.connection_problem(text, SERVICE[backend])
            if why:
                problems.append((where, shown, f"the connection string there {why}"))
        return problems

    def points(self, section, campaign):
        points = []
        for pattern in section["patterns"]:
            for backend in self.backends(section):
                for nodes in section["nodes"]:
                    for ranks in section["ranks"]:
                        if nodes > ranks:
                            continue
                        for size in expand_sizes(section["size_per_proc"]):
                            points.append(
                                {
                                    "pattern": pattern,
                                    "backend": backend,
                                    "nodes": nodes,
                                    "ranks": ranks,
                                    "size_per_proc": size,
                                }
                            )
        return points

    def kernel_args(self, point, section, campaign):
        retry = section["retry"]
        args = [
            "--pattern",
            point["pattern"],
            "--backend",
            point["backend"],
            "--size-per-proc",
            str(point["size_per_proc"]),
            "--nodes",
            str(point["nodes"]),
            "--name-prefix",
            name_prefix(point, campaign.get("name", "movebench")),
            "--fsync" if section["fsync"] else "--no-fsync",
            "--verify" if section["verify"] else "--no-verify",
            "--cleanup" if section["cleanup"] else "--no-cleanup",
        ]
        if section["iterations"]:
            args += ["--iterations", str(section["iterations"])]
        backend = point["backend"]
        if backend in ("posix", "mpiio"):
            args += [
                "--path",
                section["posix"]["path"] or default_path(),
                "--transfer-size",
                str(parse_size(section["posix"]["transfer_size"])),
            ]
        if backend == "mpiio":
            for key, value in sorted(section["mpiio"]["hints"].items()):
                args += ["--hint", f"{key}={value}"]
        if backend in CLOUD:
            creds = section[backend]
            args += [
                "--max-concurrency",
                str(creds["max_concurrency"]),
                "--retry-total",
                str(retry["total"]),
                "--retry-initial-backoff-s",
                str(retry["initial_backoff_s"]),
                "--retry-increment-base-s",
                str(retry["increment_base_s"]),
                "--retry-jitter-s",
                str(retry["jitter_s"]),
                "--request-timeout-s",
                str(section["request_timeout_s"]),
            ]
            # Where the secret is, never the secret: the command line lands in logs and failure records.
            if creds["credentials_file"] and not (backend == "blob" and emulated(section)):
                args += ["--credentials-file", str(Path(creds["credentials_file"]).expanduser().resolve())]
            else:
                args += ["--connection-string-env", connection_env(section, backend)]
        if backend == "blob":
            args += ["--block-size", str(parse_size(section["block_size"]))]
        if backend == "fileshare":
            args += ["--range-size", str(parse_size(section["range_size"]))]
        return args

    def memory_mb(self, point, section):
        per_rank = point["size_per_proc"] * (2 if section["verify"] else 1)
        ranks_per_node = -(-point["ranks"] // point["nodes"])
        gathered = point["size_per_proc"] * point["ranks"] if point["pattern"] == "sfsw" else 0
        return 512 + ranks_per_node * (150 + per_rank // MiB) + gathered // MiB

    def report_context(self, table, summary, campaign):
        return report_context(table, summary, skipped_backends())


FAMILY = IO()


# --- the report section: the study's tables per pattern, latency and bandwidth vs size per process ---

BACKEND_LABELS = {"posix": "POSIX", "mpiio": "MPI-IO", "blob": "Blob", "fileshare": "File"}
BACKEND_COLORS = {"posix": "tab:green", "mpiio": "tab:orange", "blob": "tab:blue", "fileshare": "tab:purple"}


def _medians(summary):
    """(pattern, backend, nodes, ranks, size_per_proc) -> latency and bandwidth medians with their CIs."""
    keys = ["pattern", "backend", "nodes", "ranks", "size_per_proc"]
    frames = []
    for measure, name in (("elapsed_s", "latency"), ("bandwidth_Bps", "bandwidth")):
        part = summary[summary["measure"] == measure][keys + ["n", "median", "ci_low", "ci_high"]]
        frames.append(
            part.rename(columns={"median": name, "ci_low": f"{name}_low", "ci_high": f"{name}_high"})
            .set_index(keys + (["n"] if measure == "elapsed_s" else []))
            .drop(columns=[] if measure == "elapsed_s" else ["n"])
        )
    return frames[0].join(frames[1]).reset_index()


def study_table(medians, pattern):
    """One pattern's table as the study prints it: file size, size per process, then latency and bandwidth
    (MiB/s) per backend; one row per nodes x ranks x size per process."""
    import pandas as pd

    part = medians[medians["pattern"] == pattern]
    rows = []
    for (nodes, ranks, size), group in part.groupby(["nodes", "ranks", "size_per_proc"], sort=True):
        row = {
            "nodes": nodes,
            "ranks": ranks,
            "file size": format_size(object_size(pattern, size, ranks)),
            "size per process": format_size(size),
        }
        for backend in [b for b in BACKEND_LABELS if b in set(part["backend"])]:
            hit = group[group["backend"] == backend]
            label = BACKEND_LABELS[backend]
            row[f"{label} latency (s)"] = hit["latency"].iloc[0] if len(hit) else None
            row[f"{label} bandwidth (MiB/s)"] = hit["bandwidth"].iloc[0] / MiB if len(hit) else None
        rows.append(row)
    return pd.DataFrame(rows)


def size_figure(medians, plt):
    """Latency (top) and bandwidth (bottom) vs size per process, one column per pattern, a line per backend."""
    from matplotlib.ticker import FuncFormatter

    patterns = [p for p in PATTERNS if p in set(medians["pattern"])]
    fig, axes = plt.subplots(2, len(patterns), figsize=(4.6 * len(patterns), 7.2), squeeze=False, sharex=True)
    for col, pattern in enumerate(patterns):
        part = medians[medians["pattern"] == pattern]
        for (backend, ranks, nodes), line in part.groupby(["backend", "ranks", "nodes"], sort=True):
            line = line.sort_values("size_per_proc")
            x = line["size_per_proc"] / MiB
            label = f"{BACKEND_LABELS.get(backend, backend)} ({ranks} ranks" + (
                f", {nodes} nodes)" if nodes > 1 else ")"
            )
            for row, (name, scale) in enumerate((("latency", 1.0), ("bandwidth", 1.0 / MiB))):
                y = line[name] * scale
                err = [(line[name] - line[f"{name}_low"]) * scale, (line[f"{name}_high"] - line[name]) * scale]
                style = "-" if ranks == min(part["ranks"]) else "--"
                axes[row][col].errorbar(
                    x,
                    y,
                    yerr=err,
                    marker="o",
                    capsize=3,
                    label=label,
                    linestyle=style,
                    color=BACKEND_COLORS.get(backend),
                )
        axes[0][col].set_title(pattern)
        axes[1][col].set_xlabel("size per process")
        for row in range(2):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_yscale("log")
            axes[row][col].xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(round(v * MiB)))))
    axes[0][0].set_ylabel("latency (s)")
    axes[1][0].set_ylabel("bandwidth (MiB/s)")
    axes[0][-1].legend(fontsize="small")
    fig.tight_layout()
    return fig


def report_context(table, summary, skipped=()):
    from movebench import report

    _, plt = report.plotting()
    medians = _medians(summary)
    measured = table[~table["warmup"].astype(bool)]
    retried = measured[measured.get("retries", 0) > 0] if "retries" in measured else measured.iloc[0:0]
    retries = None
    if len(retried):
        retries = report.html_table(
            retried.groupby(["pattern", "backend", "ranks", "size_per_proc"], as_index=False).agg(
                repetitions=("rep", "size"), retries=("retries", "sum"), retries_write=("retries_write", "sum")
            )
        )
    backends = [b for b in BACKEND_LABELS if b in set(medians["backend"])]
    return {
        "tables": [
            (p, report.html_table(study_table(medians, p), float_format="{:.4g}"))
            for p in PATTERNS
            if p in set(medians["pattern"])
        ],
        "figure": report.figure_uri(size_figure(medians, plt)),
        "backends": [BACKEND_LABELS[b] for b in backends],
        "emulated_blob": "blob" in backends,
        "skipped": list(skipped),
        "retries": retries,
    }


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


class Point:
    """One point's state on one rank: the backend, the data, the run space."""

    def __init__(self, comm, args, backend):
        self.comm, self.args, self.backend = comm, args, backend
        self.pattern, self.size = args.pattern, args.size_per_proc
        rank, n = comm.rank, comm.size
        self.total = self.size * n
        # sf: rank r's bytes sit at offset r x size in the object; mf: at 0 in its own object.
        self.offset = 0 if self.pattern == "mfmw" else rank * self.size
        self.data = make_payload(self.size, self.offset)
        self.crc = zlib.crc32(self.data)
        self.gathered = np.ones(self.total, dtype=np.uint8) if self.pattern == "sfsw" and rank == 0 else None
        self.clock = clock_offset(comm)

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

    def measure(self, rep, warmup):
        from mpi4py import MPI

        comm, backend = self.comm, self.backend
        obj, every = self.objects(rep, warmup)
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
        if self.args.fault == "flip-byte" and comm.rank == 0:
            backend.corrupt(every[0], 0)
        error, verify_s = None, None
        if self.args.verify:
            comm.Barrier()
            t0 = MPI.Wtime()
            errors = [e for e in comm.allgather(self.verify(obj)) if e]
            verify_s = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            error = "; ".join(errors) or None
        comm.Barrier()
        last = not warmup and rep == self.args.repetitions - 1
        if (self.args.cleanup or not last) and (self.pattern == "mfmw" or comm.rank == 0):
            backend.delete(obj)
        retries = comm.allreduce(backend.retries - before)
        extras = {
            "file_size": object_size(self.pattern, self.size, comm.size),
            "files": len(every),
            "rank_start_s": [t[0] - first for t in times],
            "rank_end_s": [t[1] - first for t in times],
            "rank_elapsed_s": [t[1] - t[0] for t in times],
            "retries_write": comm.allreduce(retries_write),
            "retries": retries,
            "verified": None if not self.args.verify else error is None,
            "verify_s": verify_s,
        }
        if error:
            extras.update(ok=False, error=error)
        return elapsed, self.total, extras


def backend_settings(args) -> dict:
    return {
        "path": args.path,
        "transfer_size": args.transfer_size,
        "fsync": args.fsync,
        "hints": dict(h.split("=", 1) for h in args.hint),
        "block_size": args.block_size,
        "range_size": args.range_size,
        "max_concurrency": args.max_concurrency,
        "connection_string_env": args.connection_string_env,
        "credentials_file": args.credentials_file,
        "retry": {
            "total": args.retry_total,
            "initial_backoff_s": args.retry_initial_backoff_s,
            "increment_base_s": args.retry_increment_base_s,
            "jitter_s": args.retry_jitter_s,
        },
        "request_timeout_s": args.request_timeout_s,
    }


def parser():
    from movebench.kernel import argument_parser

    p = argument_parser("io", __doc__.split("\n\n")[0])
    p.add_argument("--pattern", choices=PATTERNS, required=True)
    p.add_argument("--backend", choices=NAMES, required=True)
    p.add_argument("--size-per-proc", type=parse_size, required=True, help=f"bytes per rank: {SIZE_HINT}")
    p.add_argument("--nodes", type=int, default=1, help="nodes of the point (recorded)")
    p.add_argument(
        "--iterations", type=int, help="measured repetitions (the config's io.iterations); overrides --repetitions"
    )
    p.add_argument("--name-prefix", help="run-space prefix (default: derived from the point)")
    p.add_argument("--fsync", action=_bool_action(), default=True, help="fsync / MPI_File_sync before close")
    p.add_argument("--verify", action=_bool_action(), default=True, help="read back and compare CRC-32, untimed")
    p.add_argument("--cleanup", action=_bool_action(), default=True, help="delete objects and the run space")
    p.add_argument("--fault", choices=["flip-byte"], help="fault injection: flip one stored byte after the write")
    posix = p.add_argument_group("posix and mpiio")
    posix.add_argument("--path", default=default_path(), help="target folder")
    posix.add_argument("--transfer-size", type=parse_size, default=16 * MiB, help="bytes per pwrite")
    posix.add_argument("--hint", action="append", default=[], metavar="KEY=VALUE", help="mpiio: an MPI-IO hint")
    cloud = p.add_argument_group("blob and fileshare")
    cloud.add_argument("--block-size", type=parse_size, default=100 * MiB, help="blob: bytes per block")
    cloud.add_argument("--range-size", type=parse_size, default=MAX_RANGE, help="fileshare: bytes per range")
    cloud.add_argument("--max-concurrency", type=int, default=1, help="requests in flight per rank")
    cloud.add_argument(
        "--connection-string-env",
        default="AZURE_STORAGE_CONNECTION_STRING",
        help="environment variable holding the connection string",
    )
    cloud.add_argument("--credentials-file", help="file holding the connection string (wins over the variable)")
    cloud.add_argument("--retry-total", type=int, default=3, help="retries per request")
    cloud.add_argument("--retry-initial-backoff-s", type=float, default=1.0)
    cloud.add_argument("--retry-increment-base-s", type=float, default=2.0)
    cloud.add_argument("--retry-jitter-s", type=float, default=0.5)
    cloud.add_argument("--request-timeout-s", type=float, default=60.0, help="connect and read timeout")
    return p


def _bool_action():
    import argparse

    return argparse.BooleanOptionalAction


def main(argv=None):
    from mpi4py import MPI

    from movebench.kernel import run_mpi
    from movebench.storage.azure import describe_error

    args = parser().parse_args(argv)
    if args.iterations:
        args.repetitions = args.iterations
    comm = MPI.COMM_WORLD
    params = {
        "pattern": args.pattern,
        "backend": args.backend,
        "nodes": args.nodes,
        "ranks": comm.size,
        "size_per_proc": args.size_per_proc,
    }
    prefix = args.name_prefix or name_prefix(params, "standalone")
    backend = None
    try:
        backend = open_backend(args.backend, backend_settings(args))
        removed, space = [], None
        if comm.rank == 0:
            removed = backend.remove_leftovers(prefix + "-")
            space = f"{prefix}-{secrets.token_hex(4)}"
            backend.bind(space)
            backend.setup()
        backend.bind(comm.bcast(space, root=0))
        point = Point(comm, args, backend)
        extra_meta = {
            "storage": {"backend": args.backend, **backend.describe()},
            "leftovers_removed": removed,
            "fsync": args.fsync,
            "verify": args.verify,
            "cleanup": args.cleanup,
            "buffers_reused": True,
            "size_per_proc": args.size_per_proc,
        }
        run_mpi(comm, args, "io", args.pattern, params, point.measure, extra_meta)
        comm.Barrier()
        if comm.rank == 0 and args.cleanup:
            backend.teardown()
    except Exception as exc:  # a failed point must say why in one line, then stop every rank
        print(
            f"movebench.io: rank {comm.rank}: {args.pattern} on {args.backend} failed: {describe_error(exc)}",
            file=sys.stderr,
            flush=True,
        )
        if backend is not None and comm.rank == 0 and args.cleanup:
            try:
                backend.teardown()
            except Exception as again:  # the rerun removes what is left (remove_leftovers)
                print(
                    f"movebench.io: could not remove the run space: {describe_error(again)}",
                    file=sys.stderr,
                    flush=True,
                )
        # Abort tears the job down at once: give mpiexec a moment to forward the line above to the log.
        time.sleep(1.0)
        comm.Abort(1)


if __name__ == "__main__":
    main()
