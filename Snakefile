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


rule all:
    input:
        f"{RESULTS}/report.html",


for rule_file in sorted(Path(workflow.basedir, "workflow", "rules").glob("*.smk")):
    # A family's rules need its config section: only the families the campaign runs are included.
    if rule_file.stem in GRID:

        include: rule_file


include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
