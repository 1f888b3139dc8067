"""The report's ratios (reportkit.ratio) are at the level the campaign replicated: the launch.

Synthetic campaigns with two variance components, a launch's and a repetition's, on the log scale: the ratio of
two points' figures must cover the true ratio at the nominal 95%, whether the two points were launched apart
(each launch its own job) or together (a launch group: both measured in every launch, sharing its effect).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from movebench.core.tables import LAUNCH_JOB
from movebench.core.verdict import compare_samples
from movebench.engine.aggregate import launch_job
from movebench.reportkit import ratio, ratio_text

POINTS, LAUNCHES, REPS = 12, 3, 10
SD_LAUNCH, SD_SHARED, SD_REP = 0.15, 0.2, 0.05
CAMPAIGNS = 800
NUMERATOR, DENOMINATOR = 4, 1  # the points' true bandwidths are (i + 1) GB/s: a true ratio of 2.5


def campaign(rng, grouped: bool, launches: int = LAUNCHES) -> pd.DataFrame:
    """One family's records: POINTS points x `launches` launches x REPS repetitions of `bandwidth_Bps`. A launch
    moves its point by SD_LAUNCH (log scale); `grouped`: the points are a launch group's members, so launch k of
    every point is one job, whose shared effect (SD_SHARED) moves them all alike."""
    centres = np.log((np.arange(POINTS) + 1) * 1e9)[:, None] + rng.normal(0, SD_LAUNCH, (POINTS, launches))
    if grouped:
        centres = centres + rng.normal(0, SD_SHARED, launches)[None, :]
    values = np.exp(centres[:, :, None] + rng.normal(0, SD_REP, (POINTS, launches, REPS)))
    point, launch, rep = np.meshgrid(np.arange(POINTS), np.arange(launches), np.arange(REPS), indexing="ij")
    table = pd.DataFrame({"family": "synthetic", "point": [f"i~{i}" for i in point.ravel()],
                          "launch": launch.ravel(), "rep": rep.ravel(), "warmup": False, "ok": True,
                          "bandwidth_Bps": values.ravel()})
    # as aggregate writes it from the members' metas: the group's name and the job's start
    table[LAUNCH_JOB] = [f"ranks~2/launch~{k}@{1000.0 + k}" for k in table["launch"]] if grouped else None
    return table


def coverage(grouped: bool, seed: int) -> tuple[float, float, set]:
    """(share of CAMPAIGNS whose ratio CI holds the true ratio, the same for the pooled repetitions' Hodges-Lehmann
    interval the report used to print, how the ratios were computed)."""
    rng = np.random.default_rng(seed)
    true = (NUMERATOR + 1) / (DENOMINATOR + 1)
    covered = pooled = 0
    kinds = set()
    for _ in range(CAMPAIGNS):
        table = campaign(rng, grouped)
        result = ratio(table, f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
        covered += result.ci_low <= true <= result.ci_high
        kinds.add((result.unit, result.paired, result.launches_base, result.launches_new))
        old = compare_samples(table.loc[table["point"] == f"i~{DENOMINATOR}", "bandwidth_Bps"],
                              table.loc[table["point"] == f"i~{NUMERATOR}", "bandwidth_Bps"])
        pooled += old.ci_low <= true <= old.ci_high
    return covered / CAMPAIGNS, pooled / CAMPAIGNS, kinds


@pytest.mark.parametrize("grouped", [False, True], ids=["launched apart", "launch group"])
def test_the_ratio_covers_the_true_ratio_at_the_nominal_rate(grouped):
    covered, pooled, kinds = coverage(grouped, seed=4103 + grouped)
    print(f"{'launch group' if grouped else 'launched apart'}: coverage {covered:.3f}, "
          f"pooled repetitions' Hodges-Lehmann {pooled:.3f}, of {CAMPAIGNS}")
    # paired exactly when the two points shared their launches; every launch counted
    assert kinds == {("launches", grouped, LAUNCHES, LAUNCHES)}
    # 800 campaigns: a binomial's sd at 95% is 0.8 points, so 3 points either side is ~4 sd
    assert abs(covered - 0.95) <= 0.03
    # the data's launch component is real: treating repetitions as independent misses the true ratio often
    assert pooled < 0.8


def test_launches_measured_apart_from_the_partner_are_left_out_of_a_paired_ratio():
    rng = np.random.default_rng(7)
    table = campaign(rng, grouped=True, launches=4)
    # launch 3 of the numerator was measured again on its own (a failed member's rerun): a start of its own
    again = (table["point"] == f"i~{NUMERATOR}") & (table["launch"] == 3)
    table.loc[again, LAUNCH_JOB] = "ranks~2/launch~3@2000.0"
    result = ratio(table, f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    assert result.paired and result.launches_base == result.launches_new == 3
    # tables written before the column existed: every launch, unpaired
    old = ratio(table.drop(columns=[LAUNCH_JOB]), f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    assert not old.paired and old.launches_base == old.launches_new == 4


def test_a_one_launch_ratio_says_its_interval_is_of_the_repetitions():
    rng = np.random.default_rng(8)
    table = campaign(rng, grouped=False, launches=1)
    result = ratio(table, f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    assert result.unit == "repetitions" and result.ci_low < result.ratio < result.ci_high
    assert ratio_text(result).endswith("(one launch: the CI spans its repetitions, not a relaunch)")
    launched = ratio(campaign(rng, grouped=False), f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    assert "launch" not in ratio_text(launched) and math.isclose(launched.ratio, 2.5, rel_tol=0.5)
    assert ratio(table, f"i~{NUMERATOR}", "i~99", "bandwidth_Bps") is None


def test_a_launch_job_is_its_group_and_start():
    meta = {"launch_start": 1700000000.25, "launch_group": {"name": "nodes~1/ranks~2/launch~0", "size": 3}}
    assert launch_job(meta) == "nodes~1/ranks~2/launch~0@1700000000.25"
    assert launch_job({"launch_start": 1700000000.25}) is None  # a point launched on its own
    assert launch_job({}) is None  # no meta


def test_what_a_launch_group_shares_cancels_in_its_members_ratio():
    rng = np.random.default_rng(9)
    table = campaign(rng, grouped=True)
    # each job moves every member alike, by a factor of 1, 3 and 9: the per-launch ratios do not see it
    table["bandwidth_Bps"] *= table["launch"].map({0: 1.0, 1: 3.0, 2: 9.0})
    paired = ratio(table, f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    apart = ratio(table.drop(columns=[LAUNCH_JOB]), f"i~{NUMERATOR}", f"i~{DENOMINATOR}", "bandwidth_Bps")
    assert paired.paired and not apart.paired
    assert paired.ci_low <= 2.5 <= paired.ci_high
    assert paired.ci_high / paired.ci_low < apart.ci_high / apart.ci_low / 2
