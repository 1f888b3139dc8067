# The self-contained HTML report, and the run's end whether it succeeded or not.


rule report:
    input:
        summaries=expand(f"{TABLES}/{{family}}_summary.csv", family=GRID),
        parquet=expand(f"{TABLES}/{{family}}.parquet", family=GRID),
        templates=list(Path(workflow.basedir, "report").glob("*.j2")),
    output:
        report(
            f"{RESULTS}/report.html",
            category="Report",
            caption="../../report/report.rst",
        ),
    log:
        f"{LOGS}/report.log",
    conda:
        "../../envs/report.yaml"
    params:
        config=config,
        grid=GRID,
    script:
        "../../scripts/report.py"


onerror:
    # A failed point stops its family's tables; still show what finished and what failed.
    from movebench import report as html_report

    try:
        path = html_report.render_partial(config, GRID)
        print(
            f"movebench: some points failed; partial report at {path}",
            file=sys.stderr,
        )
    except (
        Exception
    ) as exc:  # the run already failed: say why the report is missing, keep the first error
        print(
            f"movebench: could not render the partial report: {exc}",
            file=sys.stderr,
        )
