"""Loop counts for a timed repetition: how many iterations make it last a chosen time."""

from __future__ import annotations


def iterations_for_duration(run, seconds: float) -> int:
    """Iterations that make a repetition last about `seconds` (IMB's -time idea; OSU fixes loop counts).

    `run(iterations)` returns (elapsed_s, ...), the same slowest-rank time on every rank, so all ranks
    choose the same count.
    """
    iterations, elapsed = 1, 0.0
    while iterations < 1 << 30:
        elapsed = run(iterations)[0]
        # a run of 1/16 of the target or more sets the count within a few percent; the probe's runs together then
        # last under a quarter of one repetition (1/8 cost twice that for no better count: docs/notes/kernels.md, 12)
        if elapsed >= seconds / 16:
            break
        iterations *= 8 if elapsed < seconds / 256 else 2
    return max(1, round(iterations * seconds / max(elapsed, 1e-9)))
