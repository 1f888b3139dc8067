# The self-contained HTML report, from the tables alone.


rule report:
    input:
        summaries=expand(f"{TABLES}/{{family}}_summary.csv", family=GRID),
        parquet=expand(f"{TABLES}/{{family}}.parquet", family=GRID),
        points=expand(f"{TABLES}/{{family}}_points.csv", family=GRID),
        templates=[str(p) for p in Path(workflow.basedir, "report").glob("*.j2")]
        + [str(families.folder(f) / "report.html.j2") for f in GRID],
        code=[str(PACKAGE / "report.py")]
        + [str(families.folder(f) / "report.py") for f in GRID],
    output:
        report(
            f"{RESULTS}/report.html",
            category="Report",
            caption="../../report/report.rst",
        ),
    log:
        f"{LOGS}/report.log",
    conda:
        "../envs/report.yaml"
    params:
        config=config,
        families=list(GRID),
    script:
        "../../scripts/report.py"
