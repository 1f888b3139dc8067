"""movebench.engine.cluster without a cluster: the plan's arithmetic and the parsing of Slurm's answers.

The same functions run against the live test cluster in test_slurm_campaign.py.
"""

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from conftest import PYTHON, ROOT
from movebench import families
from movebench.engine import cluster, launchers

CAMPAIGN = {"name": "t", "results_dir": "results", "repetitions": 3, "warmups": 1, "timeout": 300}


def test_runtime_is_the_timeout_in_whole_minutes_plus_one():
    assert [cluster.time_limit_minutes({"timeout": t}) for t in (1, 59, 60, 61, 300, 3600)] == [2, 2, 2, 3, 6, 61]


def test_tasks_are_ranks_for_mpi_and_at_least_two_for_dragon():
    kv = families.load("kv")
    section = {"tuples_per_rank": 1, "tuple_size": 8}
    point = {"pattern": "uni", "nodes": 2, "ranks": 4, "message_size": 4096, "window": 4}
    assert launchers.job_resources("shuffle", point, section)["tasks"] == 4
    assert launchers.job_resources("shuffle", point, section)["nodes"] == 2
    kv_section = {"total_mem": "64MiB", "mem_frac": 0.1, "max_keys": 50, "keys_per_client": None}
    point = {"operation": "put", "nodes": 1, "clients_per_node": 8, "managers_per_node": 1, "value_size": 1024}
    assert launchers.job_resources("kv", point, kv_section)["tasks"] == 2
    assert launchers.job_resources("kv", {**point, "nodes": 3}, kv_section)["tasks"] == 3
    assert set(kv.resources(point, kv_section)) == {"nodes", "mem_mb"}  # the tasks are the runtime's to count
    # one process (calibration's fio probe): still 2, which the executor needs of a job with the `mpi` resource
    calibration = families.load("calibration")
    fio = {"probe": "fio", "pattern": "sfsw", "ranks": 2, "size_per_proc": 2**20}
    assert calibration.placement(fio)[0] == 1 and launchers.job_resources("calibration", fio, {})["tasks"] == 2


def test_plan_one_job_per_point():
    fam = families.load("shuffle")
    grid = {"shuffle": [{"nodes": 1, "ranks": 2}, {"nodes": 2, "ranks": 2}, {"nodes": 2, "ranks": 4}]}
    jobs = cluster.plan_jobs(grid, {"shuffle": fam}, CAMPAIGN)
    assert [(j.points, j.nodes, j.time_limit_min) for j in jobs] == [(1, 1, 6), (1, 2, 6), (1, 2, 6)]
    assert sum(j.node_hours for j in jobs) == pytest.approx((1 + 2 + 2) * 6 / 60)


def test_plan_packed_points_run_one_after_another_in_the_largest_points_allocation():
    fam = families.load("shuffle")
    grid = {"shuffle": [{"nodes": n, "ranks": 2} for n in (1, 2, 1, 2, 1)]}
    jobs = cluster.plan_jobs(grid, {"shuffle": fam}, CAMPAIGN, group_components={"shuffle": 3},
                             resources={"benchmark_slots": 1})  # fmt: skip
    assert [(j.points, j.nodes, j.time_limit_min) for j in jobs] == [(3, 2, 18), (2, 2, 12)]
    # Without a per-job limit Snakemake puts the group's points side by side: nodes add up.
    side_by_side = cluster.plan_jobs(grid, {"shuffle": fam}, CAMPAIGN, group_components={"shuffle": 3})
    assert [(j.nodes, j.time_limit_min) for j in side_by_side] == [(4, 6), (3, 6)]


def test_plan_makes_each_launch_group_one_job_of_its_members_runtimes():
    fam = families.load("kv")
    points = [{"operation": op, "nodes": 1, "clients_per_node": 2, "value_size": size}
              for op in ("put", "get") for size in (1024, 4096)]
    jobs = cluster.plan_jobs({"kv": points}, {"kv": fam}, CAMPAIGN, launch_groups={"kv": [points[:3], points[3:]]},
                             done=lambda name, p: p is points[0], planned=lambda name, p: 45.0)
    # the group of the 2 points still to run: one point's 6 min + 2 x 90 s planned; a group of one is a point
    assert [(j.points, j.nodes, j.time_limit_min, j.to_run) for j in jobs] == [(3, 1, 9, 2), (1, 1, 6, 1)]
    assert "a launch group's limit: 2 x its members' planned seconds + one point's limit = 6-9 min here" in \
        cluster.format_plan(jobs, CAMPAIGN)


def test_a_launch_groups_limit_follows_its_members_planned_seconds():
    one = cluster.time_limit_minutes(CAMPAIGN)  # 6 min for campaign.timeout 300 s
    assert cluster.group_time_limit_minutes(CAMPAIGN, [10.0]) == one
    assert cluster.group_time_limit_minutes(CAMPAIGN, [10.0] * 3) == one + 1  # 2 x 30 s
    assert cluster.group_time_limit_minutes(CAMPAIGN, [10.0] * 48) == one + 16  # not 48 x 6 min
    # never beyond the members' own limits added up
    assert cluster.group_time_limit_minutes(CAMPAIGN, [3600.0] * 4) == 4 * one


def test_a_points_planned_seconds_are_its_warmups_and_repetitions():
    shuffle, bcast = families.load("shuffle"), families.load("bcast")
    timed = shuffle.task({"pattern": "uni"}, {"repetition_time": 0.5}, repetitions=4, warmups=2)
    assert shuffle.planned_seconds(timed) == pytest.approx(5.0 + 6 * 0.5)
    untimed = bcast.task({"method": "pickle"}, {}, repetitions={"min": 3, "max": 10, "ci_target": 0.05}, warmups=1)
    assert bcast.planned_seconds(untimed) == pytest.approx(5.0 + 11 * 1.0)
    capped = bcast.task({"method": "pickle"}, {}, repetitions={"min": 3, "max": 50, "max_seconds": 20}, warmups=1)
    assert bcast.planned_seconds(capped) == pytest.approx(5.0 + 1.0 + 20)


def test_a_group_jobs_runtime_resource_follows_its_members(tmp_path):
    """The runtime Snakemake gives a launch group's job (what the Slurm executor asks with -t) grows with its members,
    from one point's limit, and stays far below campaign.timeout times the members."""
    from conftest import snakemake

    def group_runtimes(sizes):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({
            "campaign": {"name": "limits", "results_dir": "results", "launches": 1, "repetitions": 3, "warmups": 1,
                         "timeout": 300},
            "bcast": {"kinds": ["dense"], "methods": ["pickle", "buffer"], "shapes": sizes, "ranks": [2],
                      "launch_groups": True}}))
        dry = snakemake(tmp_path, "--dry-run").stdout
        return [int(m) for m in re.findall(r"rule bcast_group_\w+:\n(?:.*\n)*?\s+resources: .*runtime=(\d+)", dry)]

    assert group_runtimes([[8, 8]]) == [6 + 1]  # 2 members x 9 s planned x 2: one point's 6 min + 1
    (many,) = group_runtimes([[8, 8], [16, 16], [32, 32], [64, 64], [100, 100], [128, 128]])
    assert many == 6 + 4 < 12 * 6  # 12 members x 9 s x 2 = 216 s: 4 min


def test_plan_skips_points_with_records():
    fam = families.load("shuffle")
    grid = {"shuffle": [{"nodes": 1, "ranks": 2}, {"nodes": 2, "ranks": 2}]}
    jobs = cluster.plan_jobs(grid, {"shuffle": fam}, CAMPAIGN, done=lambda name, p: p["nodes"] == 1)
    assert [j.to_run for j in jobs] == [0, 1]
    assert "still to run: 1 jobs, 0.20 node-hours" in cluster.format_plan(jobs, CAMPAIGN)


def test_plan_command_reads_the_profile_and_the_flags(tmp_path):
    shuffle = {"patterns": ["uni"], "ranks": [2], "nodes": [1, 2], "message_sizes": ["4KiB", "8KiB"], "windows": [4]}
    config = {"campaign": {**CAMPAIGN, "launches": 1}, "shuffle": shuffle}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    profile = tmp_path / "site"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({"set-resources": {"shuffle_point": {"runtime": 30}}}))

    def plan(*args):
        proc = subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(tmp_path / "config.yaml"), "plan", *args],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return next(line.split() for line in proc.stdout.splitlines() if line.startswith("total")), proc.stdout

    total, text = plan()  # profiles/slurm, found in the repository
    assert total[1:4] == ["4", "4", "2"] and float(total[5]) == pytest.approx((1 + 2 + 1 + 2) * 6 / 60, abs=0.01)
    total, _ = plan("--profile", str(profile))  # its runtime for the point rule
    assert float(total[5]) == pytest.approx((1 + 2 + 1 + 2) * 30 / 60, abs=0.01)
    total, text = plan("--group-components", "shuffle=4")  # with profiles/slurm's benchmark_slots=1
    assert total[1:4] == ["4", "1", "2"] and float(total[5]) == pytest.approx(2 * 24 / 60, abs=0.01)
    assert "shuffle=4 points per job" in text
    config["campaign"]["launches"] = 3  # each launch is a job of its own: three times the jobs and node-hours
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    total, text = plan()
    assert total[1:4] == ["12", "12", "2"] and float(total[5]) == pytest.approx(3 * (1 + 2 + 1 + 2) * 6 / 60, abs=0.01)
    assert "launches per point shuffle 3" in text


def test_make_plan_runs():
    # -o: never (re)install the venv from a test, whatever the timestamps say.
    installed = f"{sys.prefix}/.installed"
    proc = subprocess.run(["make", "-s", "-o", installed, "plan", f"VENV={sys.prefix}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "node-hours" in proc.stdout and "total" in proc.stdout


SCONTROL_PARTITIONS = (
    "PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=2 MaxTime=UNLIMITED Nodes=n[1-2] TotalCPUs=4 "
    "TotalNodes=2\n"
    "PartitionName=short Default=NO MaxNodes=UNLIMITED MaxTime=00:30:00 Nodes=n[1-8] TotalNodes=8\n"
)


def test_parsers_of_slurms_answers():
    parts = cluster.partitions(SCONTROL_PARTITIONS)
    assert parts["debug"]["TotalNodes"] == "2" and parts["short"]["MaxTime"] == "00:30:00"
    assert cluster.min_job_age_s("MaxStepCount = 40000\nMinJobAge               = 300 sec\n") == 300
    assert [cluster.slurm_minutes(t) for t in ("UNLIMITED", "45", "1:30", "02:00:00", "1-00:00:00")] == [
        None, 45, 1.5, 120, 1440]  # fmt: skip


@pytest.mark.parametrize(
    ("asked", "min_age", "sacct", "expected"),
    [
        (None, 300, True, "sacct"),  # the plugin's default where sacct is installed
        ("squeue", 3600, True, "squeue"),
        ("squeue", 100, True, "sacct"),  # the plugin falls back: MinJobAge < 3 x 40 s
        ("sacct", 300, False, "squeue"),  # not installed
    ],
)
def test_the_status_command_the_plugin_will_really_use(asked, min_age, sacct, expected):
    assert cluster.effective_status_command(asked, 40, min_age, sacct) == expected


def test_under_slurm_the_shipped_campaign_leaves_out_its_blob_points_with_one_line(monkeypatch):
    from movebench import campaign
    from movebench.engine import plan
    from movebench.families.io import AZURITE_ENV

    monkeypatch.delenv(AZURITE_ENV, raising=False)
    config = campaign.validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    grid = plan.grid(config)
    assert campaign.leave_out_unreachable(config, grid, "local") == (grid, [])
    kept, lines = campaign.leave_out_unreachable(config, grid, "slurm")
    blob = [p for p in grid["io"] if p["backend"] == "blob"]
    assert blob and kept["io"] == [p for p in grid["io"] if p["backend"] != "blob"]
    assert {f: points for f, points in kept.items() if f != "io"} == {f: p for f, p in grid.items() if f != "io"}
    (line,) = lines
    assert f"io: {len(blob)} points left out under Slurm" in line and "--profile local" in line
    # an Azurite the nodes reach, given by the user: nothing to leave out
    monkeypatch.setenv(AZURITE_ENV, "DefaultEndpointsProtocol=http;AccountName=x;AccountKey=eA==;BlobEndpoint=http://h:1/x")
    assert campaign.leave_out_unreachable(config, grid, "slurm") == (grid, [])


def test_the_executor_is_read_from_the_profiles_default_resources():
    from movebench import campaign

    profiles = {name: yaml.safe_load((ROOT / "profiles" / name / "config.yaml").read_text())
                for name in ("local", "slurm", "allocation")}
    defaults = {name: dict(item.split("=", 1) for item in p["default-resources"]) for name, p in profiles.items()}
    assert {name: campaign.executor_of({k: v.strip('"') for k, v in d.items()}) for name, d in defaults.items()} == {
        "local": "local", "slurm": "slurm", "allocation": "allocation"}


def test_plan_under_the_slurm_profile_says_the_blob_points_left_out_and_both_limits():
    proc = subprocess.run([PYTHON, "-m", "movebench", "plan"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("left out under Slurm") == 1 and "backend~blob" in proc.stderr
    assert "a point's limit is campaign.timeout = 300 s -> 6 min" in proc.stdout
    assert re.search(r"a launch group's limit: .* = \d+-\d+ min here", proc.stdout)


def test_the_slurm_executor_polls_at_least_as_often_as_the_profile_says(monkeypatch):
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    # the class attribute as the plugin has it, put back after the test
    monkeypatch.setattr(plugin.Executor, "next_seconds_between_status_checks",
                        plugin.Executor.next_seconds_between_status_checks)
    settings = SimpleNamespace(seconds_between_status_checks=5)
    executor = SimpleNamespace(_next_seconds_between_status_checks=None,
                               workflow=SimpleNamespace(remote_execution_settings=settings))

    def polls_after(value):  # what the plugin asks after a poll in which no job finished: its last wait + 10 s
        plugin.Executor.next_seconds_between_status_checks.fset(executor, value)
        return executor._next_seconds_between_status_checks

    assert polls_after(32) == 32  # the plugin as it comes: 2, 12, 22, 32 ... up to 180 s
    assert cluster.cap_status_polls() and not cluster.cap_status_polls()  # once is enough
    assert polls_after(32) == 5 and polls_after(2) == 2 and polls_after(None) is None
    settings.seconds_between_status_checks = 12  # read when set: a Snakefile is read before the settings exist
    assert polls_after(32) == 12
