# movebench: validate the campaign config, then include the rules: one point rule per family
# (generated from the family's spec), the tables, the report.
import sys
import warnings

from snakemake.utils import min_version

min_version("9.0")

from movebench import campaign
from movebench.engine import config as campaign_config

# No `configfile:` here: the profiles name config/config.yaml, so that `--configfile my.yaml`
# makes my.yaml the whole campaign instead of being merged into the default one.
if not config:
    sys.exit(
        "movebench: no campaign config. Run with a profile, which names config/config.yaml "
        "(snakemake --profile local), or name one: --configfile path/to/campaign.yaml"
    )

try:
    # Snakemake read the files already (before this Snakefile); what its loader lets through, e.g.
    # a key given twice, is refused here with the file and line.
    campaign_config.recheck_files(workflow.overwrite_configfiles)
    config = campaign.validate(config)
except campaign_config.ConfigFileError as error:
    sys.exit(f"movebench: {error}")
except campaign_config.ConfigError as error:
    print(error.message(), file=sys.stderr)
    sys.exit(1)


# Snakemake 9 leaves a coroutine unawaited while it fills the default disk resources of a dry run and
# prints two lines about it on every `-n` (snakemake/snakemake#4280, harmless); keep them off the plan.
warnings.filterwarnings("ignore", message="coroutine 'InputFiles._predicated_size_files", category=RuntimeWarning)


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
    campaign_started()


onsuccess:
    campaign_ended(ok=True)


onerror:
    campaign_ended(ok=False)


rule all:
    input:
        f"{RESULTS}/report.html",


include: "workflow/rules/points.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
