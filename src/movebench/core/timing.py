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
