# The grid of points, their tasks, what every point rule shares, and the run's start and end.
import json
import os
import sys

from movebench import campaign, families
from movebench.engine import cluster, launchers, plan
from movebench.core.layout import ResultsLayout
from movebench.engine.launchers.process import blocked_start

CAMPAIGN = config["campaign"]
RESULTS = CAMPAIGN["results_dir"]
# where each file of the run lives (core.layout); Snakemake takes the folders as relative strings
LAYOUT = ResultsLayout(Path(RESULTS))
RAW, FAILED, LOGS, TABLES, KEPT = (
    str(p) for p in (LAYOUT.raw, LAYOUT.failed, LAYOUT.logs, LAYOUT.tables, LAYOUT.kept)
)
# Under Slurm, points that need a service on the submit host's 127.0.0.1 (io's blob points) are left out, one line
# each family; a cluster job reads this file again and must find the same grid.
GRID, LEFT_OUT = campaign.leave_out_unreachable(
    config, plan.grid(config), campaign.executor_of(campaign.default_resources(workflow))
)
for line in LEFT_OUT:
    print(line, file=sys.stderr)
# The Slurm executor polls job states at the profile's interval, not ever more slowly (engine.cluster).
cluster.cap_status_polls()
# Family -> launch path -> the launch's task (the point, the kernel's settings, repetitions, launch, ...).
TASKS = plan.tasks(config, GRID)
# Family -> its launch groups (families whose points share launches: launch_groups), formed from the launches
# still to measure only: a job's outputs are deleted before it runs, so measured ones are in no job.
SOURCES = {family: campaign.sources_digest(family) for family in GRID}
MEASURED = campaign.measured_launches(
    config, TASKS, {f: SOURCES[f] for f in GRID if config[f].get("launch_groups")}
)
LAUNCH_GROUPS = plan.launch_groups(config, TASKS, MEASURED)
# The launches' order: round by round, shuffled within a round (the seed is recorded with the run).
LAUNCH_ORDER_SEED = campaign.launch_order_seed(CAMPAIGN)
LAUNCH_ORDER = plan.launch_order(TASKS, LAUNCH_ORDER_SEED, LAUNCH_GROUPS)
PRIORITY = plan.priorities(LAUNCH_ORDER)
PACKAGE = Path(workflow.basedir) / "src" / "movebench"

# Jobs run the Python (and the mpich wheel's mpiexec) that runs snakemake, whatever PATH the user
# has; a conda environment (--sdm conda) is activated in the job's shell, in front of this. The
# config hash and campaign name go to each point's meta without a changed config rerunning points.
os.environ.update(campaign.job_environment(config, LAUNCH_ORDER_SEED))


wildcard_constraints:
    point_path=r"[^/~]+~[^/]+(/[^/~]+~[^/]+)*",


def point_outputs(family, ext=".jsonl"):
    return [f"{RAW}/{family}/{path}{ext}" for path in TASKS.get(family, {})]


def kernel_sources(family):
    """A point reruns when its kernel or the shared code that runs it and writes its records changes."""
    return campaign.kernel_sources(family)


def point_params(family):
    return {
        "task": lambda w: json.dumps(
            campaign.task_of(TASKS, family, w.point_path).to_dict()
        ),
        "failed": lambda w: f"{FAILED}/{family}/{w.point_path}.json",
        "kept": KEPT,
        "timeout": CAMPAIGN["timeout"],
        # The profile picks the MPI launcher with default-resources mpi=...; plain runs use mpiexec.
        "launcher": lambda w, resources: getattr(resources, "mpi", "mpiexec"),
    }


def point_priority(family):
    """The launch's place in LAUNCH_ORDER as a priority (higher runs first)."""
    return lambda w: PRIORITY[family][w.point_path]


def point_resources(family):
    """Tasks from the family's runtime, nodes and memory from its spec; runtime (Snakemake's time limit) from the
    timeout; one benchmark at a time."""
    section = config[family]

    def resource(key):
        return lambda w: launchers.job_resources(
            family, campaign.task_of(TASKS, family, w.point_path).point, section
        )[key]

    return {
        "tasks": resource("tasks"),
        "nodes": resource("nodes"),
        "mem_mb": resource("mem_mb"),
        "runtime": campaign.time_limit_minutes(CAMPAIGN),
        "benchmark_slots": 1,
    }


def group_rule_name(group):
    return f"{group.family}_group_{group.rule_suffix}"


def group_outputs(group, ext):
    return [f"{RAW}/{group.family}/{path}{ext}" for path in group.members]


def group_params(group):
    tasks = [
        campaign.task_of(TASKS, group.family, path).to_dict() for path in group.members
    ]
    return {
        "tasks": json.dumps({"group": tasks, "name": group.name}),
        "failed": FAILED,
        "kept": KEPT,
        # each member's own: launch stops the group when one member runs past it (counted from the previous
        # member's finish); the job's Slurm limit (group_resources) is the allocation's, apart from it
        "timeout": CAMPAIGN["timeout"],
        "launcher": lambda w, resources: getattr(resources, "mpi", "mpiexec"),
        "sources": SOURCES[group.family],
    }


def group_resources(group):
    """The members' largest need: they share ranks and nodes (the family's launch group axes)."""
    section = config[group.family]
    needs = [
        launchers.job_resources(
            group.family, campaign.task_of(TASKS, group.family, p).point, section
        )
        for p in group.members
    ]
    return {
        "tasks": max(n["tasks"] for n in needs),
        "nodes": max(n["nodes"] for n in needs),
        "mem_mb": max(n["mem_mb"] for n in needs),
        "runtime": campaign.group_time_limit_minutes(
            CAMPAIGN, [campaign.task_of(TASKS, group.family, p) for p in group.members]
        ),
        "benchmark_slots": 1,
    }


# Started with Ctrl-C and SIGTERM held back until launch's handlers are in place (launchers.process.blocked_start).
START_LAUNCH = " ".join([*blocked_start(), "python -m movebench.engine.launch"])

# The command every point rule runs; quoted, so that a results_dir with spaces stays one word. launch
# writes the log itself and keeps stderr for a failure's one line, which the console shows even when
# the log's disk is full (docs/notes/hardening.md).
LAUNCH = (
    START_LAUNCH + " --task {params.task:q} --launcher {params.launcher:q}"
    " --timeout {params.timeout} --out {output.records:q} --meta {output.meta:q}"
    " --failed {params.failed:q} --kept {params.kept:q} --log {log:q}"
)

# A launch group's job: its members' tasks; each member's records, meta and failure record at its own path.
GROUP_LAUNCH = (
    START_LAUNCH + " --group {params.tasks:q} --launcher {params.launcher:q}"
    " --timeout {params.timeout} --records {output.records:q} --metas {output.meta:q}"
    " --failed {params.failed:q} --kept {params.kept:q} --sources {params.sources} --log {log:q}"
)

GROUP_RULES = {group_rule_name(group): group for family in LAUNCH_GROUPS for group in LAUNCH_GROUPS[family]}
CAMPAIGN_RUN = campaign.CampaignRun(
    config, GRID, TASKS, LAUNCH_ORDER, LAUNCH_ORDER_SEED, GROUP_RULES
)
CAMPAIGN_RUN.watch(workflow)


def campaign_started():
    """Before the first job: Slurm's preflight, and the services the points about to run need."""
    CAMPAIGN_RUN.start(workflow)


def campaign_ended(ok):
    """Services stopped, the run's wall time kept; after a failure, the partial report."""
    CAMPAIGN_RUN.end(ok)
