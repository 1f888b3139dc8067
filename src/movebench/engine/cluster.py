"""The Slurm side of a campaign: what a point job asks for, what the campaign costs, and a check first.

- `time_limit_minutes`: the time limit of a point job (the rules' `runtime` resource); `group_time_limit_minutes`: a
  launch group's, from its members' planned seconds.
- `plan_jobs` / `format_plan`: the Slurm jobs, nodes and node-hours a campaign asks for, from the
  grid, before anything is submitted (`python -m movebench plan`, `make plan`).
- `preflight`: run by the Snakefile's `onstart` under the slurm executor. It stops the run before the
  first submission when the cluster cannot answer what the executor will ask it, instead of letting
  Snakemake poll for ever: a status command that cannot see finished jobs, a point bigger than its
  partition, a point rule without the `mpi` resource.
- `job_environment` / `allocation_env`: the allocation's node count and list, which the executor's job step removes
  from the environment of every rule (with every other `SLURM_*` variable but the job id), read
  back from `scontrol` for launchers that need them (`dragon`, Hydra's `mpiexec -launcher slurm`).
- `allocation_capacity` / `allocation_info`: the allocation the campaign runs in under
  `--profile allocation` (snakemake started inside `salloc`/`sbatch`), for admission and the meta.

Facts of snakemake-executor-plugin-slurm 2.x this relies on (see docs/slurm.md):
- A job that the status command does not list is assumed to be "not yet visible" and polled
  again, for ever. `sacct` without slurmdbd fails on every poll: the same.
- `squeue` lists a finished job for `MinJobAge` seconds only; the plugin waits up to 180 s between
  two polls. It swaps `squeue` for `sacct` by itself when `MinJobAge` < 3 x the first interval
  and `sacct` exists, and `sacct` for `squeue` when `sacct` is not installed.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass

#: The plugin's longest wait between two status polls (max_sleep_time in its check_active_jobs).
POLL_CAP_S = 180
#: The plugin's default first interval before status checks (init_seconds_before_status_checks).
DEFAULT_INIT_INTERVAL_S = 40


def cap_status_polls() -> bool:
    """Make the Slurm executor poll job states at least every --seconds-between-status-checks seconds.

    The plugin (2.x, check_active_jobs) lengthens its wait by 10 s after every poll in which no job finished, up to
    POLL_CAP_S, whatever --seconds-between-status-checks says (snakemake-executor-plugin-slurm#319). With a
    campaign's one point job at a time, a point of a minute was seen ending 30 s late, and the next point waited as
    long (docs/notes/slurm.md). The interval is read when the plugin sets its wait: a Snakefile is read before the
    run's settings are known. False where the plugin is not installed, or once it is done."""
    try:
        from snakemake_executor_plugin_slurm import Executor
    except ImportError:
        return False
    inherited = Executor.next_seconds_between_status_checks
    if not isinstance(inherited, property) or getattr(inherited.fset, "capped", False):
        return False
    plain = inherited.fset

    def capped(self, value):
        limit = getattr(getattr(self.workflow, "remote_execution_settings", None), "seconds_between_status_checks",
                        None)
        plain(self, value if value is None or not limit else min(value, limit))

    capped.capped = True
    Executor.next_seconds_between_status_checks = property(inherited.fget, capped)
    return True


def time_limit_minutes(campaign: dict) -> int:
    """Slurm time limit of one point: the point's kill timeout in whole minutes, plus one for start and clean-up."""
    return max(1, math.ceil(campaign["timeout"] / 60) + 1)


#: A launch group's job may run this many times its members' planned seconds (Family.planned_seconds), plus one
#: point's limit: the launch's start and end, and room for one member to run to campaign.timeout.
GROUP_PLANNED_MARGIN = 2.0


def group_time_limit_minutes(campaign: dict, planned_seconds: list[float]) -> int:
    """Slurm time limit of a launch group's job, from its members' planned seconds: GROUP_PLANNED_MARGIN times
    their sum plus one point's limit, and never more than the members' own limits added up (a group of one is
    a point). campaign.timeout stays each point's limit."""
    one = time_limit_minutes(campaign)
    planned = math.ceil(GROUP_PLANNED_MARGIN * sum(planned_seconds) / 60)
    return min(one * len(planned_seconds), one + planned)


# --------------------------------------------------------------------------- plan


@dataclass
class PlannedJob:
    """One Slurm job of the campaign: one point, or a group of points packed into one allocation."""

    family: str
    points: int
    nodes: int
    time_limit_min: int
    to_run: int
    #: a launch group's job (its limit from its members' planned seconds), not a point's
    grouped: bool = False

    @property
    def node_hours(self) -> float:
        return self.nodes * self.time_limit_min / 60


def _layers(points: list[tuple[int, int]], max_nodes: int | None, max_points: int | None) -> tuple[int, int]:
    """(nodes, time limit) of a group of (nodes, time limit) points, as Snakemake sizes a group job.

    Snakemake fits the group's independent jobs into layers that respect the global `--resources`
    (here nodes, and benchmark_slots: one per point), asks for the widest layer, and adds up the
    layers' time limits. Without limits every point is in one layer: nodes add up, the time limit is the longest.
    """
    layers: list[list[tuple[int, int]]] = []
    for nodes, limit in sorted(points, key=lambda p: (-p[0], -p[1])):
        for layer in layers:
            fits_nodes = max_nodes is None or sum(n for n, _ in layer) + nodes <= max_nodes
            fits_slots = max_points is None or len(layer) < max_points
            if fits_nodes and fits_slots:
                layer.append((nodes, limit))
                break
        else:
            layers.append([(nodes, limit)])
    return max(sum(n for n, _ in layer) for layer in layers), sum(max(r for _, r in layer) for layer in layers)


def plan_jobs(
    grid: dict[str, list[dict]],
    families: dict,
    campaign: dict,
    *,
    done=lambda family, point: False,
    group_components: dict[str, int] | None = None,
    resources: dict[str, int] | None = None,
    time_limit_override: dict[str, int] | None = None,
    launch_groups: dict[str, list[list[dict]]] | None = None,
    planned=lambda family, entry: 0.0,
) -> list[PlannedJob]:
    """The Slurm jobs of a campaign, in grid order.

    `group_components` (family -> points per job) packs each family's points N at a time, as
    `--group-components <family>=N` does with the point rules' group (named after the family);
    `resources` are Snakemake's global `--resources` (nodes, benchmark_slots) that decide how a
    group's points share its allocation. `time_limit_override` (family -> minutes) is what a profile's
    `set-resources: <family>_point: runtime:` asks instead of the campaign's timeout. `done(family,
    point)` says whether a point's records exist already: those are listed but need no job.
    `launch_groups` (family -> its launch groups, each a list of `grid` entries) makes each group one job that
    measures its members one after another; its limit is `group_time_limit_minutes` of the members still to run
    (`planned(family, entry)`: a member's planned seconds), as the workflow forms a group of those alone.
    """
    group_components = group_components or {}
    resources = resources or {}
    time_limit_override = time_limit_override or {}
    jobs = []
    for name, points in grid.items():
        fam = families[name]
        limit = int(time_limit_override.get(name, time_limit_minutes(campaign)))
        if name in (launch_groups or {}):
            for members in launch_groups[name]:
                todo = [p for p in members if not done(name, p)]
                nodes = max(fam.placement(p)[1] for p in members)
                minutes = group_time_limit_minutes(campaign, [planned(name, p) for p in (todo or members)])
                jobs.append(PlannedJob(name, len(members), nodes, minutes, len(todo), grouped=True))
            continue
        per_job = max(1, int(group_components.get(name, 1)))
        for start in range(0, len(points), per_job):
            chunk = points[start : start + per_job]
            todo = [p for p in chunk if not done(name, p)]
            sized = [(fam.placement(p)[1], limit) for p in (todo or chunk)]
            nodes, minutes = _layers(sized, resources.get("nodes"), resources.get("benchmark_slots"))
            jobs.append(PlannedJob(name, len(chunk), nodes, minutes, len(todo)))
    return jobs


def format_plan(jobs: list[PlannedJob], campaign: dict) -> str:
    header = f"{'family':10s} {'points':>7s} {'jobs':>6s} {'nodes/job':>10s} {'to run':>7s} {'node-hours':>11s}"
    lines = [header]
    families = list(dict.fromkeys(j.family for j in jobs))
    total_nh = total_todo_nh = 0.0
    for name in families:
        mine = [j for j in jobs if j.family == name]
        sizes = sorted({j.nodes for j in mine})
        nodes = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        todo = [j for j in mine if j.to_run]
        nh = sum(j.node_hours for j in mine)
        total_nh += nh
        total_todo_nh += sum(j.node_hours for j in todo)
        points = sum(j.points for j in mine)
        lines.append(f"{name:10s} {points:7d} {len(mine):6d} {nodes:>10s} {len(todo):7d} {nh:11.2f}")
    todo_jobs = [j for j in jobs if j.to_run]
    lines.append(
        f"{'total':10s} {sum(j.points for j in jobs):7d} {len(jobs):6d} "
        f"{max((j.nodes for j in jobs), default=0):10d} {len(todo_jobs):7d} {total_nh:11.2f}"
    )
    lines.append("")
    lines.append(
        f"node-hours = nodes x time limit per job, as reserved (sites usually charge the elapsed time, "
        f"less); a point's limit is campaign.timeout = {campaign['timeout']:g} s -> "
        f"{time_limit_minutes(campaign)} min."
    )
    grouped = [j for j in jobs if j.grouped]
    if grouped:
        lows, highs = min(j.time_limit_min for j in grouped), max(j.time_limit_min for j in grouped)
        lines.append(
            f"a launch group's limit: {GROUP_PLANNED_MARGIN:g} x its members' planned seconds + one point's limit = "
            + (f"{lows}" if lows == highs else f"{lows}-{highs}") + " min here (the Slurm -t); launch stops a point "
            "at campaign.timeout, in a launch group too (each member's from the previous one's finish)."
        )
    if len(todo_jobs) != len(jobs):
        lines.append(f"still to run: {len(todo_jobs)} jobs, {total_todo_nh:.2f} node-hours (the others have records).")
    lines.append("aggregate and report run where snakemake runs: no Slurm job.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- preflight


def _run(argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no answer within {timeout:g} s")


def _first_error(proc: subprocess.CompletedProcess) -> str:
    text = (proc.stderr or proc.stdout or "").strip().splitlines()
    return text[-1] if text else f"exit status {proc.returncode}"


def min_job_age_s(config_text: str) -> int | None:
    """MinJobAge from `scontrol show config` ("MinJobAge = 300 sec")."""
    m = re.search(r"^MinJobAge\s*=\s*(\d+)", config_text, re.MULTILINE)
    return int(m.group(1)) if m else None


def partitions(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show partition -o`: one line per partition of Key=Value fields."""
    parts = {}
    for line in text.splitlines():
        fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if "PartitionName" in fields:
            parts[fields["PartitionName"]] = fields
    return parts


def slurm_minutes(text: str) -> float | None:
    """A Slurm time limit ("UNLIMITED", "30", "1:00:00", "2-00:00:00") in minutes; None when unlimited."""
    if text in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if len(parts) == 1:
        minutes = parts[0]
    elif len(parts) == 2:
        minutes = parts[0] + parts[1] / 60
    else:
        minutes = parts[0] * 60 + parts[1] + parts[2] / 60
    return minutes + (int(days) * 1440 if days else 0)


def effective_status_command(
    asked: str | None, init_interval_s: float, min_job_age: int | None, sacct_installed: bool
) -> str:
    """The command the plugin will really poll with (it overrides the setting in two cases)."""
    command = asked or ("sacct" if sacct_installed else "squeue")
    if command == "squeue" and (min_job_age is None or min_job_age < 3 * init_interval_s) and sacct_installed:
        command = "sacct"
    if command == "sacct" and not sacct_installed:
        command = "squeue"
    return command


def preflight(executor_settings, point_jobs: list[tuple[str, dict]], run=_run) -> list[str]:
    """Problems that would make the slurm executor fail late or poll for ever; empty when all is well.

    `point_jobs`: (family, resources) of every point job about to be submitted.
    """
    problems = []
    parts_proc = run(["scontrol", "show", "partition", "-o"])
    if parts_proc.returncode != 0:
        return [
            f"no Slurm controller answers here (`scontrol show partition`: {_first_error(parts_proc)}). "
            "Run snakemake on a login node of the cluster, or start the test cluster (make slurm-up)."
        ]
    parts = partitions(parts_proc.stdout)

    init = getattr(executor_settings, "init_seconds_before_status_checks", None) or DEFAULT_INIT_INTERVAL_S
    asked = getattr(executor_settings, "status_command", None)
    config_proc = run(["scontrol", "show", "config"])
    min_age = min_job_age_s(config_proc.stdout) if config_proc.returncode == 0 else None
    sacct_installed = shutil.which("sacct") is not None
    command = effective_status_command(asked, init, min_age, sacct_installed)
    if command == "sacct":
        sacct = run(["sacct", "--noheader", "-X", "--format=JobID", "--jobs=1"])
        if sacct.returncode != 0:
            fix = (
                "set `slurm-status-command: squeue` in the profile or on the command line "
                f"(`--slurm-status-command squeue`): MinJobAge is {min_age} s here, which is enough"
                if min_age is not None and min_age > POLL_CAP_S and min_age >= 3 * init
                else f"ask the admins for job accounting (slurmdbd), or for MinJobAge > {POLL_CAP_S} s so that "
                "`--slurm-status-command squeue` can be used (MinJobAge is "
                f"{min_age if min_age is not None else 'unknown'} s here)"
            )
            why = "" if asked == "sacct" else f" (asked: {asked}, but MinJobAge {min_age} s < 3 x {init:g} s)"
            problems.append(
                f"job status: the slurm executor would poll with sacct{why}, which fails here "
                f"({_first_error(sacct)}), and wait for its jobs for ever. Fix: {fix}."
            )
    elif min_age is not None and min_age <= POLL_CAP_S:
        problems.append(
            f"job status: squeue forgets a finished job after MinJobAge = {min_age} s, and the slurm "
            f"executor may wait up to {POLL_CAP_S} s between two polls: a job that finished in between "
            "is polled for ever. Fix: job accounting (slurmdbd) and `slurm-status-command: sacct`, or "
            f"MinJobAge > {POLL_CAP_S} s."
        )

    default = next((name for name, p in parts.items() if p.get("Default") == "YES"), None)
    reported = set()
    for family, res in point_jobs:
        if "mpi" not in res and family not in reported:
            reported.add(family)
            problems.append(
                f"{family}_point has no `mpi` resource: the executor would wrap the point in "
                "`srun -n 1` and the ranks would not spread over the job's nodes. The slurm profile "
                "sets it in default-resources; a `--default-resources` on the command line replaces "
                'that whole list: repeat it there (mpi="srun --mpi=pmi2 -N {nodes} -n {ranks}") or '
                "use --set-resources for the partition and account."
            )
        partition = res.get("slurm_partition") or default
        if partition not in parts:
            if (family, "partition") not in reported:
                reported.add((family, "partition"))
                problems.append(
                    f"{family} points: partition {partition!r} does not exist here "
                    f"(partitions: {', '.join(parts) or 'none'})."
                )
            continue
        info = parts[partition]
        total = int(info.get("TotalNodes", "0") or 0)
        max_nodes = info.get("MaxNodes", "UNLIMITED")
        limit = total if max_nodes in ("UNLIMITED", "") else min(total, int(max_nodes))
        nodes = int(res.get("nodes", 1) or 1)
        if nodes > limit and (family, "nodes", nodes) not in reported:
            reported.add((family, "nodes", nodes))
            problems.append(
                f"{family}.nodes = {nodes}: partition {partition} gives a job at most {limit} nodes "
                f"(TotalNodes={total}, MaxNodes={max_nodes}); such a job would wait for ever."
            )
        max_time = slurm_minutes(info.get("MaxTime", "UNLIMITED"))
        limit = res.get("runtime")
        if (
            max_time is not None
            and isinstance(limit, (int, float))
            and limit > max_time
            and (family, "runtime") not in reported
        ):
            reported.add((family, "runtime"))
            problems.append(
                f"campaign.timeout: {family} points ask for {limit} min but partition {partition} "
                f"allows {max_time:g} min (MaxTime); lower campaign.timeout or choose another partition."
            )
    return problems


def preflight_message(problems: list[str]) -> str:
    noun = "problem" if len(problems) == 1 else "problems"
    return (
        f"movebench: the Slurm cluster cannot run this campaign as configured ({len(problems)} {noun}); "
        "nothing was submitted:\n" + "\n".join(f"  - {p}" for p in problems)
    )


def _mebibytes(text: str | None) -> int | None:
    """Slurm's memory fields are MiB ("RealMemory=64000", "MaxMemPerNode=UNLIMITED")."""
    try:
        return int(str(text).rstrip("M")) * 2**20
    except ValueError:
        return None


def partition_capacity(partition: str | None, run=_run):
    """A node of `partition` (the default one when None) as admission sees it, or None when Slurm cannot tell.

    Memory: the smallest RealMemory of the partition's nodes (`scontrol show node -o`), capped by the
    partition's MaxMemPerNode; cores: the smallest CPUTot. A point's job asks for its own memory with
    mem_mb; this is the most any job of the partition can get on one node.
    """
    from movebench.engine.admission import Capacity

    parts_proc = run(["scontrol", "show", "partition", "-o"])
    nodes_proc = run(["scontrol", "show", "node", "-o"])
    if parts_proc.returncode != 0 or nodes_proc.returncode != 0:
        return None
    parts = partitions(parts_proc.stdout)
    name = partition or next((n for n, p in parts.items() if p.get("Default") == "YES"), None)
    if name not in parts:
        return None
    memories, cores = [], []
    for line in nodes_proc.stdout.splitlines():
        fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if name in fields.get("Partitions", "").split(","):
            if _mebibytes(fields.get("RealMemory")):
                memories.append(_mebibytes(fields["RealMemory"]))
            if fields.get("CPUTot", "").isdigit():
                cores.append(int(fields["CPUTot"]))
    memory = min(memories) if memories else None
    cap = _mebibytes(parts[name].get("MaxMemPerNode"))
    source = "RealMemory"
    if cap is not None and (memory is None or cap < memory):
        memory, source = cap, "MaxMemPerNode"
    return Capacity(where=f"Slurm partition {name}", memory_bytes=memory, memory_source=source,
                    cores=min(cores) if cores else None, max_nodes=None, local_storage=False)


# --------------------------------------------------------------------------- inside a job


def job_environment(environ: dict, run=_run) -> tuple[dict, dict | None]:
    """A point's environment inside a Slurm job, and the allocation it runs in ({job_id, nodes, nodelist}).

    Under Snakemake's slurm executor the job step hid the allocation's nodes, which dragon and Hydra need
    (`allocation_env`). Points of one campaign may share one allocation (job groups, --profile allocation) and
    are compared knowing that. Outside a job: `environ` as it is, and None."""
    if "SLURM_JOB_ID" not in environ:
        return environ, None
    environ = {**environ, **allocation_env(environ, run)}
    return environ, allocation_info(environ, run)


def allocation_env(environ: dict, run=_run) -> dict[str, str]:
    """SLURM_JOB_NUM_NODES and SLURM_JOB_NODELIST of the job we are in, when the job step removed them.

    Empty outside a Slurm job, or when they are there already, or when scontrol cannot tell.
    """
    job = environ.get("SLURM_JOB_ID")
    if not job or ("SLURM_JOB_NUM_NODES" in environ and "SLURM_JOB_NODELIST" in environ):
        return {}
    proc = run(["scontrol", "show", "job", "-o", job])
    if proc.returncode != 0:
        return {}
    fields = dict(tok.split("=", 1) for tok in proc.stdout.split() if "=" in tok)
    if "NumNodes" not in fields or "NodeList" not in fields:
        return {}
    return {"SLURM_JOB_NUM_NODES": fields["NumNodes"].split("-")[0], "SLURM_JOB_NODELIST": fields["NodeList"]}


# --------------------------------------------------------------------------- one allocation (profiles/allocation)

#: What `--profile allocation` outside a Slurm job says: its points' `srun` steps would each queue a job of their own
#: (or fail), which is the slurm profile's work, done without its preflight.
NO_ALLOCATION = ("movebench: --profile allocation runs every point inside the Slurm allocation snakemake is started "
                 "in, and there is none here (no SLURM_JOB_ID): run it inside salloc/sbatch (salloc -N 4 "
                 "snakemake --profile allocation, or make sbatch NODES=4 TIME=1:00:00), or use --profile slurm")


def _fields(text: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in text.split() if "=" in tok)


def _job_fields(job: str, run=_run) -> dict[str, str]:
    proc = run(["scontrol", "show", "job", "-o", job])
    return _fields(proc.stdout) if proc.returncode == 0 else {}


def _cpus_per_node(text: str) -> list[int]:
    """SLURM_JOB_CPUS_PER_NODE ("32(x2),16") as one count per node group."""
    counts = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x\d+\))?", part.strip())
        if m:
            counts.append(int(m.group(1)))
    return counts


def allocation_info(environ: dict, run=_run) -> dict | None:
    """{job_id, nodes, nodelist} of the allocation `environ` is in; None outside one.

    The environment first (salloc and sbatch set SLURM_JOB_NUM_NODES, or the older SLURM_NNODES); the job
    step of Snakemake's slurm executor removes them, and then scontrol says.
    """
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return None
    nodes = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES")
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not (nodes and nodelist):
        fields = _job_fields(job, run)
        nodes = nodes or fields.get("NumNodes", "").split("-")[0] or None
        nodelist = nodelist or fields.get("NodeList")
    return {"job_id": job, "nodes": int(nodes) if nodes and nodes.isdigit() else None, "nodelist": nodelist}


def allocation_capacity(environ: dict, run=_run):
    """A node of the allocation `environ` is in, as admission sees it; None outside an allocation.

    Nodes: the allocation's (a point on more can never run in it). Cores: SLURM_CPUS_ON_NODE (sbatch's
    batch node), else the fewest of SLURM_JOB_CPUS_PER_NODE (salloc), else scontrol's NumCPUs / NumNodes.
    Memory: SLURM_MEM_PER_NODE (the job asked --mem), else the smallest RealMemory of its nodes: without
    --mem a job may use a whole node's memory where the site tracks memory at all.
    """
    from movebench.engine.admission import Capacity

    info = allocation_info(environ, run)
    if info is None:
        return None
    cores = None
    if (environ.get("SLURM_CPUS_ON_NODE") or "").isdigit():
        cores = int(environ["SLURM_CPUS_ON_NODE"])
    elif _cpus_per_node(environ.get("SLURM_JOB_CPUS_PER_NODE", "")):
        cores = min(_cpus_per_node(environ["SLURM_JOB_CPUS_PER_NODE"]))
    else:
        fields = _job_fields(info["job_id"], run)
        if fields.get("NumCPUs", "").isdigit() and info["nodes"]:
            cores = int(fields["NumCPUs"]) // info["nodes"]
    memory, source = None, "RealMemory"
    if (environ.get("SLURM_MEM_PER_NODE") or "").isdigit():
        memory, source = int(environ["SLURM_MEM_PER_NODE"]) * 2**20, "SLURM_MEM_PER_NODE"
    elif info["nodelist"]:
        proc = run(["scontrol", "show", "node", "-o", info["nodelist"]])
        if proc.returncode == 0:
            sizes = [_mebibytes(_fields(line).get("RealMemory")) for line in proc.stdout.splitlines()]
            sizes = [size for size in sizes if size]
            memory = min(sizes) if sizes else None
    count = info["nodes"]
    where = f"Slurm allocation {info['job_id']} ({count} node{'s' if count != 1 else ''}: {info['nodelist']})"
    return Capacity(where=where, memory_bytes=memory, memory_source=source, cores=cores, max_nodes=count,
                    local_storage=False, allocation=True)
