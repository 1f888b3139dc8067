"""Snakemake's scheduler stays off the benchmark's CPUs (docs/architecture.md, "The scheduler"): the
workflow's onstart drops its default job rate limit, whose timers kept it selecting jobs all run long,
and every profile selects greedily. A real run records the limit it ran with: tests/test_launches.py."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake.settings.types import MaxJobsPerTimespan

from movebench import campaign

ROOT = Path(__file__).resolve().parents[1]
# The profiles a user names with --profile; slurm-testcluster is a workflow profile applied over slurm.
PROFILES = ["allocation", "local", "slurm"]


def scheduler_with(limit: str):
    from snakemake.scheduling.job_scheduler import JobRateLimiter

    return SimpleNamespace(job_rate_limiter=JobRateLimiter(MaxJobsPerTimespan.parse_choice(limit)))


def test_snakemakes_default_limit_is_dropped():
    scheduler = scheduler_with("100/1s")
    assert campaign.drop_default_rate_limit(scheduler) is None
    assert scheduler.job_rate_limiter is None


@pytest.mark.parametrize("given, kept", [("10/1s", "10/1s"), ("100/1m", "100/60s"), ("50/10s", "50/10s")])
def test_a_limit_the_user_set_is_kept(given, kept):
    scheduler = scheduler_with(given)
    limiter = scheduler.job_rate_limiter
    assert campaign.drop_default_rate_limit(scheduler) == kept
    assert scheduler.job_rate_limiter is limiter


def test_no_scheduler_no_limit():
    """A dry run builds no limiter (and a Snakemake without the attribute is left alone)."""
    assert campaign.drop_default_rate_limit(SimpleNamespace(job_rate_limiter=None)) is None
    assert campaign.drop_default_rate_limit(None) is None


def test_snakemakes_default_is_what_we_drop():
    """If Snakemake changes its default, the Snakefile would silently keep the new one: notice it."""
    from snakemake.cli import get_argument_parser

    args = get_argument_parser().parse_args([])
    assert (args.max_jobs_per_timespan.max_jobs, args.max_jobs_per_timespan.timespan) == (100, 1)


def test_every_profile_is_checked():
    shipped = {p.parent.name for p in (ROOT / "profiles").glob("*/config.yaml")}
    assert shipped == {*PROFILES, "slurm-testcluster"}


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_select_greedily(profile):
    settings = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
    assert settings["scheduler"] == "greedy"
    assert "max-jobs-per-timespan" not in settings
