"""Results folders of known runs for the history's tests and its benchmark's analysis: shuffle records written per
launch as a kernel writes them, then tabulated by the real `aggregate.write_tables`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from movebench.core import envinfo
from movebench.core.layout import ResultsLayout
from movebench.core.task import launch_path
from movebench.engine import aggregate

POINTS = [{"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096 << k, "window": 8,
           "mpi_thread_level": "multiple", "memory_mode": "4k", "stack": "default", "env": ""} for k in range(3)]


def meta(mpi="MPICH Version:      5.0.2", commit="a" * 40, hosts=("vm",)):
    m = {"hostname": hosts[0], "nodes": list(hosts), "cpu_model": "AMD EPYC", "mpi_library": mpi,
         "mpi_version": "5.0", "mpi_thread_level": "multiple", "page_size": 4096, "transparent_hugepage": "madvise",
         "git_commit": commit, "config_hash": "0123456789abcdef", "campaign": "nightly", "platform": "Linux-6.1",
         "packages": {"movebench": "0.1.0", "numpy": "2.4.6"}, "environment": {"OMP_NUM_THREADS": "1"}}
    m["fingerprint"] = envinfo.fingerprint(m)
    return m


def write_run(root: Path, start: float, factors=None, seed: int = 0, launches: int = 3, repetitions: int = 5,
              cv_launch: float = 0.01, cv_rep: float = 0.01, run_meta: dict | None = None,
              iterations: int = 10) -> Path:
    """A finished campaign's results folder: POINTS measured in `launches` launches, each point's times scaled by
    `factors[i]` (default 1), with launch-to-launch and repetition noise; campaign_run.json starts at `start`.
    `iterations` other than 10 scale each repetition's work (bytes and time) as a loop count would."""
    rng = np.random.default_rng(seed)
    factors = factors or [1.0] * len(POINTS)
    raw = ResultsLayout(root).raw
    paths = []
    for point, factor in zip(POINTS, factors, strict=True):
        path = "pattern~uni/nodes~1/ranks~2/message_size~{}/window~8".format(point["message_size"])
        base = 1e-3 * point["message_size"] / 4096 * factor * iterations / 10
        for k in range(launches):
            launch_factor = rng.lognormal(0, cv_launch)
            times = base * launch_factor * rng.lognormal(0, cv_rep, repetitions + 1)
            file = raw / "shuffle" / f"{launch_path(path, k)}.jsonl"
            file.parent.mkdir(parents=True, exist_ok=True)
            with open(file, "w") as f:
                for rep, t in enumerate(times):
                    nbytes = point["message_size"] * 8 * iterations // 10
                    f.write(json.dumps({"family": "shuffle", "variant": "uni", **point, "rep": rep - 1,
                                        "warmup": rep == 0, "ok": True, "elapsed_s": t, "bytes": nbytes,
                                        "bandwidth_Bps": nbytes / t, "iterations": iterations, "launch": k}) + "\n")
            file.with_name(file.name.removesuffix(".jsonl") + ".meta.json").write_text(
                json.dumps({**(run_meta or meta()), "launch": k, "launches": launches}))
            paths.append(file)
    tables = root / "tables"
    out = SimpleNamespace(records=tables / "shuffle.csv", parquet=tables / "shuffle.parquet",
                          summary=tables / "shuffle_summary.csv", points=tables / "shuffle_points.csv")
    aggregate.write_tables("shuffle", paths, out, POINTS, root, launches)
    (root / "campaign_run.json").write_text(json.dumps({"start": start, "end": start + 60, "wall_s": 60.0,
                                                        "ok": True, "command": "snakemake --profile local"}))
    return root


def write_series(root: Path, runs: int, step_at: int | None = None, step: float = 1.0, seed: int = 0,
                 change_meta_at: int | None = None) -> list[Path]:
    """`runs` nightly runs under root/run-<i>; from run `step_at` on point 0 takes `step` times as long; from
    `change_meta_at` on the runs report another MPI library."""
    folders = []
    for i in range(runs):
        factors = [step if step_at is not None and i >= step_at else 1.0, 1.0, 1.0]
        mpi = "Open MPI v5.0.7" if change_meta_at is not None and i >= change_meta_at else "MPICH Version:      5.0.2"
        folders.append(write_run(root / f"run-{i}", start=1.7e9 + 86400 * i, factors=factors, seed=seed * 1000 + i,
                                 run_meta=meta(mpi=mpi)))
    return folders
