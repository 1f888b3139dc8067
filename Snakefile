# movebench: validate the campaign config, then include one rule file per concern.
import sys

from snakemake.utils import min_version

min_version("9.0")

from movebench import config as campaign_config


configfile: "config/config.yaml"


SCHEMAS = Path(workflow.basedir) / "workflow" / "schemas"

try:
    config = campaign_config.validate(config, SCHEMAS)
except campaign_config.ConfigError as error:
    print(error.message(), file=sys.stderr)
    sys.exit(1)


report: "report/workflow.rst"


include: "workflow/rules/common.smk"


# Aggregation and the report are light: they run where snakemake runs, never as cluster jobs.
localrules:
    all,
    aggregate,
    report,


# One per point. Local profile: one benchmark at a time on this machine. Slurm profile: a limit per
# submitted job, so that points packed into one allocation (--group-components) are sized to run
# one after another in it (the largest point's nodes, the sum of their runtimes); jobs of their
# own still run side by side.
resource_scopes:
    benchmark_slots="local",


onstart:
    # Under the slurm executor: stop before the first sbatch if the cluster cannot run or track the jobs.
    if (
        workflow.executor_plugin is not None
        and workflow.executor_plugin.name == "slurm"
    ):
        from movebench import cluster

        points = [
            (job.rule.name.removesuffix("_point"), dict(job.resources))
            for job in workflow.dag.needrun_jobs()
            if job.rule.name.removesuffix("_point") in GRID
        ]
        problems = cluster.preflight(workflow.executor_settings, points)
        if problems:
            sys.exit(cluster.preflight_message(problems))


rule all:
    input:
        f"{RESULTS}/report.html",


for rule_file in sorted(Path(workflow.basedir, "workflow", "rules").glob("*.smk")):
    # A family's rules need its config section: only the families the campaign runs are included.
    if rule_file.stem in GRID:

        include: rule_file


include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
