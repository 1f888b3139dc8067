"""Fixtures and helpers of the io family's tests: Azurite, the Azure Files stand-in, the kernel under mpiexec."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest

from conftest import make_task, run_kernel
from fileshare_standin import StandIn
from movebench.services import azurite as azurite_service

SRC = Path(__file__).resolve().parents[1] / "src"
BLOB_ENV = "MOVEBENCH_TEST_BLOB_CONNECTION"
FILES_ENV = "MOVEBENCH_TEST_FILES_CONNECTION"
# Short retries: a test whose service is gone should fail in seconds, not in the SDK's default minute.
QUICK_RETRY = {"total": 2, "initial_backoff_s": 0.1, "increment_base_s": 1.1, "jitter_s": 0.05}


def kernel_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def io_settings(backend: str, tmp_path: Path, name_prefix: str, **extra) -> dict:
    """The kernel's settings as the io spec builds them, with small pieces so that tiny sizes still cross
    several blocks, ranges and pwrite calls."""
    settings = {"fsync": True, "verify": True, "cleanup": True, "name_prefix": name_prefix}
    if backend in ("posix", "mpiio"):
        settings.update(path=str(tmp_path / "target"), transfer_size=16 * 1024)
    if backend == "mpiio":
        settings["hints"] = {}
    if backend in ("blob", "fileshare"):
        settings.update(retry=QUICK_RETRY, request_timeout_s=10, max_concurrency=1)
    if backend == "blob":
        settings.update(connection_string_env=BLOB_ENV, block_size=16 * 1024)
    if backend == "fileshare":
        settings.update(connection_string_env=FILES_ENV, range_size=16 * 1024)
    settings.update(extra)
    return settings


def io_task(ranks, pattern, backend, tmp_path, size=40000, reps=2, warmups=1, name_prefix=None, **extra):
    point = {"pattern": pattern, "backend": backend, "nodes": 1, "ranks": ranks, "size_per_proc": int(size)}
    prefix = name_prefix or f"mbt-{pattern}-{backend}-{ranks}"
    return make_task("io", point, io_settings(backend, tmp_path, prefix, **extra), reps, warmups)


def run_io(ranks, pattern, backend, tmp_path, size=40000, reps=2, warmups=1, env=None, timeout=60,
           name_prefix=None, **extra):
    """The io kernel under mpiexec, as the point rule starts it; returns (completed process, records or None)."""
    task = io_task(ranks, pattern, backend, tmp_path, size, reps, warmups, name_prefix, **extra)
    folder = tmp_path / f"run-{pattern}-{backend}-{ranks}"
    folder.mkdir(exist_ok=True)
    done, records, _ = run_kernel(task, folder, timeout=timeout, check=False, env=env or kernel_env())
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


@contextlib.contextmanager
def silent_endpoint():
    """A TCP port on 127.0.0.1 that accepts every connection and never answers: a hung or black-holed
    storage endpoint, which a refused connection (nothing listening) does not stand for. Yields the port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # closed below
                return
            held.append(conn)  # kept open and never read: the client waits for an answer

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for conn in held:
            conn.close()
        thread.join(timeout=5)
