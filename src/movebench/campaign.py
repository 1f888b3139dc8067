"""What the Snakefile needs beyond its rules: job environment, point rule inputs, the run's start and end.

Everything here runs inside plain `snakemake`, so that `snakemake --profile local` does all that
`make run` does: the services a campaign needs (Azurite for blob points on the emulator) start in
`onstart` and stop in `onsuccess`/`onerror`, and the run's wall time lands in
`results/campaign_run.json` for `python -m movebench efficiency`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

from movebench import admission, cluster, families
from movebench.core import envinfo, records

PACKAGE = Path(__file__).resolve().parent
#: Shared code every point runs through: its change reruns every point (families add their kernel files).
RUNNER_SOURCES = ("launch.py", "runner.py", "core/records.py", "core/timing.py")


def job_environment(config: dict) -> dict[str, str]:
    """Variables point jobs inherit from snakemake: this Python's bin first on PATH, the config's hash."""
    here = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    env = {"MOVEBENCH_CONFIG_HASH": envinfo.config_hash(config), "MOVEBENCH_CAMPAIGN": config["campaign"]["name"]}
    if path.split(os.pathsep)[0] != here:
        env["PATH"] = os.pathsep.join([here, path]) if path else here
    return env


def kernel_sources(family: str) -> list[str]:
    """The files whose change reruns a family's points: its kernel files and the shared runner."""
    folder = families.folder(family)
    own = sorted(str(p.resolve()) for pattern in families.load(family).kernel_sources for p in folder.glob(pattern))
    return own + [str(PACKAGE / name) for name in RUNNER_SOURCES]


def task_of(tasks: dict, family: str, path: str) -> dict:
    """The task of the point at `path`; a path outside the campaign's grid is a clear error."""
    try:
        return tasks[family][path]
    except KeyError:
        raise ValueError(f"{family} point {path!r} is not in the campaign's grid (config: {family} section); "
                         "ask for results/report.html or a point the config sweeps") from None


def runtime_minutes(campaign: dict) -> int:
    return cluster.runtime_minutes(campaign)


class CampaignRun:
    """The run's start and end, called from the Snakefile's onstart, onsuccess and onerror."""

    def __init__(self, config: dict, grid: dict, tasks: dict):
        self.config, self.grid, self.tasks = config, grid, tasks
        self.results = Path(config["campaign"]["results_dir"])
        self.services = contextlib.ExitStack()
        self.started = time.time()
        self.command = shlex.join(sys.argv)

    def points_to_run(self, workflow) -> dict[str, list[dict]]:
        todo: dict[str, list[dict]] = {}
        for job in workflow.dag.needrun_jobs():
            family = job.rule.name.removesuffix("_point")
            if family in self.tasks and "point" in job.wildcards.keys():
                todo.setdefault(family, []).append(self.tasks[family][job.wildcards.point]["point"])
        return todo

    def admit(self, workflow, todo: dict[str, list[dict]]) -> None:
        """Stop before the first job when a point to run does not fit the node or filesystem it runs on."""
        executor = workflow.executor_plugin.name if workflow.executor_plugin is not None else "local"
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

    @staticmethod
    def partition(workflow, family: str) -> str | None:
        for job in workflow.dag.needrun_jobs():
            if job.rule.name == f"{family}_point":
                return dict(job.resources).get("slurm_partition") or None
        return None

    def start(self, workflow) -> None:
        self.started = time.time()
        campaign = self.config["campaign"]
        todo = self.points_to_run(workflow)
        self.admit(workflow, todo)
        services = {family: families.load(family).services(self.config[family], campaign, points)
                    for family, points in todo.items()}
        services = {family: service for family, service in services.items() if service is not None}
        if workflow.executor_plugin is not None and workflow.executor_plugin.name == "slurm":
            # Stop before the first sbatch if the cluster cannot run or track the jobs.
            jobs = [(job.rule.name.removesuffix("_point"), dict(job.resources)) for job in workflow.dag.needrun_jobs()
                    if job.rule.name.removesuffix("_point") in self.grid]
            problems = cluster.preflight(workflow.executor_settings, jobs)
            problems += [f"{family} points need a service this workflow would start on this host's 127.0.0.1 "
                         "(e.g. Azurite for blob on the emulator), out of the compute nodes' reach: use a real "
                         "account (docs/io.md) or leave those points out" for family in services]
            if problems:
                sys.exit(cluster.preflight_message(problems))
        for service in services.values():
            self.services.enter_context(service)

    def end(self, ok: bool) -> None:
        self.services.close()
        ended = time.time()
        info = {"start": self.started, "end": ended, "wall_s": ended - self.started, "ok": ok,
                "command": self.command}
        try:
            records.write_text(self.results / "campaign_run.json", json.dumps(info, indent=2) + "\n")
        except OSError as exc:
            print(f"movebench: could not write {self.results / 'campaign_run.json'}: {exc}", file=sys.stderr)
        if not ok:
            self.partial_report()

    def partial_report(self) -> None:
        """A failed run: the report from whatever records exist, every failed and missing point listed."""
        from movebench import report

        try:
            path = report.render_partial(self.config, self.grid)
            print(f"movebench: some points failed or did not run; partial report at {path}", file=sys.stderr)
        except Exception as exc:  # the run already failed: say why the report is missing, keep the first error
            print(f"movebench: could not render the partial report: {exc}", file=sys.stderr)
