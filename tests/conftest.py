"""Shared fixtures: the repository, the MPI launcher, running kernels and campaigns for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MPIEXEC = str(Path(PYTHON).with_name("mpiexec")) if Path(PYTHON).with_name("mpiexec").exists() else "mpiexec"


def mpirun(ranks: int, *argv, timeout=120, check=True, env=None) -> subprocess.CompletedProcess:
    """`mpiexec -n ranks python argv...`, output captured."""
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), PYTHON, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy(), cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"mpiexec -n {ranks} {argv} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def snakemake(workdir: Path, *args, profile="local", timeout=600, check=True) -> subprocess.CompletedProcess:
    """The project's Snakefile run in `workdir` with a profile of the project's, as a user would."""
    cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--profile", str(ROOT / "profiles" / profile), "--configfile", str(workdir / "config.yaml"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture
def campaign(tmp_path):
    """Write a config into a fresh folder; returns (folder, write(config))."""

    def write(config: dict) -> Path:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return tmp_path

    return write
