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

# The environment a meta keeps: an allowlist of what changes how a transfer performs. Any other
# variable is left out whatever its name, so a token in a variable nobody expected (a personal
# access token, a proxy URL with a password) never reaches a meta file, the tables or the report.
PERFORMANCE_PREFIXES = (
    # MPI libraries and their launchers
    "MPICH_", "MPIR_CVAR_", "HYDRA_", "I_MPI_", "OMPI_MCA_", "PMIX_MCA_", "PRTE_MCA_",
    # fabrics
    "FI_", "UCX_", "PSM2_", "PSM3_", "MLX5_", "IBV_", "NCCL_",
    # Dragon
    "DRAGON_",
    # threads
    "OMP_", "KMP_", "GOMP_",
    # malloc and huge pages
    "MALLOC_", "HUGETLB_",
)
PERFORMANCE_NAMES = frozenset({
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "GLIBC_TUNABLES", "LD_PRELOAD",
    # Slurm: where the job's tasks were placed, not who ran it
    "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE",
    "SLURM_JOB_CPUS_PER_NODE", "SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST",
    "SLURM_DISTRIBUTION", "SLURM_HINT", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_PARTITION",
    "SLURM_MPI_TYPE", "SLURM_EXCLUSIVE", "SLURM_OVERCOMMIT", "SLURM_THREADS_PER_CORE",
})
# Kept names that still look like they hold a secret lose their value entirely.
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|SAS|CONNECTION_STRING|CREDENTIAL|SIG|AUTH", re.I)
# Secrets inside a value: a URL's user:password@, connection-string and SAS fields, bearer tokens.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")
_SECRET_FIELD = re.compile(
    r"(?P<key>AccountKey|SharedAccessSignature|SharedAccessKey|sig|password|passwd|pwd|token|access_token|"
    r"client_secret|api[-_]?key|secret)(?P<sep>=|:\s*)(?P<value>[^;&\s,\"']+)", re.I)
_BEARER = re.compile(r"(?P<key>Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.I)


def keep_variable(name: str) -> bool:
    """Whether an environment variable is one a meta keeps (movebench's allowlist)."""
    return name in PERFORMANCE_NAMES or name.startswith(PERFORMANCE_PREFIXES)


def redact_value(value: str) -> str:
    """`value` with every credential in it replaced by ***: URL userinfo, key=value secrets, bearer tokens."""
    value = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    value = _SECRET_FIELD.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", value)
    return _BEARER.sub(lambda m: f"{m['key']} {REDACTED}", value)


def redact_env(env: dict) -> dict:
    """The allowlisted variables, credentials scrubbed from their values (names that look secret: no value)."""
    return {name: REDACTED if _SECRET_NAME.search(name) else redact_value(value)
            for name, value in sorted(env.items()) if keep_variable(name)}


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
