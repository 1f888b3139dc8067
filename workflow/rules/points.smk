# One rule per family, `<family>_point`: one job per launch of a point, its task found by its path; the
# launches run in LAUNCH_ORDER (the scheduler starts the ready job of highest priority first).
# A family whose points share launches (launch_groups) has instead one rule per launch group,
# `<family>_group_<name>` (e.g. shuffle_group_nodes1_ranks2_launch0), whose one job measures its members in one
# launch; a group holds only launches still to measure (plan.launch_groups).


for family in GRID:
    if family in GROUPS:
        continue

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
        priority: point_priority(family)
        group:
            family
        conda:
            str(families.folder(family) / "environment.yaml")
        resources:
            **point_resources(family),
        params:
            **point_params(family),
        shell:
            LAUNCH


for rule_name, launch_group in GROUP_RULES.items():

    rule:
        name:
            rule_name
        input:
            kernel_sources(launch_group.family),
        output:
            records=group_outputs(launch_group, ".jsonl"),
            meta=group_outputs(launch_group, ".meta.json"),
        log:
            f"{LOGS}/{launch_group.family}/{plan.GROUPS}/{launch_group.name}.log",
        priority: PRIORITY[launch_group.family][launch_group.name]
        group:
            launch_group.family
        conda:
            str(families.folder(launch_group.family) / "environment.yaml")
        resources:
            **group_resources(launch_group),
        params:
            **group_params(launch_group),
        shell:
            GROUP_LAUNCH
