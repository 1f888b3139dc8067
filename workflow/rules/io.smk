# io: one MPI job per point (pattern, backend, nodes, ranks, size per process).
# Cloud backends read their connection string from the environment variable the config
# names (make run exports Azurite's); point jobs inherit Snakemake's environment.


rule io_point:
    input:
        kernel_sources("io")
        + [str(p) for p in sorted((PACKAGE / "storage").glob("*.py"))],
    output:
        records=f"{RAW}/io/{{point}}.jsonl",
        meta=f"{RAW}/io/{{point}}.meta.json",
    log:
        f"{LOGS}/io/{{point}}.log",
    group:
        "io"
    conda:
        "../../envs/io.yaml"
    resources:
        **point_resources("io"),
    params:
        **point_params("io"),
        family="io",
    shell:
        LAUNCH
