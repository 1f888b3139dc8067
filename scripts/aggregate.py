"""Snakemake script: one family's records -> its tables."""

from pathlib import Path

from movebench.core.snakelog import logged
from movebench.engine import aggregate

with logged(snakemake.log[0], Path(snakemake.output.records).parent):  # noqa: F821 - provided by Snakemake
    aggregate.write_tables(
        snakemake.params.family,  # noqa: F821
        snakemake.input.records,  # noqa: F821
        snakemake.output,  # noqa: F821
        snakemake.params.points,  # noqa: F821
        snakemake.params.results,  # noqa: F821
        snakemake.params.launches,  # noqa: F821
    )
