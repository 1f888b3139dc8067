# Tables per family: every record, and a summary per point.


rule aggregate:
    input:
        records=lambda w: point_outputs(w.family),
        meta=lambda w: point_outputs(w.family, ".meta.json"),
    output:
        records=report(
            f"{TABLES}/{{family}}.csv",
            category="Tables",
            caption="../../report/tables.rst",
        ),
        parquet=f"{TABLES}/{{family}}.parquet",
        summary=report(
            f"{TABLES}/{{family}}_summary.csv",
            category="Tables",
            caption="../../report/tables.rst",
        ),
    log:
        f"{LOGS}/aggregate/{{family}}.log",
    wildcard_constraints:
        family="|".join(GRID) or "none",
    conda:
        "../../envs/report.yaml"
    params:
        family=lambda w: w.family,
    script:
        "../../scripts/aggregate.py"
