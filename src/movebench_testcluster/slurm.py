"""A real, self-contained Slurm test cluster on this one machine, whose nodes are hosts of their own.

``LocalSlurmCluster`` starts Debian's Slurm (22.05 on Debian 12) with its own munged, one slurmctld
and N slurmd (default 2): nodes ``n1``, ``n2``, ... Each node is a network namespace with its own
UTS namespace (host name ``n1``), its own address on a bridge of the project's own (198.18.0.11,
.12, ...; see ``movebench_testcluster.netns``) and its own /dev/shm; its slurmd, and every job step
it starts, live there. slurmctld and munged run on the host, which reaches the bridge as
198.18.0.1; munged's socket is a path every node sees. It is meant for tests and for trying the
project's ``slurm`` profile without a real cluster::

    python -m movebench_testcluster up [--nodes 4] [--link "rate=5gbit"]   # or: make slurm-up
    sbatch -N 2 --wrap 'srun hostname'
    python -m movebench_testcluster down                                   # or: make slurm-down

Layout of the state directory (default ``/tmp/movebench-slurm``, or
``$MOVEBENCH_SLURM_DIR``, or ``--dir``; outside the repository, since the
cluster is host-wide anyway: it owns ``/etc/slurm/slurm.conf``)::

    slurm.conf          the configuration (also installed as /etc/slurm/slurm.conf)
    slurm.n1.conf ...   each slurmd's copy (differs in TmpFS only)
    state.json          pids, ports, nodes, link shape and the network that was built
    munge/              munge.key, munge.socket, munged.pid/.log/.seed
    ctld/               StateSaveLocation of slurmctld
    spool/n1, ...       SlurmdSpoolDir of each node
    tmp/n1, ...         a private TmpFS per node (see below)
    log/                slurmctld.log, slurmd.n1.log, ...
    run/                pid files

Why the configuration is written to ``/etc/slurm/slurm.conf``: the Snakemake
slurm executor's job-step wrapper removes every ``SLURM_*`` variable
(``SLURM_CONF`` included) before it runs a rule, so an ``srun`` inside a job
only finds the default path.  An existing ``/etc/slurm/slurm.conf`` that is not
ours is saved as ``/etc/slurm/slurm.conf.movebench-backup`` and put back at
``stop()``.  Only one such cluster can run per host.

Job status: no slurmdbd runs, so ``sacct`` does not work.  Use
``squeue`` for status (Snakemake: ``slurm-status-command: squeue``);
``MinJobAge`` is 3600 s so finished jobs stay visible to ``squeue``.

Every daemon is stopped by the pid it wrote in its pid file, every namespace and link removed by
its name, and what is left inside a node's namespace killed by its PID; nothing is killed by name.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from movebench_testcluster import netns
from movebench_testcluster.netns import HEAD_ADDR, LinkShape, NetworkError

SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
BACKUP_SUFFIX = ".movebench-backup"
MARKER = "# movebench LocalSlurmCluster, state dir: "
DEFAULT_NODES = 2
SLURMD_PORT = 6818  # every node has its own address, so every slurmd takes Slurm's default port
PARTITION = "debug"
CLUSTER_NAME = "movebench"
MIN_JOB_AGE_S = 3600
# a node that stops answering is DOWN (its jobs NODE_FAIL) after this many seconds
SLURMD_TIMEOUT_S = 20
REQUIRED_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
#: The PMI libraries srun's plugins load for MPI stacks other than the default (Open MPI 5: the pmix plugin opens
#: <libdir>/pmix2/lib/libpmix.so, a link only libpmix-dev makes; Intel MPI: Slurm's PMI-2 client, libpmi2-0).
PMI_PACKAGES = ("libpmix2", "libpmix-dev", "libpmi2-0")
APT_PACKAGES = ("slurm-wlm", "munge", *PMI_PACKAGES)


class SlurmClusterError(RuntimeError):
    """The cluster could not be installed, started or stopped."""


def read_nodes(value) -> int:
    """NODES from the command line or make: a whole number from 1 to netns.MAX_NODES, else a one-line error."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= netns.MAX_NODES:
        raise SlurmClusterError(f"NODES={value!r}: the test cluster takes 1 to {netns.MAX_NODES} nodes")
    return n


def default_state_dir() -> Path:
    return Path(os.environ.get("MOVEBENCH_SLURM_DIR", "/tmp/movebench-slurm")).resolve()


# --------------------------------------------------------------------------- install


def missing_binaries() -> list[str]:
    """The Slurm and munge programs, and the PMI libraries srun's plugins load, this machine lacks."""
    import ctypes.util

    missing = [b for b in REQUIRED_BINARIES if shutil.which(b, path=_sbin_path()) is None]
    if not list(Path("/usr/lib").glob("*/pmix2/lib/libpmix.so")):
        missing.append("pmix2/lib/libpmix.so")
    if ctypes.util.find_library("pmi2") is None:
        missing.append("libpmi2.so")
    return missing


def _sbin_path() -> str:
    parts = os.environ.get("PATH", "").split(os.pathsep)
    for extra in ("/usr/sbin", "/usr/bin", "/sbin"):
        if extra not in parts:
            parts.append(extra)
    return os.pathsep.join(parts)


def ensure_installed(*, log=print) -> bool:
    """Install Debian's slurm-wlm and munge when missing.  Returns True if it installed.

    Quick (one ``which`` per binary) when everything is already there.  Needs
    root and a Debian-like system with apt-get.  Daemons are kept from
    starting during the install with a temporary ``policy-rc.d`` (only when
    none exists), since this module starts its own.
    """
    missing = missing_binaries()
    if not missing:
        return False
    if os.geteuid() != 0:
        raise SlurmClusterError(
            f"Slurm binaries missing ({', '.join(missing)}) and not root: "
            f"cannot apt-get install {' '.join(APT_PACKAGES)}"
        )
    if shutil.which("apt-get") is None:
        raise SlurmClusterError(f"Slurm binaries missing ({', '.join(missing)}) and no apt-get to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    policy = Path("/usr/sbin/policy-rc.d")
    made_policy = False
    if not policy.exists():
        policy.write_text("#!/bin/sh\n# temporary, written by movebench_testcluster\nexit 101\n")
        policy.chmod(0o755)
        made_policy = True
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]
    try:
        log(f"installing {' '.join(APT_PACKAGES)} with apt-get ...")
        r = subprocess.run(install, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            # Fresh machines have no package lists yet.
            u = subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
            if u.returncode != 0:
                raise SlurmClusterError(f"apt-get update failed:\n{u.stdout[-2000:]}\n{u.stderr[-2000:]}")
            r = subprocess.run(install, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SlurmClusterError(f"apt-get install failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    finally:
        if made_policy:
            policy.unlink(missing_ok=True)
    still = missing_binaries()
    if still:
        raise SlurmClusterError(f"after apt-get install still missing: {', '.join(still)}")
    return True


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    """A port free on every address of the host (slurmctld listens on all of them)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _tail(path: Path, n: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} not readable)"
    return "\n".join(lines[-n:])


def first_job_id(now: float) -> int:
    """Ten ids per second of wall time, below Slurm's MaxJobId (67043328): a later cluster starts above the
    ids an earlier one used, unless it submitted more than ten jobs per second since."""
    return int(now * 10) % 60_000_000 + 1


def _mem_per_node_mb(nodes: int) -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total_mb = int(line.split()[1]) // 1024
                return max(1000, int(total_mb * 0.8 / nodes))
    except OSError:
        pass
    return 2000


# --------------------------------------------------------------------------- cluster


class LocalSlurmCluster:
    """Munged + slurmctld + one slurmd per node (n1, n2, ...), each node in namespaces of its own.

    Use as a context manager, or call ``start()`` / ``stop()``.  ``start()``
    returns once every node is idle, or raises ``SlurmClusterError`` with the
    daemons' log tails (it never waits longer than ``start_timeout``).

    ``nodes`` (a count) and ``link`` (``"rate=5gbit"``, see ``netns.LinkShape``) default to what the
    state directory's running cluster has, else 2 nodes and unshaped links.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike | None = None,
        *,
        nodes: int | None = None,
        link: str | LinkShape | None = None,
        cpus_per_node: int = 2,
        start_timeout: float = 60.0,
        install: bool = True,
        conf_path: str | os.PathLike = SYSTEM_CONF,
        log=None,
    ):
        self.root = Path(root_dir).resolve() if root_dir is not None else default_state_dir()
        self.cpus_per_node = cpus_per_node
        self.start_timeout = start_timeout
        self.install = install
        self.conf_path = Path(conf_path)
        self.backup_path = self.conf_path.with_name(self.conf_path.name + BACKUP_SUFFIX)
        state = self._load_state()
        count = read_nodes(nodes) if nodes is not None else len(state.get("nodes", [])) or DEFAULT_NODES
        self.nodes = netns.node_names(count)
        try:
            self.link = LinkShape.parse(link) if isinstance(link, str) or link is None else link
        except NetworkError as e:
            raise SlurmClusterError(str(e)) from None
        if link is None and state.get("link"):
            self.link = LinkShape.parse(state["link"])
        self._link_asked = link is not None
        self._log = log or (lambda msg: print(f"[slurm-cluster] {msg}", file=sys.stderr))
        self.started_at: float | None = None
        self.startup_seconds: float | None = None

    # paths
    @property
    def munge_dir(self) -> Path:
        return self.root / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def local_conf(self) -> Path:
        return self.root / "slurm.conf"

    def _pidfiles(self, nodes=None) -> dict[str, Path]:
        run = self.root / "run"
        files = {f"slurmd.{n}": run / f"slurmd.{n}.pid" for n in (nodes or self.nodes)}
        files["slurmctld"] = run / "slurmctld.pid"
        files["munged"] = self.munge_dir / "munged.pid"
        return files  # stop order: slurmd, slurmctld, munged

    def env(self) -> dict[str, str]:
        """Variables a client needs.  The config sits at the default path, so
        ``SLURM_CONF`` only states the obvious (and survives being stripped)."""
        return {"SLURM_CONF": str(self.conf_path)}

    def client_env(self, python: str = sys.executable) -> dict[str, str]:
        """This process's environment for a Slurm client of the cluster: no inherited SLURM_* (an outer job's
        would steer srun and sbatch), the cluster's variables, `python`'s folder (its mpiexec, snakemake) first."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
        env.update(self.env())
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", ""), "/usr/sbin", "/usr/bin"])
        return env

    # state
    def _load_state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self, **changes) -> None:
        state = self._load_state()
        state.update(changes)
        self.state_file.write_text(json.dumps(state, indent=2))

    def running_daemons(self) -> dict[str, int | None]:
        """Pid of each daemon, or None if it is not running."""
        return {name: (pid if _pid_alive(pid := _read_pid(path)) else None) for name, path in self._pidfiles().items()}

    def is_running(self) -> bool:
        return all(self.running_daemons().values())

    # the nodes as hosts
    def node_addr(self, node: str) -> str:
        return netns.node_addr(node)

    def node_pid(self, node: str) -> int:
        pid = _read_pid(self._pidfiles()[f"slurmd.{node}"])
        if not _pid_alive(pid):
            raise SlurmClusterError(f"node {node}: its slurmd is not running")
        return pid

    def on_node(self, node: str, *argv: str, timeout: float = 30, check: bool = True, **kw):
        """Run a program on a node, as its jobs run there: its network, host name, /etc/hosts and /dev/shm."""
        return self.run(*netns.enter_prefix(self.node_pid(node)), *argv, timeout=timeout, check=check, **kw)

    def node_shm(self, node: str) -> Path:
        """The node's own /dev/shm, seen from the host (through its slurmd's mount namespace)."""
        return Path(f"/proc/{self.node_pid(node)}/root/dev/shm")

    def node_processes(self, node: str) -> dict[int, str]:
        """PID -> command line of every process on the node but its slurmd (job steps, their tasks, leftovers)."""
        slurmd = _read_pid(self._pidfiles()[f"slurmd.{node}"])
        found = {}
        for pid in netns.namespace_pids(netns.node_ns(node)):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if pid != slurmd and cmdline:
                found[pid] = cmdline.strip()
        return found

    def set_link(self, link: str | LinkShape | None) -> LinkShape | None:
        """Shape every node's link now (None: unshaped). Running jobs feel it at once."""
        try:
            shape = LinkShape.parse(link) if isinstance(link, str) or link is None else link
            netns.apply_link(self.nodes, shape)
        except NetworkError as e:
            raise SlurmClusterError(str(e)) from None
        self.link = shape
        self._save_state(link=str(shape) if shape else None)
        self._log(f"links: {shape or 'unshaped'}")
        return shape

    @contextmanager
    def shaped(self, link: str | LinkShape | None):
        """``with cluster.shaped("rate=1gbit"): ...``: the links shaped inside the block, as before after it."""
        before = self.link
        shape = self.set_link(link)
        try:
            yield shape
        finally:
            self.set_link(before)

    # configuration
    def _write_munge_key(self) -> None:
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        for parent in self.root.parents:
            if not parent.stat().st_mode & 0o001:
                raise SlurmClusterError(
                    f"munged needs every directory above its socket to be searchable by all, {parent} is not: "
                    "choose another state dir (e.g. under /tmp)"
                )
        # munged needs the socket's directory (and its parents) to be
        # traversable by everyone, and the key readable by its owner only.
        for d in (self.root, self.munge_dir):
            d.chmod(0o755)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)

    def render_conf(self, ctld_port: int) -> str:
        r = self.root
        mem = _mem_per_node_mb(len(self.nodes))
        node_lines = "\n".join(
            f"NodeName={n} NodeHostname={n} NodeAddr={self.node_addr(n)} Port={SLURMD_PORT} "
            f"CPUs={self.cpus_per_node} RealMemory={mem} State=UNKNOWN"
            for n in self.nodes
        )
        return f"""{MARKER}{r}
# Written by movebench_testcluster; removed (or the original restored) at stop.
ClusterName={CLUSTER_NAME}
# "localhost" is the one name slurmctld accepts whatever the host's name; the nodes reach it on
# the host's side of the cluster's bridge.
SlurmctldHost=localhost({HEAD_ADDR})
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
AccountingStoragePass={self.munge_socket}
StateSaveLocation={r}/ctld
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS={r}/tmp
ProctrackType=proctrack/linuxproc
# task/affinity so that `srun --cpu_bind=none` (Dragon starts its back ends so) is accepted; no binding
# by default: every node has the same two CPUs of this host
TaskPlugin=task/affinity
TaskPluginParam=None
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# reject at submission what can never run (e.g. more nodes than exist), so
# that Snakemake reports an error instead of polling a PENDING job forever
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
# the per-node copies differ in TmpFS only: do not warn about it
DebugFlags=NO_CONF_HASH
MinJobAge={MIN_JOB_AGE_S}
# Job ids that do not start at 1 again with every fresh cluster: MPICH names its shared-memory
# segment after the PMI job id ("<job>.<step>"), and a segment left in /dev/shm by a killed job
# of an earlier cluster made the next job with the same id fail in MPI_Init.
FirstJobId={first_job_id(time.time())}
KillWait=5
# A job whose node fails ends NODE_FAIL instead of going back to the queue, where it would wait for the node
# (Snakemake would see a PENDING job for as long as the node is down).
JobRequeue=0
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout={SLURMD_TIMEOUT_S}
MessageTimeout=10
{node_lines}
PartitionName={PARTITION} Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE \
    MaxNodes={len(self.nodes)} State=UP OverSubscribe=EXCLUSIVE
"""

    def node_conf(self, node: str) -> Path:
        return self.root / f"slurm.{node}.conf"

    def _install_conf(self, text: str) -> None:
        self.local_conf.write_text(text)
        # Each slurmd reads its own copy that differs only in TmpFS: the PMIx
        # plugin makes "<TmpFS>/spmix_appdir_<uid>_<job>.<step>" on every
        # node, and the nodes share this host's /tmp.
        for n in self.nodes:
            (self.root / "tmp" / n).mkdir(parents=True, exist_ok=True)
            (self.root / "tmp" / n).chmod(0o1777)
            self.node_conf(n).write_text(text.replace(f"\nTmpFS={self.root}/tmp\n", f"\nTmpFS={self.root}/tmp/{n}\n"))
        self.conf_path.parent.mkdir(parents=True, exist_ok=True)
        if self.conf_path.exists() or self.conf_path.is_symlink():
            current = self.conf_path.read_text(errors="replace") if self.conf_path.exists() else ""
            if current.startswith(MARKER):
                self._refuse_if_another_runs()
                # stale file of ours: overwrite, the real backup (if any) is already saved
            elif not self.backup_path.exists():
                os.replace(self.conf_path, self.backup_path)
                self._log(f"saved existing {self.conf_path} as {self.backup_path}")
        tmp = self.conf_path.with_name(self.conf_path.name + ".movebench-tmp")
        tmp.write_text(text)
        os.replace(tmp, self.conf_path)

    def _refuse_if_another_runs(self) -> None:
        """One cluster per host (it owns /etc/slurm/slurm.conf and the namespaces' names): refuse to touch
        anything while another state directory's cluster runs."""
        try:
            first = self.conf_path.read_text(errors="replace").splitlines()[0]
        except (OSError, IndexError):
            return
        if not first.startswith(MARKER):
            return
        other = Path(first[len(MARKER) :].strip())
        if other != self.root and any(LocalSlurmCluster(other, install=False).running_daemons().values()):
            raise SlurmClusterError(f"another movebench Slurm cluster (state dir {other}) runs on this host; "
                                    f"stop it first: python -m movebench_testcluster down --dir {other}")  # fmt: skip

    def _restore_conf(self) -> None:
        try:
            current = self.conf_path.read_text(errors="replace")
        except OSError:
            current = None
        if current is not None and not current.startswith(f"{MARKER}{self.root}\n"):
            return  # not ours (any more): leave it alone
        if self.backup_path.exists():
            os.replace(self.backup_path, self.conf_path)
            self._log(f"restored {self.conf_path} from {self.backup_path}")
        elif current is not None:
            self.conf_path.unlink()

    # commands
    def run(self, *args: str, timeout: float = 30, check: bool = True, **kw) -> subprocess.CompletedProcess:
        env = dict(os.environ, **self.env(), PATH=_sbin_path())
        env.update(kw.pop("env", {}) or {})
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env, **kw)
        if check and r.returncode != 0:
            raise SlurmClusterError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def node_states(self) -> dict[str, str]:
        r = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False, timeout=15)
        if r.returncode != 0:
            return {}
        states = {}
        for line in r.stdout.split("\n"):
            if line.strip():
                name, state = line.split()[:2]
                states[name] = state
        return states

    def _diagnostics(self) -> str:
        logs = [self.munge_dir / "munged.log", self.root / "log" / "slurmctld.log"]
        logs += [self.root / "log" / f"slurmd.{n}.log" for n in self.nodes]
        parts = [f"daemons: {self.running_daemons()}"]
        for p in logs:
            parts.append(f"--- {p}\n{_tail(p)}")
        return "\n".join(parts)

    # lifecycle
    def start(self) -> LocalSlurmCluster:
        t0 = time.monotonic()
        if self.install:
            ensure_installed(log=self._log)
        if os.geteuid() != 0:
            raise SlurmClusterError("LocalSlurmCluster runs its daemons as root (SlurmUser=root); run as root")
        try:
            netns.check_link(self.link)
        except NetworkError as e:
            raise SlurmClusterError(str(e)) from None
        self._refuse_if_another_runs()
        state = self._load_state()
        if self.is_running() and state.get("nodes") == self.nodes:
            self._log(f"already running (state dir {self.root})")
            if self._link_asked:
                self.set_link(self.link)
            self._wait_idle(t0)
            return self
        # Whatever an earlier start left (daemons killed, namespaces and links still there, a cluster of
        # another size): removed first, by the names and PIDs it recorded.
        self.stop(quiet=True)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.root.stat().st_uid != os.geteuid():
            raise SlurmClusterError(f"state dir {self.root} is not owned by uid {os.geteuid()}")
        for sub in ("ctld", "log", "run", *(f"spool/{n}" for n in self.nodes), "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").chmod(0o1777)
        self._write_munge_key()

        ctld_port = _free_port()
        self._install_conf(self.render_conf(ctld_port))
        self.state_file.write_text(json.dumps({"root": str(self.root), "conf": str(self.conf_path),
                                               "slurmctld_port": ctld_port, "nodes": self.nodes,
                                               "addresses": {n: self.node_addr(n) for n in self.nodes},
                                               "link": str(self.link) if self.link else None,
                                               "network": netns.leftover_record(self.nodes)}, indent=2))  # fmt: skip
        try:
            self._save_state(network=netns.create(self.nodes))
            if self.link is not None:
                netns.apply_link(self.nodes, self.link)
            self._start_munged()
            self._start_daemon(["slurmctld", "-f", str(self.conf_path)], "slurmctld")
            self._wait(
                lambda: self.run("scontrol", "ping", check=False, timeout=10).returncode == 0,
                t0,
                "slurmctld answers scontrol ping",
            )
            for n in self.nodes:
                self._start_slurmd(n)
            self._wait_idle(t0)
        except BaseException as e:
            diag = self._diagnostics()
            self.stop(quiet=True)
            if isinstance(e, NetworkError):
                raise SlurmClusterError(str(e)) from None
            raise SlurmClusterError(f"Slurm cluster failed to start:\n{diag}") from None
        self.started_at = time.time()
        self.startup_seconds = time.monotonic() - t0
        self._log(
            f"up in {self.startup_seconds:.1f}s: nodes {', '.join(self.nodes)} idle "
            f"({', '.join(self.node_addr(n) for n in self.nodes)}), links {self.link or 'unshaped'}, "
            f"conf {self.conf_path}, state {self.root}"
        )
        return self

    def _start_slurmd(self, node: str) -> None:
        exe = shutil.which("slurmd", path=_sbin_path()) or "slurmd"
        argv = [exe, "-f", str(self.node_conf(node)), "-N", node]
        self._start_daemon([*netns.node_prefix(node, self.root / "run"), *argv], f"slurmd.{node}")

    def _start_munged(self) -> None:
        m = self.munge_dir
        cmd = [
            "munged",
            f"--key-file={m / 'munge.key'}",
            f"--socket={self.munge_socket}",
            f"--pid-file={m / 'munged.pid'}",
            f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'munged.seed'}",
        ]
        self._start_daemon(cmd, "munged")
        self._wait(lambda: self.munge_socket.exists(), time.monotonic(), "munged socket", timeout=10)

    def _start_daemon(self, cmd: list[str], name: str) -> None:
        """Start a self-daemonizing program and wait for its pid file."""
        pidfile = self._pidfiles()[name]
        pidfile.unlink(missing_ok=True)
        exe = shutil.which(cmd[0], path=_sbin_path()) or cmd[0]
        r = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise SlurmClusterError(f"{name} exited {r.returncode}: {r.stdout}{r.stderr}")
        self._wait(lambda: _pid_alive(_read_pid(pidfile)), time.monotonic(), f"{name} pid file {pidfile}", timeout=15)

    def _wait(self, cond, t0: float, what: str, timeout: float | None = None) -> None:
        deadline = t0 + (timeout if timeout is not None else self.start_timeout)
        while True:
            if cond():
                return
            if time.monotonic() > deadline:
                raise SlurmClusterError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _wait_idle(self, t0: float, nodes=None) -> None:
        nodes = nodes or self.nodes

        def idle() -> bool:
            dead = [k for k, v in self.running_daemons().items() if v is None]
            if dead:
                raise SlurmClusterError(f"daemon(s) died: {', '.join(dead)}")
            states = self.node_states()
            return all(states.get(n, "").rstrip("*~#") == "idle" for n in nodes)

        self._wait(idle, t0, f"nodes {', '.join(nodes)} idle")

    def crash_node(self, node: str) -> list[int]:
        """What a node's sudden death looks like to the others: its link goes dead first (no FIN or RST reaches
        a peer, as with a power cut), then its slurmd and every process of its jobs are SIGKILLed.
        Returns the PIDs killed. ``restart_node`` brings it back."""
        ns = netns.node_ns(node)
        netns.set_link_state(node, up=False)
        pids = [p for p in netns.namespace_pids(ns) if p != os.getpid()]
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._log(f"node {node} crashed: link down, {len(pids)} processes killed")
        return pids

    def restart_node(self, node: str, timeout: float = 120) -> None:
        """A crashed node boots again: link up, a fresh slurmd; returns once Slurm has the node idle again."""
        netns.kill_namespace_processes([netns.node_ns(node)])
        netns.set_link_state(node, up=True)
        shutil.rmtree(self.root / "spool" / node, ignore_errors=True)
        (self.root / "spool" / node).mkdir(parents=True)
        self._start_slurmd(node)
        self._wait(lambda: self.node_states().get(node, "").rstrip("*~#") == "idle", time.monotonic(),
                   f"node {node} idle again", timeout=timeout)  # fmt: skip

    def restart(self, nodes: int | None = None) -> LocalSlurmCluster:
        """Stop, then start again (with `nodes` nodes when given), keeping the link shape."""
        self.stop()
        if nodes is not None:
            self.nodes = netns.node_names(read_nodes(nodes))
        return self.start()

    @contextmanager
    def resized(self, nodes: int):
        """``with cluster.resized(4): ...``: the cluster restarted with `nodes` nodes inside the block, then
        restarted with as many as before (jobs of either are lost)."""
        before = len(self.nodes)
        self.restart(nodes)
        try:
            yield self
        finally:
            self.restart(before)

    def stop(self, timeout: float = 20.0, quiet: bool = False) -> float:
        """Cancel all jobs, stop every daemon by pid, kill what is left in the nodes' namespaces by pid,
        remove the namespaces and links by name, restore /etc/slurm/slurm.conf, remove the state folder.

        Returns the seconds it took.  Safe to call when nothing runs, and after a killed cluster.
        """
        t0 = time.monotonic()
        state = self._load_state()
        nodes = state.get("nodes") or self.nodes
        pids = {name: (pid if _pid_alive(pid := _read_pid(path)) else None)
                for name, path in self._pidfiles(nodes).items()}  # fmt: skip
        if pids.get("slurmctld"):
            try:
                self.run("scancel", "--full", "--user", "root", check=False, timeout=15)
                # give running steps a moment to go away
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    r = self.run("squeue", "-h", "-t", "RUNNING,COMPLETING,PENDING,CONFIGURING", check=False,
                                 timeout=10)  # fmt: skip
                    if r.returncode != 0 or not r.stdout.strip():
                        break
                    time.sleep(0.2)
            except subprocess.TimeoutExpired:
                # slurmctld busy with an unreachable node (a crashed one): what is left is killed below
                self._log("scancel/squeue did not answer; stopping the daemons anyway")
        for pid in pids.values():  # slurmd first, munged last
            if pid:
                _terminate(pid, timeout)
        removed = netns.remove(state.get("network") or netns.leftover_record(nodes))
        self._restore_conf()
        self._remove_state_dir()
        took = time.monotonic() - t0
        if not quiet or any(pids.values()) or removed:
            self._log(f"stopped in {took:.1f}s (state dir {self.root}; removed {', '.join(removed) or 'no network'})")
        return took

    def _remove_state_dir(self) -> None:
        """Everything this cluster wrote in its state folder, then the folder if nothing else is in it."""
        for sub in ("ctld", "spool", "tmp", "log", "run", "munge"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        for f in (self.local_conf, self.state_file, *self.root.glob("slurm.n*.conf")):
            f.unlink(missing_ok=True)
        try:
            self.root.rmdir()
        except OSError:
            pass

    def status(self) -> dict:
        d = {"state_dir": str(self.root), "daemons": self.running_daemons(), **self._load_state()}
        d["node_states"] = self.node_states() if d["daemons"].get("slurmctld") else {}
        return d

    def __enter__(self) -> LocalSlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _pid_alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------- CLI


def running_cluster() -> LocalSlurmCluster | None:
    """The test cluster whose slurm.conf is installed, if its daemons run (for benchmarks that reuse it)."""
    try:
        first = SYSTEM_CONF.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    if first.startswith(MARKER):
        cluster = LocalSlurmCluster(first[len(MARKER):].strip(), install=False)
        return cluster if cluster.is_running() else None
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m movebench_testcluster",
        description="A Slurm test cluster whose nodes are network namespaces (docs/notes/slurm-test-cluster.md).",
    )
    p.add_argument("action", choices=["up", "down", "status", "install"])
    p.add_argument("--dir", default=None, help="state directory (default $MOVEBENCH_SLURM_DIR or /tmp/movebench-slurm)")
    p.add_argument("--nodes", default=None, help=f"number of nodes n1..nN (default {DEFAULT_NODES})")
    p.add_argument("--link", default=None, help=f"shape every node's link: {netns.LINK_HELP}; \"\" unshaped "
                   "(default: as the running cluster has it)")
    p.add_argument("--cpus-per-node", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the nodes to become idle")
    a = p.parse_args(argv)
    try:
        nodes = None if a.nodes in (None, "") else read_nodes(a.nodes)
        c = LocalSlurmCluster(a.dir, nodes=nodes, link=a.link, cpus_per_node=a.cpus_per_node,
                              start_timeout=a.timeout)  # fmt: skip
        if a.action == "install":
            print("installed" if ensure_installed() else "already installed")
        elif a.action == "up":
            c.start()
            hosts = ", ".join(f"{n} {c.node_addr(n)}" for n in c.nodes)
            took = "(already running)" if c.startup_seconds is None else f"in {c.startup_seconds:.1f} s"
            print(f"Slurm cluster up {took}: nodes {hosts}; links {c.link or 'unshaped'}; "
                  f"partition {PARTITION}, conf {c.conf_path}, state {c.root}")  # fmt: skip
            print(f"on a node: nsenter -t $(cat {c.root}/run/slurmd.n1.pid) -n -u -i -m -- hostname")
            print(f"stop it with: python -m movebench_testcluster down --dir {c.root}")
        elif a.action == "down":
            print(f"Slurm cluster down in {c.stop():.1f} s")
        else:
            st = c.status()
            print(json.dumps(st, indent=2))
            return 0 if all(st["daemons"].values()) else 3
    except (SlurmClusterError, NetworkError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
