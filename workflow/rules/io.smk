# io: one MPI job per point (pattern, backend, nodes, ranks, size per process).
# Cloud backends read their connection string from the environment variable named
# in the config (make run exports Azurite's); the jobs inherit Snakemake's environment.


rule io_point:
    input:
        kernel_sources("io")
        + [str(p) for p in sorted((PACKAGE / "storage").glob("*.py"))],
    output:
        records=f"{RAW}/io/{{point}}.jsonl",
        meta=f"{RAW}/io/{{point}}.meta.json",
    log:
        f"{LOGS}/io/{{point}}.log",
    params:
        family="io",
        **point_params("io"),
    resources:
        **point_resources("io"),
    group:
        "io"
    shell:
        LAUNCH
