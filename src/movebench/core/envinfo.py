"""The run's environment for `.meta.json`, with every secret replaced by `***`."""

from __future__ import annotations

import bisect
import json
import os
import re
import resource
import socket
import sys
import time
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
    """Versions of the packages behind a figure; a campaign looks them up once and hands them to its points
    (MOVEBENCH_PACKAGES, set by movebench.campaign), since importlib.metadata is slow to import and read
    (docs/notes/kernels.md, section 8)."""
    cached = os.environ.get("MOVEBENCH_PACKAGES")
    if cached:
        try:
            versions = json.loads(cached)
        except json.JSONDecodeError:
            versions = None
        if isinstance(versions, dict) and set(versions) == set(PACKAGES):
            return versions
    from importlib import metadata

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def platform_name() -> str:
    """platform.platform()'s string (Linux-<release>-<machine>-with-glibc<version>) from os.uname and confstr:
    platform.platform() reads the interpreter's binary to find the C library, on every point's rank 0
    (docs/notes/kernels.md, "Streaming ranks without numpy")."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError, AttributeError):
        libc = None
    uname = os.uname()
    if uname.sysname != "Linux" or not libc:
        import platform

        return platform.platform()
    return f"{uname.sysname}-{uname.release}-{uname.machine}-with-{libc.replace(' ', '')}"


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or None


def git_commit(cwd=None) -> str | None:
    """The commit of the movebench checkout that ran (not of the folder the campaign runs in); a campaign
    asks git once and hands it to its points (MOVEBENCH_GIT_COMMIT, empty for none)."""
    if cwd is None and "MOVEBENCH_GIT_COMMIT" in os.environ:
        return os.environ["MOVEBENCH_GIT_COMMIT"] or None
    import subprocess

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
    import hashlib

    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def capture(**extra) -> dict:
    """What a reader needs to trust or reproduce a number; `extra` adds launcher-specific facts."""
    meta = {
        **memory_settings(),
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform_name(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "environment": redact_env(dict(os.environ)),
    }
    meta.update(extra)
    meta["fingerprint"] = fingerprint(meta)
    return meta


# --- the environment fingerprint: what two runs must share for their numbers to be compared ---

THP_PATH = Path("/sys/kernel/mm/transparent_hugepage/enabled")
#: PACKAGES less those that only read tables and run the workflow: they cannot change a transfer
FINGERPRINT_PACKAGES = tuple(name for name in PACKAGES if name not in ("pandas", "snakemake"))
# Tuning variables only: MPI, fabric, OpenMP and allocator settings, and the Dragon knobs its docs tell users to set.
# Dragon exports dozens of DRAGON_* per run (channel descriptors, puids) that differ every time, hence names, not a
# prefix; likewise PMI_* and SLURM_* (ranks, job ids) are left out.
FINGERPRINT_ENV_PREFIXES = ("MPICH_", "MPIR_CVAR_", "FI_", "UCX_", "OMP_", "I_MPI_", "OMPI_MCA_", "HYDRA_")
FINGERPRINT_ENV_NAMES = ("DRAGON_DEFAULT_SEG_SZ", "DRAGON_INF_SEG_SZ", "DRAGON_HSTA_TRANSPORT_TYPE",
                         "DRAGON_HSTA_MAX_EJECTION_MB", "DRAGON_HSTA_MAX_GETMSG_MB", "DRAGON_GW_CAPACITY",
                         "DRAGON_NUM_GW_CHANNELS_PER_NODE", "DRAGON_TRANSPORT_AGENT", "DRAGON_BASEPOOL",
                         "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX")
# Logging knobs: launch sets them to have the MPI libraries report their transport (core/transport.py); they
# change what is printed, not what is measured.
FINGERPRINT_ENV_IGNORED = ("UCX_LOG_LEVEL", "MPIR_CVAR_DEBUG_SUMMARY")
_MPI_NAMES = (("cray mpich", "Cray MPICH"), ("intel(r) mpi", "Intel MPI"), ("intel mpi", "Intel MPI"),
              ("open mpi", "Open MPI"), ("mvapich", "MVAPICH"), ("mpich", "MPICH"), ("microsoft mpi", "MS-MPI"))


def memory_settings() -> dict:
    """Page size and transparent-huge-page mode: huge pages move large-message figures (docs/notes/kernels.md,
    section 5)."""
    try:
        thp = THP_PATH.read_text().strip()
        match = re.search(r"\[(\w+)\]", thp)
        thp = match.group(1) if match else thp
    except OSError:
        thp = None
    return {"page_size": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None,
            "transparent_hugepage": thp}


def mpi_library_name(library_version: str | None) -> tuple[str | None, str | None]:
    """("MPICH", "5.0.2") from the first line of MPI_Get_library_version; (None, None) without MPI."""
    if not library_version:
        return None, None
    lowered = library_version.lower()
    name = next((pretty for key, pretty in _MPI_NAMES if key in lowered), library_version.split()[0])
    version = re.search(r"\d+(?:\.\d+)+", library_version)
    return name, version.group(0) if version else None


def fingerprint(meta: dict) -> dict:
    """The comparability facts of a point, from its meta alone (so older metas get one when read).

    `mpi_library` is the implementation's name: an MPI upgrade (a new `mpi_library_version`)
    is what a comparison is for, a different implementation is not the same experiment.
    """
    name, version = mpi_library_name(meta.get("mpi_library"))
    packages = meta.get("packages") or {}
    env = meta.get("environment") or {}
    hosts = meta.get("nodes") or meta.get("hostnames") or ([meta["hostname"]] if meta.get("hostname") else [])
    return {
        "mpi_library": name,
        "mpi_library_version": version,
        "mpi_version": meta.get("mpi_version"),
        "mpi_thread_level": meta.get("mpi_thread_level"),
        "packages": {k: packages.get(k) for k in FINGERPRINT_PACKAGES},
        "hosts": sorted(set(hosts)),
        "cpu_model": meta.get("cpu_model"),
        "page_size": meta.get("page_size"),
        "transparent_hugepage": meta.get("transparent_hugepage"),
        "env": {k: v for k, v in sorted(env.items()) if k not in FINGERPRINT_ENV_IGNORED
                and (k.startswith(FINGERPRINT_ENV_PREFIXES) or k in FINGERPRINT_ENV_NAMES)},
        # A point measured after others in a warm process (a launch group, as OSU sweeps its sizes) is not the
        # same experiment as a point alone in its launch (docs/notes/kernels.md, sections 9 and 12).
        "launch_grouped": bool(meta.get("launch_group")),
    }


class HostLoad:
    """CPUs kept busy on this host by processes other than ours from now to `finish`.

    Ours: this process, its descendants (counted as they are reaped), and the processes named by pid (the
    snakemake that started a launch, the campaign's services), each reported apart, so that what is left,
    `other_cpus`, is what competed with the measurement from outside. A benchmark beside another busy process
    measures both: a launch above a threshold of it is disturbed (launch), and compare warns about a busy side.
    Under Slurm a launch's load is its node's; the campaign's is the submitting host's.
    """

    def __init__(self, pids: dict[str, int] | None = None):
        self.pids = {name: pid for name, pid in (pids or {}).items() if pid}
        self.start = (_host_busy_cpu_seconds(), _children_cpu_seconds(), _own_cpu_seconds(),
                      {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}, os.times().elapsed)

    def finish(self, extra: dict[str, float] | None = None) -> dict | None:
        """The load since the start: `extra` names more of our CPU seconds (e.g. a paused service's) by kind."""
        busy0, children0, own0, named0, t0 = self.start
        busy1, children1, own1, t1 = _host_busy_cpu_seconds(), _children_cpu_seconds(), _own_cpu_seconds(), \
            os.times().elapsed
        if busy0 is None or busy1 is None or t1 <= t0:
            return None
        wall = t1 - t0
        parts = {"campaign_cpus": (children1 - children0) / wall, "watchers_cpus": (own1 - own0) / wall}
        for name, pid in self.pids.items():
            before, after = named0.get(name), process_cpu_seconds(pid)
            if before is not None and after is not None:
                parts[f"{name}_cpus"] = max(after - before, 0.0) / wall
        for name, seconds in (extra or {}).items():
            if seconds is not None:
                parts[f"{name}_cpus"] = seconds / wall
        busy = (busy1 - busy0) / wall
        return {"cpus": os.cpu_count(), "wall_s": round(wall, 3), "busy_cpus": round(busy, 3),
                **{k: round(v, 3) for k, v in parts.items()},
                "other_cpus": round(max(busy - sum(parts.values()), 0.0), 3)}


class LoadSampler:
    """What other processes used of the host's CPUs, sampled every `interval` s while a kernel runs, so that each
    point of a launch group is judged by the load during its own repetitions (`window`), not the launch's.

    Each sample is (wall time, the host's busy CPU seconds, our processes' CPU seconds): ours are `pids()`'s
    (the kernel's process tree, this process, the snakemake and services beside it), with the children each has
    reaped, so that a rank that ends moves its time into its parent's rather than out of the sum.
    """

    def __init__(self, pids, interval: float = 0.25):
        import threading

        self.pids, self.interval = pids, interval
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        busy = _host_busy_cpu_seconds()
        if busy is None:
            return
        ours = sum(v for v in (process_cpu_seconds(pid) for pid in set(self.pids())) if v is not None)
        self.samples.append((time.time(), busy, ours))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sample()

    def window(self, start: float, end: float) -> float | None:
        """CPUs other processes kept busy on average from `start` to `end` (wall times), the samples interpolated;
        None without two samples around it."""
        if len(self.samples) < 2 or end <= start:
            return None
        times = [t for t, _, _ in self.samples]
        other = [busy - ours for _, busy, ours in self.samples]

        def at(t: float) -> float:
            t = min(max(t, times[0]), times[-1])
            i = max(1, min(len(times) - 1, bisect.bisect_left(times, t)))
            (t0, o0), (t1, o1) = (times[i - 1], other[i - 1]), (times[i], other[i])
            return o0 if t1 <= t0 else o0 + (o1 - o0) * (t - t0) / (t1 - t0)

        # a window shorter than the samples' interval gets the rate of the interval around it
        lo, hi = min(max(start, times[0]), times[-1]), min(max(end, times[0]), times[-1])
        if hi - lo < self.interval:
            mid = (lo + hi) / 2
            lo, hi = max(times[0], mid - self.interval), min(times[-1], mid + self.interval)
        return max(0.0, (at(hi) - at(lo)) / (hi - lo)) if hi > lo else None


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process and of its children it has reaped; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17 (proc(5))
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _host_busy_cpu_seconds() -> float | None:
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    # guest time is already inside user time
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
