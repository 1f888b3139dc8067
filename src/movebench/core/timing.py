"""Timing of repetitions: warm-ups first and flagged, then the measured ones."""

from __future__ import annotations

import time
from dataclasses import dataclass

clock = time.perf_counter


@dataclass(frozen=True)
class Repetitions:
    """How often a point's kernel runs: `warmups` flagged runs, then `repetitions` counted ones."""

    repetitions: int
    warmups: int

    def __iter__(self):
        """(rep, warmup) pairs; warm-ups come first and are numbered apart from counted reps."""
        for i in range(self.warmups):
            yield i, True
        for i in range(self.repetitions):
            yield i, False


def calibrate(run, seconds: float) -> int:
    """Iterations that make a repetition last about `seconds` (IMB's -time idea; OSU fixes loop counts).

    `run(iterations)` returns (elapsed_s, ...), the same slowest-rank time on every rank, so all ranks
    choose the same count.
    """
    iterations, elapsed = 1, 0.0
    while iterations < 1 << 30:
        elapsed = run(iterations)[0]
        if elapsed >= seconds / 8:
            break
        iterations *= 8 if elapsed < seconds / 256 else 2
    return max(1, round(iterations * seconds / max(elapsed, 1e-9)))
