# shuffle: one MPI job per point (pattern, nodes, ranks, message size, window, skew).


rule shuffle_point:
    input:
        kernel_sources("shuffle"),
    output:
        records=f"{RAW}/shuffle/{{point}}.jsonl",
        meta=f"{RAW}/shuffle/{{point}}.meta.json",
    log:
        f"{LOGS}/shuffle/{{point}}.log",
    group:
        "shuffle"
    conda:
        "../../envs/shuffle.yaml"
    resources:
        **point_resources("shuffle"),
    params:
        **point_params("shuffle"),
        family="shuffle",
    shell:
        LAUNCH
