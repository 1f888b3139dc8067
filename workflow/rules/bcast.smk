# bcast: one MPI job per point (kind, method, nodes, ranks, shape, density, dtype).


rule bcast_point:
    input:
        kernel_sources("bcast"),
    output:
        records=f"{RAW}/bcast/{{point}}.jsonl",
        meta=f"{RAW}/bcast/{{point}}.meta.json",
    log:
        f"{LOGS}/bcast/{{point}}.log",
    params:
        family="bcast",
        **point_params("bcast"),
    resources:
        **point_resources("bcast"),
    group:
        "bcast"
    shell:
        LAUNCH
