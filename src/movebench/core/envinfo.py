"""The run's environment for `.meta.json`, with every secret replaced by `***`."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REDACTED = "***"
PACKAGES = ("movebench", "mpi4py", "mpich", "dragonhpc", "numpy", "pandas", "snakemake",
            "azure-storage-blob", "azure-storage-file-share", "azure-core")
# Environment variables worth keeping: they change how MPI, Dragon, Slurm and the SDKs behave.
KEPT_PREFIXES = ("SLURM_", "MPICH_", "MPIR_", "HYDRA_", "FI_", "UCX_", "OMP_", "DRAGON_",
                 "AZURE_", "MOVEBENCH_", "PMI_", "I_MPI_", "OMPI_")
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|SAS|CONNECTION_STRING|CREDENTIAL|SIG", re.I)
# Secrets that hide inside other values: connection strings and SAS query strings.
_SECRET_VALUE = re.compile(r"(AccountKey|SharedAccessSignature|sig|password|pwd)=([^;&\s]+)", re.I)


def redact_value(value: str) -> str:
    return _SECRET_VALUE.sub(lambda m: f"{m.group(1)}={REDACTED}", value)


def redact_env(env: dict) -> dict:
    """Keep the interesting variables; names that look secret lose their value entirely."""
    kept = {}
    for name, value in sorted(env.items()):
        if not name.startswith(KEPT_PREFIXES):
            continue
        kept[name] = REDACTED if _SECRET_NAME.search(name) else redact_value(value)
    return kept


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_commit(cwd=None) -> str | None:
    """The commit of the movebench checkout that ran (not of the folder the campaign runs in)."""
    cwd = cwd or Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def capture(**extra) -> dict:
    """What a reader needs to trust or reproduce a number; `extra` adds launcher-specific facts."""
    meta = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "environment": redact_env(dict(os.environ)),
    }
    meta.update(extra)
    return meta
