# kv: one Dragon job per point (operation, nodes, clients and managers per node, value size).


rule kv_point:
    input:
        kernel_sources("kv"),
        str(PACKAGE / "dragonrun.py"),
    output:
        records=f"{RAW}/kv/{{point}}.jsonl",
        meta=f"{RAW}/kv/{{point}}.meta.json",
    log:
        f"{LOGS}/kv/{{point}}.log",
    group:
        "kv"
    conda:
        "../../envs/kv.yaml"
    resources:
        **point_resources("kv"),
    params:
        **point_params("kv"),
        family="kv",
    shell:
        LAUNCH
