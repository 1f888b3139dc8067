# The self-contained HTML report, from the tables alone (and, when the campaign names them, an earlier
# campaign's tables to compare with and a references file).
from movebench.judging import report_verdicts

VERDICT_INPUTS = report_verdicts.inputs(config)


rule report:
    input:
        summaries=expand(f"{TABLES}/{{family}}_summary.csv", family=GRID),
        parquet=expand(f"{TABLES}/{{family}}.parquet", family=GRID),
        points=expand(f"{TABLES}/{{family}}_points.csv", family=GRID),
        compare_to=VERDICT_INPUTS["compare_to"],
        references=VERDICT_INPUTS["references"],
        templates=[str(p) for p in Path(PACKAGE, "templates").glob("*.j2")]
        + [str(families.folder(f) / "report.html.j2") for f in GRID],
        # every module the report imports, read from the source: an edit to any of them reruns the report
        code=[str(path) for path in campaign.report_sources(GRID)],
    output:
        report(
            str(LAYOUT.report),
            category="Report",
            caption="../../report/report.rst",
        ),
    log:
        f"{LOGS}/report.log",
    conda:
        "../envs/report.yaml"
    # a point measuring on this machine would share its cores with this job (the local profile has one slot)
    resources:
        benchmark_slots=1,
    params:
        config=config,
        families=list(GRID),
    script:
        "../../scripts/report.py"
