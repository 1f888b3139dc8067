# One rule per family, `<family>_point`: one job per launch of a point, its task found by its path; the
# launches run in LAUNCH_ORDER (the scheduler starts the ready job of highest priority first).


for family in GRID:

    rule:
        name:
            f"{family}_point"
        input:
            kernel_sources(family),
        output:
            records=f"{RAW}/{family}/{{point_path}}.jsonl",
            meta=f"{RAW}/{family}/{{point_path}}.meta.json",
        log:
            f"{LOGS}/{family}/{{point_path}}.log",
        group:
            family
        priority: point_priority(family)
        conda:
            str(families.folder(family) / "environment.yaml")
        resources:
            **point_resources(family),
        params:
            **point_params(family),
        shell:
            LAUNCH
