"""movebench: a benchmark campaign for moving data on HPC and cloud systems."""

__version__ = "0.1.0"
