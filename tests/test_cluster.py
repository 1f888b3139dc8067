"""movebench.cluster without a cluster: the plan's arithmetic and the parsing of Slurm's answers.

The same functions run against the live test cluster in test_slurm_campaign.py.
"""

import subprocess
import sys

import pytest
import yaml

from conftest import PYTHON, ROOT
from movebench import cluster, families, launchers

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
                             done=lambda name, p: p is points[0])
    assert [(j.points, j.nodes, j.time_limit_min, j.to_run) for j in jobs] == [(3, 1, 18, 2), (1, 1, 6, 1)]


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
