"""io: output patterns to POSIX, MPI-IO, Azure Blob and Azure Files (definitions: kernel.py's docstring)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path

from movebench.core.sizes import SizeError, expand_sizes, format_size, parse_size
from movebench.spec import BANDWIDTH, ELAPSED, LOWER, Axis, Family, Measure, Setting, Storage

PATTERNS = ("sfsw", "sfmw", "mfmw")
CLOUD = ("blob", "fileshare")
MiB = 1024**2
MAX_BLOCK = 4000 * MiB  # Put Block limit
MAX_BLOCKS = 50_000  # committed blocks per blob
MAX_BLOB = MAX_BLOCKS * MAX_BLOCK  # ~190.7 TiB
MAX_RANGE = 4 * MiB  # Put Range limit
MAX_FILE = 4 * 1024**4  # Azure Files: 4 TiB per file
SERVICE = {"blob": "blob", "fileshare": "file"}
# blob.emulator = azurite: the connection string of the Azurite the workflow starts travels in this
# variable, apart from AZURE_STORAGE_CONNECTION_STRING, so that a real account's string in the user's
# environment is never used (nor overwritten) by an emulated run.
AZURITE_ENV = "MOVEBENCH_AZURITE_CONNECTION_STRING"
# The kernel's line for a storage endpoint that never answered: its reason is complete in itself, where other
# failure lines quote an error's own text, which may need its log lines around it.
ENDPOINT_FAILED = re.compile(r"^movebench\.\w+: rank \d+: .* failed: (io (?:blob|fileshare): the endpoint .*)$")


def emulated(section) -> bool:
    return section["blob"]["emulator"] == "azurite"


def connection_env(section, backend) -> str:
    return AZURITE_ENV if backend == "blob" and emulated(section) else section[backend]["connection_string_env"]


def default_path() -> str:
    return os.path.join(tempfile.gettempdir(), "movebench-io")


def object_size(pattern: str, size_per_proc: int, ranks: int) -> int:
    """Bytes of one object: the whole output for single-file patterns, one rank's part for mfmw."""
    return size_per_proc if pattern == "mfmw" else size_per_proc * ranks


def name_prefix(point: dict, campaign_name: str) -> str:
    """Run-space prefix of a point: readable, short, valid as a container and share name."""
    digest = hashlib.sha1(f"{campaign_name}:{FAMILY.path(point)}".encode()).hexdigest()[:10]
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


def _on(*backends):
    return lambda point: point["backend"] in backends


class IO(Family):
    name = "io"
    variant = "pattern"
    # what one launch fixes: its ranks and their nodes (each point opens, writes and removes its own files)
    launch_group_axes = ("nodes", "ranks")
    axes = (
        Axis("pattern", "patterns"),
        Axis("backend", "backends"),
        Axis("nodes", "nodes"),
        Axis("ranks", "ranks"),
        Axis("size_per_proc", "size_per_proc", expand_sizes),
    )
    settings = (
        Setting("fsync"),
        Setting("verify"),
        Setting("cleanup"),
        Setting("posix.transfer_size", parse_size, when=_on("posix", "mpiio")),
        Setting("mpiio.hints", when=_on("mpiio")),
        Setting("block_size", parse_size, when=_on("blob")),
        Setting("range_size", parse_size, when=_on("fileshare")),
        Setting("retry", when=_on(*CLOUD)),
        Setting("request_timeout_s", when=_on(*CLOUD)),
    )
    measures = (BANDWIDTH, ELAPSED, Measure("retries", "1", LOWER, "storage SDK retries"))
    kernel_sources = ("kernel.py", "storage/*.py")
    renamed = {"iterations": "renamed: use io.repetitions (measured repetitions per point, IOR's -i; "
                             "iterations means only a kernel's inner loop count)"}

    def kernel_settings(self, point, section, campaign):
        settings = {key.split(".")[-1]: value for key, value in super().kernel_settings(point, section,
                                                                                         campaign).items()}
        settings["name_prefix"] = name_prefix(point, campaign["name"])
        backend = point["backend"]
        if backend in ("posix", "mpiio"):
            settings["path"] = section["posix"]["path"] or default_path()
        if backend in CLOUD:
            creds = section[backend]
            settings["max_concurrency"] = creds["max_concurrency"]
            # Where the secret is, never the secret: settings land in logs, meta and failure records.
            if creds["credentials_file"] and not (backend == "blob" and emulated(section)):
                settings["credentials_file"] = str(Path(creds["credentials_file"]).expanduser().resolve())
            else:
                settings["connection_string_env"] = connection_env(section, backend)
        return settings

    def node_memory_bytes(self, point, section):
        """Rank 0's node: every rank's data, its making and read-back, SDK upload buffers, sfsw's gather.

        A rank holds its data and, while making it, a copy as wide (kernel.make_payload); verify reads
        its part back. The Azure SDK reads each block (blob) or range (fileshare) it sends into memory,
        max_concurrency at a time. sfsw gathers every rank's data on rank 0 before writing it alone.
        """
        size = point["size_per_proc"]
        per_rank = 2 * size + (size if section["verify"] else 0)
        backend = point["backend"]
        if backend in CLOUD:
            chunk = parse_size(section["block_size"] if backend == "blob" else section["range_size"])
            per_rank += section[backend]["max_concurrency"] * min(chunk, object_size(point["pattern"], size,
                                                                                      point["ranks"]))
        ranks_per_node = -(-point["ranks"] // point["nodes"])
        gathered = size * point["ranks"] if point["pattern"] == "sfsw" else 0
        return 512 * MiB + ranks_per_node * (150 * MiB + per_rank) + gathered

    def storage(self, point, section):
        """posix and mpiio write size_per_proc x ranks into the target folder; cleanup: false keeps the last."""
        if point["backend"] not in ("posix", "mpiio"):
            return []
        written = point["size_per_proc"] * point["ranks"]
        return [Storage(section["posix"]["path"] or default_path(), written, "writes", kept=not section["cleanup"])]

    def services(self, section, campaign, points):
        """Azurite for the run when a blob point on the emulator is about to run and none is given; its blobs
        on disk when the campaign uploads more than its memory store holds (`azurite_on_disk`)."""
        if not emulated(section) or os.environ.get(AZURITE_ENV):
            return None
        if not any(p["backend"] == "blob" for p in points):
            return None
        return _azurite(azurite_on_disk(section, points, physical_memory()))

    def service_needed(self, point):
        return point["backend"] == "blob"

    def failure_reason(self, log_tail):
        return next((m.group(1) for m in map(ENDPOINT_FAILED.match, log_tail) if m), None)

    def check(self, section, campaign):
        from movebench.families.io.storage import azure

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
                del limits[key]
            elif limit and limits[key] > limit:
                problems.append((key, value, f"must be at most {format_size(limit)} ({why})"))
        backends = section["backends"]
        if "blob" in backends and emulated(section) and not os.environ.get(AZURITE_ENV):
            from movebench.services import azurite

            why = azurite.node_missing()
            if why:
                problems.append(("backends", backends, f"blob runs on Azurite (blob.emulator: azurite), which needs "
                                 f"Node.js: {why}. Install Node.js 20, or leave blob out of io.backends"))
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
        timeout = section["request_timeout_s"]
        if set(backends) & set(CLOUD) and timeout >= campaign["timeout"]:
            # campaign.timeout would kill the point first, and its record would say only "timed out".
            problems.append(("request_timeout_s", timeout, f"must be below campaign.timeout = {campaign['timeout']:g} "
                             "s, which would kill a point whose storage endpoint does not answer before the storage "
                             "request gives up and says so: lower io.request_timeout_s or raise campaign.timeout"))
        for backend in (b for b in backends if b in CLOUD):
            creds = section[backend]
            if backend == "blob" and emulated(section):
                # Started by the workflow when it is not there yet; a given one must be local.
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


#: The share of the host's memory the emulator's blobs may fill before they go to disk. Azurite's in-memory
#: store holds at most half the memory (its --extentMemoryLimit default) and frees a deleted blob's extents only
#: at its next garbage collection, so what fills it is the campaign's cumulative uploads, not one point's:
#: the cloud-output study's `here` scale (42 GiB in all) stopped with
#: MemoryExtentStoreAtSizeLimit on a 24 GiB host.
AZURITE_MEMORY_SHARE = 0.25


def blob_upload_bytes(section, points) -> int:
    """What the campaign's blob points upload in all: every rank's bytes, each warm-up and repetition (the
    adaptive rule's max), each launch (the adaptive rule's max)."""
    from movebench.core.adaptive import RepetitionPolicy
    from movebench.core.task import planned_launches

    reps = RepetitionPolicy.from_config(section["repetitions"]).max
    per_point = (int(section.get("warmups") or 0) + reps) * planned_launches(section.get("launches", 1))
    return sum(int(p["size_per_proc"]) * int(p["ranks"]) for p in points if p["backend"] == "blob") * per_point


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def azurite_on_disk(section, points, memory: int) -> bool:
    return blob_upload_bytes(section, points) > AZURITE_MEMORY_SHARE * memory


@contextlib.contextmanager
def _azurite(on_disk: bool = False):
    """Azurite on 127.0.0.1 for the campaign; its connection string goes to every point job's environment.
    `on_disk`: its blobs in a temporary folder (removed when it stops) instead of memory."""
    import shutil

    from movebench.services import azurite

    location = tempfile.mkdtemp(prefix="movebench-azurite-") if on_disk else None
    try:
        with azurite.Azurite(location=location, die_with_parent=True) as service:
            where = f"blobs on disk in {location}: the campaign uploads more than a quarter of this host's memory" \
                if location else "blobs in memory"
            print(f"movebench: Azurite up on 127.0.0.1:{service.port} (pid {service.pid}) for io's blob points, "
                  f"{where}", file=sys.stderr, flush=True)
            os.environ[AZURITE_ENV] = service.connection_string
            try:
                yield service
            finally:
                os.environ.pop(AZURITE_ENV, None)
        print(f"movebench: Azurite stopped (pid {service.pid})", file=sys.stderr, flush=True)
    finally:
        if location:
            shutil.rmtree(location, ignore_errors=True)


FAMILY = IO()
