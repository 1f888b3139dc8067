"""Snakemake script: tables -> results/report.html."""

from pathlib import Path

from movebench.core.snakelog import logged
from movebench.judging import report

with logged(snakemake.log[0], Path(snakemake.output[0]).parent):  # noqa: F821 - provided by Snakemake
    report.render(snakemake.params.config, snakemake.params.families, snakemake.output[0])  # noqa: F821
