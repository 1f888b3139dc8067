# Tables per family: every record, a summary per point and measure, and one row per point.


rule aggregate:
    input:
        records=lambda w: point_outputs(w.family),
        meta=lambda w: point_outputs(w.family, ".meta.json"),
        # every module aggregate and the family's hooks import, read from the source: an edit recomputes the tables
        code=lambda w: [str(path) for path in campaign.aggregate_sources(w.family)],
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
        points=f"{TABLES}/{{family}}_points.csv",
    log:
        f"{LOGS}/aggregate/{{family}}.log",
    wildcard_constraints:
        family="|".join(GRID) or "none",
    conda:
        "../envs/report.yaml"
    # a point measuring on this machine would share its cores with this job (the local profile has one slot)
    resources:
        benchmark_slots=1,
    params:
        family=lambda w: w.family,
        points=lambda w: GRID[w.family],
        launches=lambda w: plan.planned_launches(config[w.family]["launches"]),
        results=RESULTS,
    script:
        "../../scripts/aggregate.py"
