"""Numbers as a person reads them: a unit chosen for the magnitude (µs, ms, GB/s, MiB/s, MiB) and three
significant digits, never an exponent. Tables and CSVs keep the SI values; only the report formats them."""

from __future__ import annotations

import math

#: SI unit of a measure -> the display units, largest first, with their factors.
SCALES = {
    "B/s": (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3), ("B/s", 1.0)),
    "B/s binary": (("GiB/s", 2.0**30), ("MiB/s", 2.0**20), ("KiB/s", 2.0**10), ("B/s", 1.0)),
    "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)),
    "B": (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0)),
}
#: A display unit asked for by name -> its factor to the SI unit.
FIXED = {label: factor for scale in SCALES.values() for label, factor in scale} | {"%": 0.01, "x": 1.0}


def _finite(values) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f != 0:
            out.append(abs(f))
    return out


def choose(unit: str, values) -> tuple[str, float]:
    """(display unit, factor) for `values` in SI `unit`: the largest unit in which their median is >= 1.

    `unit` may also name a display unit ("MiB/s", "ms"), which is then used as it is; a unit
    without a scale ("1", "ops/s") is kept with factor 1.
    """
    if unit in SCALES:
        finite = sorted(_finite(values))
        if not finite:
            return SCALES[unit][0][0] if unit != "s" else "s", SCALES[unit][0][1] if unit != "s" else 1.0
        middle = finite[len(finite) // 2]
        for label, factor in SCALES[unit]:
            if middle >= factor:
                return label, factor
        return SCALES[unit][-1]
    if unit in FIXED:
        return unit, FIXED[unit]
    return unit, 1.0


def sig(value, digits: int = 3) -> str:
    """`value` with `digits` significant digits and no exponent: 0.000123, 1.23, 12.3, 123, 12346."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    if not math.isfinite(x):
        return "" if math.isnan(x) else ("∞" if x > 0 else "-∞")
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    decimals = max(digits - 1 - magnitude, 0)
    text = f"{x:.{decimals}f}"
    if float(text) != 0 and math.floor(math.log10(abs(float(text)))) > magnitude:  # 9.996 -> 10.0: one digit less
        text = f"{x:.{max(decimals - 1, 0)}f}"
    return text


def human(value, unit: str, digits: int = 3) -> str:
    """One value in SI `unit` with the unit that suits it: human(3.2e-5, "s") == "32.0 µs"."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(x):
        return ""
    label, factor = choose(unit, [x])
    return f"{sig(x / factor, digits)} {label}".strip()
