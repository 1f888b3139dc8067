"""Human sizes ("4KiB", "1 MB", 4096) and geometric ranges of them."""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": 1024,
    "kib": 1024,
    "mi": 1024**2,
    "mib": 1024**2,
    "gi": 1024**3,
    "gib": 1024**3,
    "ti": 1024**4,
    "tib": 1024**4,
    "p": 1000**5,
    "pb": 1000**5,
    "pi": 1024**5,
    "pib": 1024**5,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
SIZE_HINT = "a byte count or a size such as 4KiB, 1MiB, 2GiB (powers of 1024) or 4kB, 1MB (powers of 1000)"
#: The largest size taken, 1 PiB. A size is a message, a value, a buffer or a file per process, so it has to fit
#: a node (today's largest hold tens of TiB) or a filesystem; 1 PiB is far above any of them, and a size above
#: it is a slip (10**23 typed for 10**3) that would otherwise pass validation and be stopped only at admission,
#: as a plan of "372529029846192.1 GiB". It also keeps every size exact after the float parse (2**50 < 2**53)
#: and size x ranks x windows far inside int64.
MAX_SIZE = 1024**5
#: Most sizes one range may give: above it a range is refused before its list is built (a tiny factor
#: over a wide range would give hundreds of thousands of points and stall Snakemake's DAG).
MAX_RANGE_SIZES = 5000


class SizeError(ValueError):
    """A value that is not a size."""


def parse_size(value) -> int:
    """Bytes in `value`: an int, or a string such as "4KiB" or "1.5 MB"; SizeError above MAX_SIZE."""
    nbytes = _parse_size(value)
    if nbytes > MAX_SIZE:
        raise SizeError(f"{value!r} is more than the largest size, {format_size(MAX_SIZE)} ({MAX_SIZE} bytes)")
    return nbytes


def _parse_size(value) -> int:
    if isinstance(value, bool):
        raise SizeError(f"{value!r} is not a size: expected {SIZE_HINT}")
    if isinstance(value, int):
        if value < 0:
            raise SizeError(f"{value!r} is negative: expected {SIZE_HINT}")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if not isinstance(value, str):
        raise SizeError(f"{value!r} is not a size: expected {SIZE_HINT}")
    match = _SIZE.match(value)
    if not match or match.group(2).lower() not in _UNITS:
        raise SizeError(f"{value!r} is not a size: expected {SIZE_HINT}")
    number = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not number.is_integer():
        raise SizeError(f"{value!r} is not a whole number of bytes")
    return int(number)


def format_size(nbytes: int) -> str:
    """The shortest exact IEC spelling of `nbytes`: 4096 -> "4KiB", 1000 -> "1000B"."""
    for unit, factor in (("PiB", 1024**5), ("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return f"{nbytes}B"


def range_sizes(start: int, stop: int, factor: float, limit: int = MAX_RANGE_SIZES) -> list[int]:
    """The distinct round(start x factor^k) <= stop, in order; SizeError past `limit` sizes, before building more.

    Steps that round to a size already taken are skipped in one jump (a factor of 1.0001 from 1 byte
    would otherwise take thousands of steps per byte), so the work is bounded by `limit` too.
    """
    sizes: list[int] = []
    exponent = 0
    log_factor = math.log(factor)
    while True:
        size = round(start * factor**exponent)
        if size > stop:
            return sizes
        if len(sizes) == limit:
            raise SizeError(f"range from {start} to {stop} by factor {factor} gives more than {limit} sizes: "
                            "use a larger factor or a narrower range")
        sizes.append(size)
        # The first exponent whose size rounds above this one: start x factor^k >= size + 0.5.
        exponent = max(exponent + 1, math.ceil(math.log((size + 0.5) / start) / log_factor))


def expand_sizes(spec, limit: int = MAX_RANGE_SIZES) -> list[int]:
    """A size, a list of sizes, or a range {from, to, factor} -> sorted distinct byte counts."""
    if isinstance(spec, dict):
        start, stop = parse_size(spec["from"]), parse_size(spec["to"])
        factor = spec.get("factor", 2)
        if start < 1 or stop < start:
            raise SizeError(f"range from {spec['from']!r} to {spec['to']!r} is empty: 'from' must be >= 1 and <= 'to'")
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not math.isfinite(factor) or factor <= 1:
            raise SizeError(f"range factor {factor!r} must be a finite number > 1")
        return range_sizes(start, stop, float(factor), limit)
    if isinstance(spec, list):
        return sorted({parse_size(v) for v in spec})
    return [parse_size(spec)]
