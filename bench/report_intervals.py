"""The report's ratios of two points of one campaign, paired or not: coverage and width on synthetic campaigns.

Two-level log-normal data: POINTS points, each launch moves a point by a launch effect whose share `rho` the
points of one launch have in common (a launch group's members measured in one job), repetitions vary within a
launch. For each `rho`, the 95% CI of the ratio of points 1 and 0 by the paired test on the pair's
own variance (`compare_paired_launches`); moderated toward the prior of the family's disjoint pairs (0-1, 2-3, ...:
`paired_variance_prior`) with the judged pair in it, and without it (what `reportkit.ratio` does for a launch
group's members); and by the unpaired, moderated test (`compare_launches` with the family's prior over every point,
what it does for points launched apart): how often each covers the true ratio, and its median width (high / low).
docs/notes/report-intervals.md quotes the output.

    .venv/bin/python bench/report_intervals.py [--campaigns 2000] [--points 6] [--launches 3]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from movebench.core.verdict import (
    compare_launches,
    compare_paired_launches,
    launch_variance_prior,
    paired_variance_prior,
)

REPS, SD_LAUNCH, SD_REP = 10, 0.25, 0.05
KINDS = ("paired, own", "paired, prior with it", "paired, prior without it", "unpaired, moderated")


def campaign(rng, rho: float, points: int, launches: int) -> list[list[list[float]]]:
    """Point -> launch -> repetitions; every point's true value 1 (log 0)."""
    shared = rng.normal(0, SD_LAUNCH * math.sqrt(rho), launches)
    own = rng.normal(0, SD_LAUNCH * math.sqrt(1 - rho), (points, launches))
    centres = shared[None, :] + own
    return [[list(np.exp(c + rng.normal(0, SD_REP, REPS))) for c in point] for point in centres]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--campaigns", type=int, default=2000)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.campaigns} campaigns of {args.points} points, {args.launches} launches, {REPS} repetitions; "
          f"launch sd {SD_LAUNCH} (log), repetition sd {SD_REP}; the ratio of points 1 and 0")
    print("shared " + " ".join(f"{k:>24} {'width':>6}" for k in KINDS))
    for rho in (0.0, 0.5, 0.9):
        rng = np.random.default_rng(int(rho * 10) + 7)
        cover = dict.fromkeys(KINDS, 0)
        widths = {k: [] for k in KINDS}
        for _ in range(args.campaigns):
            points = campaign(rng, rho, args.points, args.launches)
            apart = launch_variance_prior([(p,) for p in points])
            pairs = list(zip(points[0::2], points[1::2], strict=False))
            results = (compare_paired_launches(points[1], points[0]),
                       compare_paired_launches(points[1], points[0], prior=paired_variance_prior(pairs)),
                       compare_paired_launches(points[1], points[0], prior=paired_variance_prior(pairs[1:])),
                       compare_launches(points[1], points[0], prior=apart))
            for kind, result in zip(KINDS, results, strict=True):
                cover[kind] += result.ci_low <= 1 <= result.ci_high
                widths[kind].append(result.ci_high / result.ci_low)
        n = args.campaigns
        print(f"{rho:>6.1f} " + " ".join(f"{cover[k] / n:>24.3f} {np.median(widths[k]):>6.2f}" for k in KINDS))


if __name__ == "__main__":
    main()
