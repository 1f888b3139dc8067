"""calibration: what this machine's own copies and writes reach, as the upper bounds of the other
families' bandwidths (definitions: kernel.py's docstring; how the report uses them: movebench.judging.bounds)."""

from __future__ import annotations

from movebench.core.sizes import expand_sizes
from movebench.spec import BANDWIDTH, ELAPSED, Axis, Family, Setting

#: bytes one Python call to numpy copies at least: at small sizes one call per copy times the
#: interpreter, not the copy, and a window of MPI messages would beat the "bound". 256 KiB of
#: destination rows stays within a core's L2 (docs/notes has the sizes tried).
MEMCPY_BATCH_BYTES = 256 * 2**10


def copies_per_call(size: int) -> int:
    """How many copies of `size` bytes the memcpy probe makes in one call (one per destination row)."""
    return max(1, -(-MEMCPY_BATCH_BYTES // size))


def _is_memcpy(point: dict) -> bool:
    return point["probe"] == "memcpy"


def _is_fio(point: dict) -> bool:
    return point["probe"] == "fio"


class Calibration(Family):
    name = "calibration"
    variant = "probe"
    axes = (
        Axis("probe", "probes"),
        Axis("pattern", "fio_patterns", when=_is_fio),
        Axis("ranks", "ranks"),
        Axis("size", "memcpy_sizes", expand_sizes, when=_is_memcpy),
        Axis("size_per_proc", "fio_sizes", expand_sizes, when=_is_fio),
    )
    settings = (
        Setting("iterations", when=_is_memcpy),
        Setting("repetition_time", when=_is_memcpy),
        Setting("fio_path", when=_is_fio),
    )
    measures = (BANDWIDTH, ELAPSED)
    # A launch fixes the processes: memcpy's ranks, and fio's one kernel process (fio starts its own jobs).
    launch_group_axes = ("probe", "ranks")

    def check(self, section, campaign):
        problems = []
        for key in ("memcpy_sizes", "fio_sizes"):
            try:
                sizes = expand_sizes(section[key])
            except (ValueError, KeyError) as exc:
                problems.append((key, section[key], str(exc)))
                continue
            if any(s < 1 for s in sizes):
                problems.append((key, section[key], "every size must be at least 1 byte"))
        return problems

    def placement(self, point):
        # fio starts its own jobs (numjobs = ranks); the kernel that runs it is one process.
        return (1, 1) if _is_fio(point) else (int(point["ranks"]), 1)

    def kernel_settings(self, point, section, campaign):
        settings = super().kernel_settings(point, section, campaign)
        if _is_fio(point):
            settings["fio_path"] = section["fio_path"] or default_fio_path()
        return settings

    def node_memory_bytes(self, point, section):
        if _is_memcpy(point):
            size = point["size"]
            return 512 * 2**20 + point["ranks"] * (100 * 2**20 + size + copies_per_call(size) * size)
        return 512 * 2**20


def default_fio_path() -> str:
    """io's own default folder for POSIX output, so that by default fio writes where io writes."""
    import os
    import tempfile

    return os.path.join(tempfile.gettempdir(), "movebench-io")


FAMILY = Calibration()
