# bcast: one MPI job per point (kind, method, nodes, ranks, shape, density, dtype).


rule bcast_point:
    input:
        kernel_sources("bcast"),
    output:
        records=f"{RAW}/bcast/{{point}}.jsonl",
        meta=f"{RAW}/bcast/{{point}}.meta.json",
    log:
        f"{LOGS}/bcast/{{point}}.log",
    group:
        "bcast"
    conda:
        "../../envs/bcast.yaml"
    resources:
        **point_resources("bcast"),
    params:
        **point_params("bcast"),
        family="bcast",
    shell:
        LAUNCH
