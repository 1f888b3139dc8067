"""Fixtures and helpers of the io family's tests: Azurite, the Azure Files stand-in, the kernel under mpiexec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fileshare_standin import StandIn
from movebench.services import azurite as azurite_service

SRC = Path(__file__).resolve().parents[1] / "src"
MPIEXEC = Path(sys.executable).with_name("mpiexec")
BLOB_ENV = "MOVEBENCH_TEST_BLOB_CONNECTION"
FILES_ENV = "MOVEBENCH_TEST_FILES_CONNECTION"
# Short retries: a test whose service is gone should fail in seconds, not in the SDK's default minute.
QUICK_RETRY = [
    "--retry-total",
    "2",
    "--retry-initial-backoff-s",
    "0.1",
    "--retry-increment-base-s",
    "1.1",
    "--retry-jitter-s",
    "0.05",
    "--request-timeout-s",
    "10",
]


def kernel_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def backend_args(backend: str, tmp_path: Path) -> list[str]:
    """Small pieces, so that tiny sizes still cross several blocks, ranges and pwrite calls."""
    if backend in ("posix", "mpiio"):
        return ["--path", str(tmp_path / "target"), "--transfer-size", "16KiB"]
    if backend == "blob":
        return ["--connection-string-env", BLOB_ENV, "--block-size", "16KiB", *QUICK_RETRY]
    return ["--connection-string-env", FILES_ENV, "--range-size", "16KiB", *QUICK_RETRY]


def run_kernel(
    ranks: int,
    pattern: str,
    backend: str,
    tmp_path: Path,
    *extra,
    size="40000",
    reps=2,
    warmups=1,
    env=None,
    timeout=60,
    name_prefix=None,
):
    """`mpiexec -n ranks python -m movebench.io ...`; returns (completed process, records or None)."""
    out = tmp_path / f"{pattern}-{backend}-{ranks}.jsonl"
    out.unlink(missing_ok=True)
    argv = [
        str(MPIEXEC),
        "-n",
        str(ranks),
        sys.executable,
        "-m",
        "movebench.io",
        "--pattern",
        pattern,
        "--backend",
        backend,
        "--size-per-proc",
        str(size),
        "--repetitions",
        str(reps),
        "--warmups",
        str(warmups),
        "--out",
        str(out),
        "--meta",
        str(out.with_suffix(".meta.json")),
        *backend_args(backend, tmp_path),
        *extra,
    ]
    if name_prefix:
        argv += ["--name-prefix", name_prefix]
    done = subprocess.run(argv, env=env or kernel_env(), capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else None
    return done, records


# Fixtures are named apart from their functions, so that test modules can import them without
# shadowing the names their tests take as arguments.
@pytest.fixture(scope="session", name="azurite")
def azurite_fixture():
    """A live Azurite for the session (installed into .node/ with npm on first use)."""
    why = azurite_service.node_missing()
    if why:
        pytest.skip(why)
    with azurite_service.Azurite() as service:
        yield service


@pytest.fixture(scope="session", name="standin")
def standin_fixture():
    with StandIn() as server:
        yield server


@pytest.fixture(name="cloud_env")
def cloud_env_fixture(azurite, standin):
    """Kernel environment with both connection strings, under names no real setup uses."""
    return kernel_env(**{BLOB_ENV: azurite.connection_string, FILES_ENV: standin.connection_string()})


def containers(service_connection: str, prefix: str = "") -> list[str]:
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(service_connection)
    return [c.name for c in client.list_containers(name_starts_with=prefix)]
