"""How a kernel's buffers sit in memory, and one way to allocate them on every path.

The page size behind a buffer moves large-message figures as much as the effect being measured
(docs/notes/kernels.md, sections 1 and 5), so it is chosen, not inherited:
`allocate_bytes(nbytes, mode)` maps fresh anonymous memory and asks the kernel for its pages;
`allocate(shape, dtype, mode)` is a numpy array over the same memory. The streaming kernels take
the bytes (a memoryview) and never import numpy, a large share of a point's fixed cost
(docs/notes/kernels.md, section 8); the buffers, pages and alignment are the same either way.

- "4k": base pages only (madvise MADV_NOHUGEPAGE), whatever the system's THP setting. What OSU's
  page-aligned posix_memalign gets on a system whose THP is `madvise` or `never`.
- "thp": the buffer starts on a huge-page boundary and the range asks for transparent huge pages
  (MADV_HUGEPAGE); honoured when THP `enabled` is `always` or `madvise`.
- "numpy": numpy's own allocation, the old behaviour: base pages, except that numpy advises huge
  pages for arrays of 4 MiB and more, over an unaligned range (so a 4 MiB array gets one huge page of two).

`memory_facts` says what a point actually got: the system's settings, the allocator's tunables, and
per buffer its alignment and how many of its bytes sit in huge pages (from /proc/self/smaps).
"""

from __future__ import annotations

import math
import mmap
import os
import re
import sys
from pathlib import Path

MEMORY_MODES = ("4k", "thp", "numpy")
THP = Path("/sys/kernel/mm/transparent_hugepage")
DEFAULT_HUGE_PAGE = 2 << 20
_SMAPS = Path("/proc/self/smaps")
# Private: a shared anonymous mapping is shmem, whose huge pages follow `shmem_enabled` instead.
_PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
_SMAPS_LINE = re.compile(r"^(?:([0-9a-f]+)-([0-9a-f]+) |AnonHugePages:\s+(\d+) kB)", re.M)


def _setting(path: Path) -> str | None:
    """The selected word of a sysfs choice such as 'always [madvise] never'."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else text


def huge_page_size() -> int:
    try:
        return int((THP / "hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return DEFAULT_HUGE_PAGE


def allocate_bytes(nbytes: int, mode: str = "4k", fill: int | None = 0) -> memoryview:
    """`nbytes` of fresh memory of the given page mode as a writable byte memoryview, every page written once
    (with `fill`; None leaves the writing to the caller). The view keeps its mapping alive."""
    if mode not in MEMORY_MODES:
        raise ValueError(f"memory mode {mode!r}: use one of {', '.join(MEMORY_MODES)}")
    if mode == "numpy":
        import numpy as np

        view = memoryview(np.empty(nbytes, dtype=np.uint8))
    else:
        page = mmap.PAGESIZE
        if mode == "4k":
            region = mmap.mmap(-1, max(page, -(-nbytes // page) * page), flags=_PRIVATE)
            region.madvise(mmap.MADV_NOHUGEPAGE)
            offset = 0
        else:
            huge = huge_page_size()
            span = max(huge, -(-nbytes // huge) * huge)
            region = mmap.mmap(-1, span + huge, flags=_PRIVATE)
            offset = (-address(region)) % huge
            region.madvise(mmap.MADV_HUGEPAGE, offset, span)
        view = memoryview(region)[offset:offset + nbytes]
    if fill is not None and nbytes:
        view[:] = bytes((fill,)) * nbytes
    return view


def allocate(shape, dtype="uint8", mode: str = "4k", fill=0):
    """A C-contiguous numpy array over `allocate_bytes` memory, every element set to `fill`."""
    import numpy as np

    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    count = math.prod(shape)
    if mode == "numpy":
        array = np.empty(shape, dtype=dtype)
    else:  # allocate_bytes refuses an unknown mode
        array = np.frombuffer(allocate_bytes(count * dtype.itemsize, mode, fill=None), dtype=dtype,
                              count=count).reshape(shape)
    array.fill(fill)
    return array


def address(buffer) -> int:
    """Where a buffer (numpy array, memoryview, mmap) starts in this process's memory."""
    interface = getattr(buffer, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    import ctypes  # here: only a meta's memory facts need it

    view = memoryview(buffer)
    if view.readonly:
        raise ValueError("address of a read-only buffer")
    return ctypes.addressof(ctypes.c_char.from_buffer(view)) if view.nbytes else 0


def _vmas():
    """(start, end, AnonHugePages bytes) of every mapping of this process."""
    # one pass over the text: a bcast launch reads smaps for every point, and a scan per mapping costs far more
    vmas = []
    for m in _SMAPS_LINE.finditer(_SMAPS.read_text()):
        if m.group(1) is not None:
            vmas.append([int(m.group(1), 16), int(m.group(2), 16), 0])
        elif vmas:
            vmas[-1][2] = int(m.group(3)) * 1024
    return [tuple(v) for v in vmas]


def huge_bytes(array, vmas=None) -> int | None:
    """Bytes of `array` (numpy array or byte buffer) backed by huge pages (None where /proc/self/smaps is unreadable).

    smaps counts huge pages per mapping, and a huge page fills an aligned slot of its mapping: the
    answer is exact when the mapping holds this array alone (as `allocate`'s do), an upper bound
    when neighbours share it.
    """
    lo = address(array)
    hi, page = lo + memoryview(array).nbytes, huge_page_size()
    try:
        vmas = list(_vmas()) if vmas is None else vmas
    except OSError:
        return None
    total = 0
    for start, end, huge in vmas:
        if not huge or start >= hi or end <= lo:
            continue
        slots = range(-(-max(start, lo - page) // page) * page, min(end, hi), page)
        fits = sum(min(s + page, hi) - max(s, lo) for s in slots if s + page <= end and s + page > lo)
        total += min(huge, fits)
    return total


def system_facts() -> dict:
    """The machine's memory settings that change what a buffer's pages are."""
    env = {k: v for k, v in sorted(os.environ.items())
           if k == "GLIBC_TUNABLES" or k.startswith(("MALLOC_", "NUMPY_MADVISE"))}
    numpy_advises = None  # unknown, or numpy not loaded in this kernel (its buffers are then not numpy's)
    if "numpy" in sys.modules:
        try:
            from numpy._core.multiarray import _get_madvise_hugepage

            numpy_advises = bool(_get_madvise_hugepage())
        except ImportError:
            pass
    return {"page_size": mmap.PAGESIZE, "huge_page_size": huge_page_size(),
            "thp_enabled": _setting(THP / "enabled"), "thp_defrag": _setting(THP / "defrag"),
            "thp_shmem_enabled": _setting(THP / "shmem_enabled"), "allocator_env": env,
            "numpy_madvise_hugepage": numpy_advises}


def buffer_facts(array, vmas=None) -> dict:
    start = address(array)
    return {"nbytes": memoryview(array).nbytes, "address_mod_4k": start % 4096,
            "address_mod_2m": start % (2 << 20), "huge_page_bytes": huge_bytes(array, vmas)}


def memory_facts(mode: str, buffers: dict) -> dict:
    """For a point's meta: the mode asked for, the system's settings and what each named buffer got."""
    try:
        vmas = list(_vmas())
    except OSError:
        vmas = []
    return {"memory_mode": mode, **system_facts(),
            "buffers": {name: buffer_facts(array, vmas) for name, array in buffers.items()}}
