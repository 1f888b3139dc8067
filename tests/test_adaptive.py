"""The adaptive stop rule on synthetic timings: a fake clock, seeded noise, no MPI."""

import numpy as np
import pytest

from movebench.core.adaptive import AdaptiveRepetitions, Decision, RepetitionPolicy, decide, relative_half_width


class FakeClock:
    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def run(policy, timings, warmups=2, clock=None, agree=None):
    """Drive AdaptiveRepetitions as a kernel would: one value per counted repetition, from `timings`."""
    reps = AdaptiveRepetitions(policy, warmups, clock=clock or FakeClock(0.01), agree=agree)
    seen = []
    it = iter(timings)
    for rep, warmup in reps:
        seen.append((rep, warmup))
        if not warmup:
            reps.add(next(it))
    return reps.decision, seen


def noisy(rel_sd, n=1000, seed=1):
    return list(1.0 + rel_sd * np.random.default_rng(seed).standard_normal(n))


def test_tight_noise_stops_at_min():
    decision, seen = run(RepetitionPolicy(min=6, max=50, ci_target=0.05), noisy(0.001))
    assert decision.stop and decision.reason == "ci_target" and decision.n == 6
    assert seen[:2] == [(0, True), (1, True)] and [r for r, w in seen if not w] == list(range(6))
    assert decision.ci_half_width <= 0.05
    lo, hi = decision.ci_low, decision.ci_high
    assert lo <= decision.median <= hi


def test_wide_noise_hits_max():
    decision, _ = run(RepetitionPolicy(min=6, max=50, ci_target=0.05), noisy(0.8))
    assert decision.reason == "max_repetitions" and decision.n == 50
    assert decision.ci_half_width > 0.05


def test_moderate_noise_stops_between_min_and_max():
    # 10% noise: the CI's half-width falls under 5% of the median after a few dozen repetitions
    decision, _ = run(RepetitionPolicy(min=6, max=200, ci_target=0.05), noisy(0.1, seed=3))
    assert decision.reason == "ci_target" and 6 < decision.n < 200


def test_time_budget_stops_it():
    # each repetition takes 1 s of wall time; 5.5 s budget: the sixth would overrun it
    decision, _ = run(RepetitionPolicy(min=6, max=50, ci_target=0.05, max_seconds=5.5), noisy(0.8),
                      clock=FakeClock(1.0))
    assert decision.reason == "max_seconds" and decision.n == 5


def test_fixed_count():
    policy = RepetitionPolicy.from_config(5)
    assert policy.fixed
    decision, seen = run(policy, noisy(0.8))
    assert decision.reason == "fixed" and decision.n == 5 and len(seen) == 7


def test_decide_without_values_goes_on():
    assert not decide([], RepetitionPolicy()).stop


def test_half_width_is_the_order_statistics_of_the_median_ci():
    values = [float(v) for v in range(1, 11)]  # n = 10: x_(2) and x_(9), 1-based
    median, lo, hi, width, covers = relative_half_width(values)
    assert (median, lo, hi, covers) == (5.5, 2.0, 9.0, True) and width == pytest.approx(3.5 / 5.5)


def test_ties_below_six_repetitions_never_meet_the_target():
    # two repetitions that tie at the timer's resolution: a range of zero, but an interval that covers <95%
    assert relative_half_width([1e-5, 1e-5])[3:] == (0.0, False)
    policy = RepetitionPolicy(min=2, max=3, ci_target=1e-9)
    assert not decide([1e-5, 1e-5], policy).stop
    assert decide([1e-5, 1e-5, 1e-5], policy).reason == "max_repetitions"
    assert decide([1e-5] * 6, RepetitionPolicy(min=2, max=9, ci_target=1e-9)).reason == "ci_target"


def test_agree_makes_every_rank_take_rank_zeros_decision():
    # a rank whose own values would go on stops when the agreed decision (rank 0's) says stop
    stop_now = Decision(True, "max_seconds", 1, 1.0, 1.0, 1.0, 0.0)
    decision, seen = run(RepetitionPolicy(min=6, max=50), noisy(0.8), agree=lambda d: stop_now)
    assert decision is stop_now and [r for r, w in seen if not w] == [0]


def test_missing_value_is_an_error():
    reps = AdaptiveRepetitions(RepetitionPolicy(), 0)
    with pytest.raises(RuntimeError, match="one value per counted repetition"):
        for _ in reps:
            pass


@pytest.mark.parametrize("config, message", [
    ({"min": 0}, "1 <= min <= max"),
    ({"min": 10, "max": 5}, "1 <= min <= max"),
    ({"ci_target": 0}, "ci_target = 0"),
    ({"ci_target": 1.5}, "ci_target = 1.5"),
    ({"max_seconds": -1}, "max_seconds = -1"),
    (True, "a count such as 5"),
])
def test_bad_policies_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        RepetitionPolicy.from_config(config)


def test_record_fields():
    decision, _ = run(RepetitionPolicy(min=6, max=50, ci_target=0.05), noisy(0.001))
    fields = decision.record_fields()
    assert fields["stop_reason"] == "ci_target" and fields["repetitions_run"] == 6
    assert 0 <= fields["ci_half_width_rel"] <= 0.05
