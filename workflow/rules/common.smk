# The grid of points, their paths, and what every point rule shares.
import shlex

from movebench import cluster
from movebench import family as families
from movebench.core import envinfo

CAMPAIGN = config["campaign"]
RESULTS = CAMPAIGN["results_dir"]
RAW = f"{RESULTS}/raw"
FAILED = f"{RESULTS}/failed"
LOGS = f"{RESULTS}/logs"
TABLES = f"{RESULTS}/tables"
GRID = campaign_config.grid(config, SCHEMAS)
CONFIG_HASH = envinfo.config_hash(config)
PACKAGE = Path(workflow.basedir) / "src" / "movebench"


wildcard_constraints:
    point=r"[^/~]+~[^/]+(/[^/~]+~[^/]+)*",


def point_paths(family):
    return [families.point_path(p) for p in GRID.get(family, [])]


def point_outputs(family, ext=".jsonl"):
    return [f"{RAW}/{family}/{p}{ext}" for p in point_paths(family)]


def _point(family, wildcards):
    return families.parse_point_path(wildcards.point)


def kernel_sources(family):
    """A point reruns when its kernel or the code that writes its records changes."""
    return [str(PACKAGE / f"{family}.py")] + [
        str(PACKAGE / name)
        for name in ("kernel.py", "launch.py", "core/records.py", "core/timing.py")
    ]


def point_params(family):
    fam = families.load(family)
    section = config.get(family, {})  # absent when the campaign leaves the family out
    return {
        "kernel_args": lambda w: shlex.join(
            fam.kernel_args(_point(family, w), section, CAMPAIGN)
        ),
        "failed": lambda w: f"{FAILED}/{family}/{w.point}.json",
        "repetitions": section.get("repetitions", CAMPAIGN["repetitions"]),
        "warmups": section.get("warmups", CAMPAIGN["warmups"]),
        "timeout": CAMPAIGN["timeout"],
        # The profile picks the MPI launcher with default-resources mpi=...; plain runs use mpiexec.
        "launcher": lambda w, resources: getattr(resources, "mpi", "mpiexec"),
    }


def point_resources(family):
    """Ranks and nodes from the point; runtime from the timeout; one benchmark at a time locally."""
    fam = families.load(family)
    section = config.get(family, {})  # absent when the campaign leaves the family out
    return {
        "tasks": lambda w: cluster.slurm_tasks(fam, _point(family, w)),
        "nodes": lambda w: fam.nodes(_point(family, w)),
        "mem_mb": lambda w: fam.memory_mb(_point(family, w), section),
        "runtime": cluster.runtime_minutes(CAMPAIGN),
        "benchmark_slots": 1,
    }


# The command every point rule runs.
LAUNCH = (
    "python -m movebench.launch --family {params.family} --point {wildcards.point:q}"
    " --ranks {resources.tasks} --nodes {resources.nodes} --launcher {params.launcher:q}"
    " --timeout {params.timeout} --repetitions {params.repetitions} --warmups {params.warmups}"
    " --kernel-args {params.kernel_args:q} --out {output.records} --meta {output.meta}"
    " --failed {params.failed:q} > {log} 2>&1"
)
# Set in the shell prefix, not in the command, because Snakemake reruns a job whose command
# text changed: jobs run the Python (and the mpich wheel's mpiexec) that runs snakemake,
# whatever its path is spelled like, and the config hash and campaign name go to each point's
# meta without a changed config rerunning points whose own parameters did not change.
shell.prefix(
    "set -euo pipefail; "
    f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"; '
    f"export MOVEBENCH_CONFIG_HASH={CONFIG_HASH}; "
    f"export MOVEBENCH_CAMPAIGN={shlex.quote(CAMPAIGN['name'])}; "
)
