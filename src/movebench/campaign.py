"""What the Snakefile needs beyond its rules: job environment, point rule inputs, the run's start and end.

Everything here runs inside plain `snakemake`, so that `snakemake --profile local` does all that
`make run` does: the services a campaign needs (Azurite for blob points on the emulator) start in
`onstart` and stop in `onsuccess`/`onerror`, and the run's wall time lands in
`results/campaign_run.json` for `python -m movebench efficiency`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from movebench import families
from movebench.core import envinfo, records, sources
from movebench.core.layout import ResultsLayout
from movebench.core.task import Task, launch_digest, point_path_of
from movebench.engine import admission, cluster, launchers, machine, stacks
from movebench.services import hold

PACKAGE = Path(__file__).resolve().parent
#: Shared code every point runs through: its change reruns every point (families add their kernel files).
# the shared measuring code: the buffers' memory (core/memory.py) and the persistent streams (core/p2p.py) are
# part of what a figure measures
RUNNER_SOURCES = ("engine/launch.py", "engine/launchers/__init__.py", "engine/launchers/process.py", "core/task.py",
                  "core/runner.py", "core/records.py", "core/timing.py", "core/adaptive.py", "core/memory.py",
                  "core/p2p.py")


def validate(config: dict, warn=None) -> dict:
    """The campaign validated whole: the config's own checks, and the keys of the verdicts (compare_to,
    compare_noise_from, compare_thresholds, references) that the report layer owns. Raises ConfigError."""
    from movebench.engine import config as campaign_config
    from movebench.judging import report_verdicts
    from movebench.judging.history import store

    return campaign_config.validate(config, warn, checks=(report_verdicts.config_problems, store.config_problems))


def launch_order_seed(campaign: dict) -> int:
    """The seed of the launches' order: the campaign's, else one drawn for this run (recorded either way)."""
    seed = campaign.get("launch_order_seed")
    return int(seed) if seed is not None else random.SystemRandom().randrange(2**31)


#: Overrides campaign.disturbed.other_cpus of every campaign run from this environment.
DISTURBED_OVERRIDE_ENV = "MOVEBENCH_DISTURBED_OTHER_CPUS"


def job_environment(config: dict, launch_order_seed: int | None = None) -> dict[str, str]:
    """Variables point jobs inherit from snakemake: this Python's bin first on PATH, the config's hash, the seed of
    the launches' order."""
    here = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    env = {"MOVEBENCH_CONFIG_HASH": envinfo.config_hash(config), "MOVEBENCH_CAMPAIGN": config["campaign"]["name"],
           # looked up once here rather than in every point (0.1-0.2 s each: docs/notes/kernels.md, fixed cost)
           "MOVEBENCH_GIT_COMMIT": envinfo.git_commit() or "",
           "MOVEBENCH_PACKAGES": json.dumps(envinfo.package_versions())}
    if launch_order_seed is not None:
        env["MOVEBENCH_LAUNCH_ORDER_SEED"] = str(launch_order_seed)
    # launch's DisturbedPolicy; the ledger of retries is the run's, beside its results
    disturbed = dict(config["campaign"].get("disturbed") or {})
    if os.environ.get(DISTURBED_OVERRIDE_ENV):
        # a host whose outside load is expected and not the campaign's concern (the test suite's own runs)
        disturbed["other_cpus"] = float(os.environ[DISTURBED_OVERRIDE_ENV])
    results = Path(config["campaign"].get("results_dir", "results")).resolve()
    disturbed["ledger"] = str(ResultsLayout(results).retry_ledger)
    env["MOVEBENCH_DISTURBED"] = json.dumps(disturbed)
    if path.split(os.pathsep)[0] != here:
        env["PATH"] = os.pathsep.join([here, path]) if path else here
    return env


def kernel_sources(family: str) -> list[str]:
    """The files whose change reruns a family's points: its kernel files, its runtime's module, the shared runner."""
    folder, fam = families.folder(family), families.load(family)
    own = sorted(str(p.resolve()) for pattern in fam.kernel_sources for p in folder.glob(pattern))
    return own + [str(launchers.of_family(family).source)] + [str(PACKAGE / name) for name in RUNNER_SOURCES]


def report_sources(family_names) -> list[Path]:
    """The files whose change reruns the report: every module the report imports, and those its families' report
    hooks import, read from the source (core.sources), so that no hand-kept list can miss one."""
    return _sources(["movebench.judging.report", *(f"{families.__name__}.{name}.report" for name in family_names)])


def aggregate_sources(family: str) -> list[Path]:
    """The files whose change recomputes a family's tables: what aggregate imports, and the family's spec and report
    hooks with what they import."""
    return _sources(["movebench.engine.aggregate", f"{families.__name__}.{family}",
                     f"{families.__name__}.{family}.report"])


def _sources(roots: list[str]) -> list[Path]:
    return sources.closure(roots, {families.__name__: [Path(p) for p in families.__path__]})


def sources_digest(family: str) -> str:
    """The digest of a family's kernel sources' contents (launch keeps it in each meta's `launched_as`)."""
    digest = hashlib.sha256()
    for path in kernel_sources(family):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:20]


def measured_launches(config: dict, tasks: dict, digests: dict[str, str], root: Path | None = None
                      ) -> set[tuple[str, str]]:
    """(family, launch path) of the launches of the families in `digests` (family -> `sources_digest`, the kernel
    sources now) whose records stand: records and meta there, and the meta's `launched_as` the digest of the task
    planned now and of those sources. They join no launch
    group (plan.launch_groups), so a run measures only the others, and no job deletes their files; a launch
    whose task or kernel changed is measured again, as Snakemake's own triggers would have it. A relative
    results_dir is under `root` (default: here, the workflow's working directory)."""
    layout = ResultsLayout.of(config, root)
    measured = set()
    for family, digest in digests.items():
        for path, task in tasks.get(family, {}).items():
            meta = layout.meta(family, path)
            if not layout.records(family, path).exists():
                continue
            try:
                launched_as = json.loads(meta.read_text()).get("launched_as")
            except (OSError, ValueError, AttributeError):
                continue
            if launched_as == launch_digest(task, digest):
                measured.add((family, path))
    return measured


def default_resources(workflow) -> dict[str, str]:
    """The profile's default resources as written (name -> text, unquoted): Snakemake keeps a string resource as a
    function of the rule until a job evaluates it, but its text is what the profile and a cluster job's command
    line carry."""
    resources = getattr(workflow.resource_settings, "default_resources", None)
    if resources is None:
        return {}
    items = resources.args if hasattr(resources, "args") else [f"{k}={v}" for k, v in dict(resources).items()]
    return {name: value.strip("'\"") for name, value in (str(item).split("=", 1) for item in items if "=" in str(item))}


def executor_of(default_resources: dict) -> str:
    """Where a profile runs the points, read from its default resources, which a dry run and a cluster job (that
    reads the workflow again) see as the submit host does: "allocation" (profiles/allocation), "slurm" (an srun
    launcher: profiles/slurm), else "local"."""
    if "allocation" in default_resources:
        return "allocation"
    return "slurm" if str(default_resources.get("mpi", "")).startswith("srun") else "local"


def leave_out_unreachable(config: dict, grid: dict, executor: str) -> tuple[dict, list[str]]:
    """Under Slurm: the grid less the points that need a service this workflow would start on the submit host's
    127.0.0.1 (io's blob points on Azurite), which the compute nodes cannot reach, and one line per family saying
    so and how to include them. Elsewhere the grid as it is."""
    if executor != "slurm":
        return grid, []
    kept, lines = {}, []
    for family, points in grid.items():
        fam = families.load(family)
        if fam.services(config[family], config["campaign"], points) is None:
            kept[family] = points
            continue
        out = [p for p in points if fam.service_needed(p)]
        rest = [p for p in points if not fam.service_needed(p)]
        if rest:
            kept[family] = rest
        lines.append(f"movebench: {family}: {len(out)} points left out under Slurm (e.g. {families.point_path(out[0])}"
                     "): they need a service this workflow starts on the submit host's 127.0.0.1, out of the compute "
                     "nodes' reach; to include them run them with --profile local, or give them a service the nodes "
                     "reach (docs/slurm.md, \"Points left out\")")
    return kept, lines


def task_of(tasks: dict, family: str, path: str) -> Task:
    """The task of the point at `path`; a path outside the campaign's grid is a clear error."""
    try:
        return tasks[family][path]
    except KeyError:
        raise ValueError(f"{family} point {path!r} is not in the campaign's grid (config: {family} section); "
                         "ask for results/report.html or a point the config sweeps") from None


#: set by `python -m movebench run --dry-run`, which says the verdict itself (and fails on it)
DRY_RUN_VERDICT_ENV = "MOVEBENCH_DRY_RUN_VERDICT"


def pending_points(config: dict, tasks: dict, root: Path | None = None) -> dict[str, list[dict]]:
    """Family -> the points with a launch whose records are missing: what a run would measure, from the files
    alone (what a dry run or a plan can know before Snakemake's DAG)."""
    layout = ResultsLayout.of(config, root)
    todo: dict[str, list[dict]] = {}
    for family, by_path in tasks.items():
        for path, task in by_path.items():
            if not layout.records(family, path).exists() and task.point not in todo.setdefault(family, []):
                todo[family].append(task.point)
    return {family: points for family, points in todo.items() if points}


def refusal(config: dict, tasks: dict, executor: str, partition: str | None = None,
            root: Path | None = None) -> str | None:
    """What admission (in the real run's onstart) would refuse of the points still to run, as its message; None
    when everything fits or, under Slurm, when `scontrol` cannot tell (the real run then decides)."""
    if executor == "allocation":
        capacity = cluster.allocation_capacity(os.environ)
    else:
        capacity = admission.local_capacity() if executor == "local" else cluster.partition_capacity(partition)
    if capacity is None:
        return None
    todo = pending_points(config, tasks, root)
    lines = admission.problems(config, todo, capacity)
    if executor == "allocation":
        lines += off_allocation(todo, os.environ)
    return admission.message(lines, capacity) if lines else None


def allocation_profile(workflow) -> bool:
    """Whether this run is `--profile allocation`: the local executor, with the profile's `allocation` resource."""
    executor = workflow.executor_plugin.name if workflow.executor_plugin is not None else "local"
    defaults = workflow.resource_settings.default_resources
    return executor == "local" and defaults is not None and "allocation" in defaults


def drop_default_rate_limit(scheduler) -> str | None:
    """Remove Snakemake's default job rate limit (100 jobs in 1 s) from its scheduler before the first
    pass; a limit the user set is kept. The limit in force afterwards, as "N/Ts", or None.

    At that limit every scheduling pass starts a timer for another pass one timespan later, and each
    finished job adds such a chain: on the default campaign the scheduler used 50-75% of a core all
    run long, next to the benchmark (docs/architecture.md, "The scheduler"). A long timespan in the
    profiles is no way out: the timers are not daemon threads, and snakemake waits for the last one
    before it exits. Snakemake offers no setting for "no limit", and builds the limiter before the
    Snakefile's onstart, hence this. One point runs at a time, and sbatch paces its submissions."""
    limiter = getattr(scheduler, "job_rate_limiter", None)
    if limiter is None:
        return None
    if (limiter.max_jobs, float(limiter.timespan)) == (100, 1.0):
        scheduler.job_rate_limiter = None
        return None
    return f"{limiter.max_jobs}/{limiter.timespan:g}s"


def off_allocation(todo: dict[str, list[dict]], environ: dict) -> list[str]:
    """Points whose runtime cannot start them from where snakemake runs (`Runtime.placement_problem`), one line
    each: e.g. Dragon's, where snakemake runs on no node of the allocation (salloc on a login node)."""
    lines = []
    for family, points in todo.items():
        why = launchers.of_family(family).placement_problem(environ)
        if why:
            lines += [f"{family} {families.point_path(point)}: {why}" for point in points]
    return lines


def time_limit_minutes(campaign: dict) -> int:
    return cluster.time_limit_minutes(campaign)


def group_time_limit_minutes(campaign: dict, tasks: list[Task]) -> int:
    """A launch group's time limit, from its members' planned seconds (Family.planned_seconds)."""
    return cluster.group_time_limit_minutes(campaign, [families.load(t.family).planned_seconds(t) for t in tasks])


class CampaignRun:
    """The run's start and end, called from the Snakefile's onstart, onsuccess and onerror."""

    def __init__(self, config: dict, grid: dict, tasks: dict, order=(), seed: int | None = None,
                 group_rules: dict | None = None):
        self.config, self.grid, self.tasks = config, grid, tasks
        #: rule name -> the launch group (movebench.engine.plan.LaunchGroup) its one job runs
        self.group_rules = group_rules or {}
        self.order, self.seed = list(order), seed
        # Absolute: Snakemake's --directory is the working directory only while it runs the workflow, and a run
        # that ends early (a stale lock) ends after it has changed back, where a relative path would name the
        # caller's own results.
        self.layout = ResultsLayout(Path(config["campaign"]["results_dir"]).absolute())
        self.results = self.layout.root
        self.history = Path(config["campaign"]["history"]).absolute() if config["campaign"].get("history") else None
        self.services = contextlib.ExitStack()
        self.started = time.time()
        self.host_load = envinfo.HostLoad()
        self.rate_limit: str | None = None
        self.command = shlex.join(sys.argv)
        self.workflow = None
        self.lock = None
        self.interrupted = None
        self.ended = False
        self.snakemake_error = False
        self.stale_lock = False

    def watch(self, workflow) -> None:
        """A run that Snakemake stops outside its jobs still ends with a partial report.

        Snakemake calls onerror only when jobs failed; an error while it builds or schedules jobs (an
        input or params function that raises, a rule that cannot be planned) ends the process with no
        hook. Its error is an ERROR event on its logger; at exit, a real run (not a dry run, not a
        job's own snakemake) that saw one and never reached onsuccess/onerror gets the same ending.
        """
        run = self

        class SeeErrors(logging.Handler):
            def emit(self, record):
                if str(getattr(record, "event", "")) == "error":
                    run.snakemake_error = True
                    with contextlib.suppress(Exception):  # only to word the hint below
                        run.stale_lock = run.stale_lock or "cannot be locked" in record.getMessage()

        logging.getLogger("snakemake.logging").addHandler(SeeErrors(level=logging.ERROR))
        self.workflow_at_exit = workflow
        atexit.register(self.at_exit)

    def at_exit(self) -> None:
        workflow = self.workflow_at_exit
        if (workflow.executor_plugin is not None and workflow.dryrun and not self.snakemake_error
                and os.environ.get(DRY_RUN_VERDICT_ENV) != "said"):
            self.say_dry_run_verdict(workflow)
        real_run = (workflow.executor_plugin is not None and not workflow.dryrun and not workflow.touch
                    and not workflow.execution_settings.no_hooks)
        if self.snakemake_error and real_run and not self.ended:
            print("movebench: Snakemake stopped outside the points' jobs (its error is above)", file=sys.stderr)
            if self.stale_lock:
                # Most often a run killed outright (an allocation's end after KillWait, a node that died): the
                # records it finished are kept, and the same command runs the rest once the lock is gone.
                print("movebench: if no other snakemake runs on this directory, the lock is a killed run's: run the "
                      "same command once with --unlock, then again as it was", file=sys.stderr)
            self.end(ok=False)

    def job_launches(self, job) -> tuple[str, list[str]] | None:
        """(family, the launch paths it runs) of a point job or a launch group's job; None for other jobs."""
        group = self.group_rules.get(job.rule.name)
        if group is not None:
            return group.family, list(group.members)
        family = job.rule.name.removesuffix("_point")
        if family in self.tasks and "point_path" in job.wildcards.keys():
            return family, [job.wildcards.point_path]
        return None

    def say_dry_run_verdict(self, workflow) -> None:
        """After a dry run: what admission would refuse in the real run's onstart, which a dry run never reaches
        (Snakemake calls no hook then). Where the points would run is read from the profile's default resources:
        the dry run's executor is Snakemake's stand-in, not the profile's."""
        defaults = default_resources(workflow)
        executor = executor_of(defaults)
        partition = defaults.get("slurm_partition")
        refused = refusal(self.config, self.tasks, executor, str(partition) if partition else None)
        if refused:
            print(refused.replace("refused before any job", "the real run would stop before any job"),
                  file=sys.stderr, flush=True)

    def points_to_run(self, workflow) -> dict[str, list[dict]]:
        todo: dict[str, list[dict]] = {}
        for job in workflow.dag.needrun_jobs():
            found = self.job_launches(job)
            if found is None:
                continue
            family, paths = found
            for path in paths:
                point = self.tasks[family][path].point
                if point not in todo.setdefault(family, []):  # a point's launches are one point to admit
                    todo[family].append(point)
        return todo

    def admit(self, workflow, todo: dict[str, list[dict]]) -> None:
        """Stop before the first job when a point to run does not fit the node or filesystem it runs on."""
        executor = workflow.executor_plugin.name if workflow.executor_plugin is not None else "local"
        if allocation_profile(workflow):
            capacity = cluster.allocation_capacity(os.environ)
            if capacity is None:
                sys.exit(cluster.NO_ALLOCATION)
            lines = admission.problems(self.config, todo, capacity) + off_allocation(todo, os.environ)
            if lines:
                sys.exit(admission.message(lines, capacity))
            return
        if executor == "local":
            capacities = {None: admission.local_capacity()}
            partition_of = dict.fromkeys(todo)
        elif executor == "slurm":
            partition_of = {family: self.partition(workflow, family) for family in todo}
            capacities = {part: cluster.partition_capacity(part) for part in set(partition_of.values())}
        else:
            return  # another executor: nothing known here about its nodes
        for part, capacity in capacities.items():
            if capacity is None:
                continue
            mine = {family: points for family, points in todo.items() if partition_of[family] == part}
            lines = admission.problems(self.config, mine, capacity)
            if lines:
                sys.exit(admission.message(lines, capacity))

    def partition(self, workflow, family: str) -> str | None:
        for job in workflow.dag.needrun_jobs():
            found = self.job_launches(job)
            if found is not None and found[0] == family:
                return dict(job.resources).get("slurm_partition") or None
        return None

    def take_lock(self) -> None:
        """The machine-wide benchmark lock (movebench.engine.machine): a second local campaign waits or refuses."""
        try:
            self.lock = machine.BenchmarkLock()
            self.lock.acquire({"campaign": self.config["campaign"]["name"], "results": str(self.results.absolute())},
                              say=lambda line: print(line, file=sys.stderr, flush=True))
        except (machine.LockBusy, ValueError) as exc:
            sys.exit(f"movebench: {exc}")
        except KeyboardInterrupt:
            sys.exit("movebench: interrupted while waiting for the benchmark lock; no point ran")

    def write_launch_order(self, workflow) -> None:
        """results/launch_order.json: this run's seed and the order its launches are to run in."""
        if workflow.dryrun or self.seed is None:
            return
        to_run = set()
        for job in workflow.dag.needrun_jobs():
            group = self.group_rules.get(job.rule.name)
            if group is not None:
                to_run.add((group.family, group.name))
            elif "point_path" in job.wildcards.keys():
                to_run.add((job.rule.name.removesuffix("_point"), job.wildcards.point_path))
        with contextlib.suppress(OSError):  # bookkeeping: a full disk fails the points, not this
            records.write_json(self.layout.launch_order, {
                "seed": self.seed, "started": self.started,
                "order": [[family, path] for family, path in self.order if (family, path) in to_run]})

    def watch_interrupts(self, also=()) -> None:
        """Note a Ctrl-C for the end's message; Snakemake still gets its KeyboardInterrupt.

        `also`: signals taken as a Ctrl-C. An allocation that ends (scancel, its time limit) sends SIGTERM to a
        batch script's processes (and `salloc -K` to its command); a closed terminal sends salloc's command
        SIGHUP. Either would kill Snakemake on the spot and leave its lock behind, which stops the rerun in the
        next allocation. As a KeyboardInterrupt, Snakemake stops its jobs, writes the partial report and unlocks.
        """
        previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, *also)}

        def note(signum, frame):
            self.interrupted = self.interrupted or time.time()
            handler = previous.get(signum)
            if signum == signal.SIGINT and callable(handler):
                handler(signum, frame)
            else:
                raise KeyboardInterrupt

        with contextlib.suppress(ValueError):  # not the main thread: nothing to note
            for signum in previous:
                signal.signal(signum, note)

    def start(self, workflow) -> None:
        self.workflow = workflow
        campaign = self.config["campaign"]
        todo = self.points_to_run(workflow)
        self.admit(workflow, todo)
        self.install_stacks(todo)
        local = workflow.executor_plugin is None or workflow.executor_plugin.name == "local"
        in_allocation = allocation_profile(workflow)
        # In an allocation the points run on its nodes, which are this job's alone: this host's lock (a login
        # node's, shared by everyone) would only make unrelated campaigns wait for each other.
        if local and not in_allocation:
            self.take_lock()
        # The run's wall time and the host's load start once the lock is ours: waiting is not the campaign's.
        self.started, self.host_load = time.time(), envinfo.HostLoad()
        self.layout.retry_ledger.unlink(missing_ok=True)  # the retry budget is this run's (launch.DisturbedPolicy)
        self.rate_limit = drop_default_rate_limit(getattr(workflow, "scheduler", None))
        self.watch_interrupts(also=(signal.SIGTERM, signal.SIGHUP) if in_allocation else ())
        self.write_launch_order(workflow)
        services = {family: families.load(family).services(self.config[family], campaign, points)
                    for family, points in todo.items()}
        services = {family: service for family, service in services.items() if service is not None}
        if workflow.executor_plugin is not None and workflow.executor_plugin.name == "slurm":
            # Stop before the first sbatch if the cluster cannot run or track the jobs.
            jobs = [(found[0], dict(job.resources)) for job in workflow.dag.needrun_jobs()
                    if (found := self.job_launches(job)) is not None]
            problems = cluster.preflight(workflow.executor_settings, jobs)
            problems += [f"{family} points need a service this workflow would start on this host's 127.0.0.1 "
                         "(e.g. Azurite for blob on the emulator), out of the compute nodes' reach: use a real "
                         "account (docs/io.md) or leave those points out" for family in services]
            if problems:
                sys.exit(cluster.preflight_message(problems))
        self.enter_services(services, todo)

    def enter_services(self, services: dict, todo: dict[str, list[dict]]) -> None:
        """Start the families' services, published to the point jobs and stopped until a launch needs them."""
        pids = {family: hold.pids_of(self.services.enter_context(service)) for family, service in services.items()}
        needed = {family: [p for p in todo[family] if families.load(family).service_needed(p)] for family in pids}
        published = hold.publish(pids, needed)
        if published:
            os.environ.update(published)
            # Unwound before the services stop: a stopped process would not act on the SIGTERM that ends it.
            self.services.callback(hold.withdraw)
            hold.pause_all()

    def install_stacks(self, todo: dict) -> None:
        """The environments of the communication stacks the points about to run name, installed once per checkout
        here, before any job: on a cluster the compute nodes may not reach the package index."""
        wanted = [stacks.resolve(point["stack"], self.config["campaign"]) for points in todo.values()
                  for point in points if point.get("stack", stacks.DEFAULT) != stacks.DEFAULT]
        try:
            stacks.ensure_all(wanted, say=lambda line: print(line, file=sys.stderr))
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            sys.exit(f"movebench: a communication stack could not be installed: {exc}")

    def end(self, ok: bool) -> None:
        self.ended = True
        self.services.close()
        if not ok and self.workflow is not None:
            self.record_finished(self.workflow)
        ended = time.time()
        # host_load: CPUs other processes kept busy meanwhile (compare warns about a busy side).
        info = {"start": self.started, "end": ended, "wall_s": ended - self.started, "ok": ok,
                "command": self.command, "host_load": self.host_load.finish(),
                "scheduler_rate_limit": self.rate_limit}
        try:
            records.write_text(self.layout.run_record, json.dumps(info, indent=2) + "\n")
        except OSError as exc:
            print(f"movebench: could not write {self.layout.run_record}: {exc.strerror or exc}",
                  file=sys.stderr)
        if self.lock is not None:
            self.lock.release()
        if not ok:
            self.partial_report()
        elif self.history is not None:
            self.add_to_history(self.history)

    def add_to_history(self, store_path: Path) -> None:
        """campaign.history: this run into its store, and the store's page redrawn; a failure is said, not raised
        (the campaign's figures are safe in its results folder, and `history add` can add them later)."""
        from movebench.judging.history import page, store
        from movebench.judging.history import run as history_run

        try:
            added = store.add(store_path, history_run.read(self.results))
            where = page.render(store_path)
            print(f"movebench: {'added to' if added else 'already in'} the history store {store_path}; its page: "
                  f"{where}", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - any failure here must not turn a finished campaign into a failed one
            print(f"movebench: could not add this run to the history store {store_path}: {exc}; add it later with "
                  f"python -m movebench history add {self.results} --store {store_path}", file=sys.stderr)

    def record_finished(self, workflow) -> list:
        """Points whose launch finished (records and meta renamed into place) but whose end Snakemake never saw.

        A Ctrl-C can come between a point's last rename and Snakemake's bookkeeping of it: Snakemake
        then keeps the point marked incomplete, and `rerun-incomplete` would rerun it next time.
        Its outputs only exist whole (launch renames them into place), so what Snakemake would have
        recorded is recorded here: their metadata (params, code, input checksums) and no mark.
        """
        done = []
        for job in list(workflow.dag.needrun_jobs()):
            found = self.job_launches(job)
            if found is None:
                continue
            family, paths = found
            outputs = [Path(str(f)) for f in job.output]
            if not all(p.exists() and p.stat().st_mtime >= self.started for p in outputs):
                continue
            try:
                if workflow.async_run(workflow.persistence.incomplete(job)):
                    workflow.async_run(workflow.persistence.finished(job))
                    done += paths
            except Exception as exc:  # bookkeeping only: the next run would rerun the point, nothing worse
                print(f"movebench: could not record {family} {', '.join(paths)} as finished: {exc}", file=sys.stderr)
        return done

    def counts(self) -> tuple[int, int, str]:
        """(points whose every launch has records, points of the grid, "" or " (k of n launches)" when points have
        several launches)."""
        launches: dict[tuple[str, str], list[bool]] = {}
        for family, tasks in self.tasks.items():
            for path in tasks:
                found = self.layout.records(family, path).exists()
                launches.setdefault((family, point_path_of(path)), []).append(found)
        done = sum(all(found) for found in launches.values())
        several = any(len(found) > 1 for found in launches.values())
        runs = [f for found in launches.values() for f in found]
        return done, len(launches), f" ({sum(runs)} of {len(runs)} launches)" if several else ""

    def partial_report(self) -> None:
        """A failed run: the report from whatever records exist, every failed and missing point listed."""
        from movebench.judging import report

        done, total, of_launches = self.counts()
        free = admission.free_bytes(self.results)[0]
        try:
            # self.results, not the config's relative results_dir: after a stale lock the run ends back in the
            # caller's folder, and a relative path would put this run's partial report in the caller's results.
            config = {**self.config, "campaign": {**self.config["campaign"], "results_dir": str(self.results)}}
            path = report.render_partial(config, self.grid)
            where = f"partial report at {path}"
        except Exception as exc:  # the run already failed: say why the report is missing, keep the first error
            where = f"no partial report ({exc.strerror if isinstance(exc, OSError) else exc})"
        if free < admission.RESULTS_BASE_BYTES:
            print(f"movebench: the filesystem of {self.results} is full ({admission.gib(free)} free): "
                  f"{done} of {total} points have records{of_launches} and are kept; free space there and run the "
                  f"same command again to run the {total - done} left; {where}", file=sys.stderr)
        elif self.interrupted:
            print(f"movebench: interrupted: {done} of {total} points have records{of_launches} and are kept; the "
                  f"same command runs the {total - done} left; {where}", file=sys.stderr)
        else:
            print(f"movebench: some points failed or did not run ({done} of {total} have records{of_launches}); "
                  f"{where}", file=sys.stderr)
