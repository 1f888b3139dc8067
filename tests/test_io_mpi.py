"""The io kernel under real mpiexec: every pattern x backend, cleanup, verification, retries, a dying service."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import MPIEXEC, PYTHON
from io_support import (  # noqa: F401 - fixtures
    BLOB_ENV,
    azurite_fixture,
    cloud_env_fixture,
    containers,
    io_task,
    kernel_env,
    run_io,
    silent_endpoint,
    standin_fixture,
)
from movebench.services import azurite as azurite_service

pytestmark = pytest.mark.mpi

PATTERNS = ("sfsw", "sfmw", "mfmw")
BACKENDS = ("posix", "mpiio", "blob", "fileshare")
SIZE = 40000  # not a multiple of 8, nor of the 16 KiB pieces: the last block, range and write are short


def leftovers(backend, tmp_path, azurite, standin, prefix):
    """What the run left in its storage: files under the target folder, containers or shares with its prefix."""
    if backend in ("posix", "mpiio"):
        target = tmp_path / "target"
        return sorted(str(p.relative_to(target)) for p in target.rglob("*")) if target.exists() else []
    if backend == "blob":
        return containers(azurite.connection_string, prefix)
    return sorted(name for name in standin.store.shares if name.startswith(prefix))


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_backend_writes_verifies_and_cleans_up(pattern, backend, ranks, tmp_path, azurite, standin, cloud_env):
    prefix = f"mbt-{pattern}-{backend}-{ranks}"
    done, records = run_io(ranks, pattern, backend, tmp_path, size=SIZE, env=cloud_env, name_prefix=prefix)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [(r["warmup"], r["rep"]) for r in records] == [(True, 0), (False, 0), (False, 1)]
    for rec in records:
        assert rec["ok"] and rec["verified"] is True, rec["error"]
        assert (rec["pattern"], rec["backend"], rec["ranks"], rec["size_per_proc"]) == (pattern, backend, ranks, SIZE)
        assert rec["bytes"] == SIZE * ranks
        assert rec["file_size"] == (SIZE if pattern == "mfmw" else SIZE * ranks)
        assert rec["files"] == (ranks if pattern == "mfmw" else 1)
        # IOR: latency spans the earliest start to the latest end; every rank's own window lies inside it.
        assert len(rec["rank_start_s"]) == len(rec["rank_end_s"]) == ranks
        assert min(rec["rank_start_s"]) == 0.0
        assert rec["elapsed_s"] == pytest.approx(max(rec["rank_end_s"]))
        assert max(rec["rank_elapsed_s"]) <= rec["elapsed_s"] + 1e-9
        assert rec["bandwidth_Bps"] == pytest.approx(rec["bytes"] / rec["elapsed_s"])
        assert rec["retries"] == 0
    assert leftovers(backend, tmp_path, azurite, standin, prefix) == []


def test_fileshare_ranges_stay_within_range_size(tmp_path, standin, cloud_env):
    before = len(standin.store.requests)
    done, _ = run_io(2, "sfmw", "fileshare", tmp_path, size=SIZE, reps=1, warmups=0, env=cloud_env,
                     name_prefix="mbt-ranges")
    assert done.returncode == 0, done.stderr[-3000:]
    puts = [path for method, path, status in standin.store.requests[before:] if "comp=range" in path]
    # 40000 bytes per rank in pieces of at most 16 KiB: 3 ranges per rank.
    assert len(puts) == 2 * 3


def test_cleanup_off_keeps_only_the_last_repetition(tmp_path, azurite, standin, cloud_env):
    done, records = run_io(2, "mfmw", "posix", tmp_path, reps=3, warmups=1, env=cloud_env, cleanup=False)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(p.name for p in (tmp_path / "target").rglob("*") if p.is_file())
    assert files == ["r0002-rank00000", "r0002-rank00001"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_flipped_byte_fails_verification(backend, tmp_path, azurite, standin, cloud_env):
    done, records = run_io(2, "sfmw", backend, tmp_path, reps=1, warmups=0, env=cloud_env,
                           name_prefix=f"mbt-flip-{backend}", fault="flip-byte")
    assert done.returncode == 0, done.stderr[-3000:]
    (rec,) = records
    assert rec["ok"] is False and rec["verified"] is False
    assert "rank 0" in rec["error"] and "CRC-32" in rec["error"]
    assert "rank 1" not in rec["error"]  # only rank 0's part was corrupted


def test_verification_off_records_no_verdict(tmp_path):
    done, records = run_io(2, "sfmw", "posix", tmp_path, reps=1, warmups=0, fault="flip-byte", verify=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert records[0]["ok"] is True and records[0]["verified"] is None


def test_a_503_is_retried_and_counted(tmp_path, standin, cloud_env):
    # The first Put Range of the run answers 503 ServerBusy once; the SDK's policy retries it.
    standin.fail_next(1, 503, match="comp=range")
    done, records = run_io(2, "sfmw", "fileshare", tmp_path, reps=1, warmups=1, env=cloud_env, name_prefix="mbt-retry")
    assert done.returncode == 0, done.stderr[-3000:]
    warm, measured = records
    assert warm["ok"] and warm["retries_write"] == 1 and warm["retries"] == 1
    assert measured["retries"] == 0
    assert any(status == 503 for _, _, status in standin.store.requests)


def test_secrets_stay_out_of_records_meta_and_logs(tmp_path, azurite, cloud_env):
    done, records = run_io(2, "sfmw", "blob", tmp_path, reps=1, warmups=0, env=cloud_env)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = (tmp_path / "run-sfmw-blob-2" / "meta.json").read_text()
    key = azurite_service.DEV_KEY
    for text in (meta, json.dumps(records), done.stdout, done.stderr):
        assert key not in text
    assert json.loads(meta)["storage"]["endpoint"].startswith("http://127.0.0.1:")


def launch(tmp_path, name, task, env, timeout=120):
    """The engine's launch wrapper around the kernel, as a Snakemake point rule runs it."""
    out, failed = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.failed.json"
    argv = [PYTHON, "-m", "movebench.engine.launch", "--task", json.dumps(task.to_dict()), "--launcher", MPIEXEC,
            "--timeout", str(timeout), "--out", str(out), "--meta", str(tmp_path / f"{name}.meta.json"),
            "--failed", str(failed)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out, failed


def test_a_point_whose_service_dies_fails_clearly_and_a_rerun_leaves_nothing(tmp_path):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    location = tmp_path / "azurite-data"  # on disk, so that what the dead run left survives a restart
    prefix = "mbt-dies"

    def task(repetitions):
        return io_task(2, "mfmw", "blob", tmp_path, size=256 * 1024, reps=repetitions, warmups=0, name_prefix=prefix,
                       block_size=64 * 1024)

    service = azurite_service.Azurite(location=str(location)).start()
    try:
        proc, out, failed = launch(tmp_path, "dies", task(100000), kernel_env(**{BLOB_ENV: service.connection_string}))
        deadline = time.monotonic() + 30
        while not containers(service.connection_string, prefix) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert containers(service.connection_string, prefix), "the point never created its container"
        time.sleep(6)  # Azurite saves its metadata to disk every 5 s: let the container reach it
        service.kill()
        log, _ = proc.communicate(timeout=90)
    finally:
        service.stop()
    assert proc.returncode != 0
    assert "mfmw on blob failed" in log and "ServiceRequestError" in log, log[-3000:]
    assert not out.exists()  # no result
    failure = json.loads(failed.read_text())
    assert failure["ok"] is False and "kernel exited with status" in failure["error"]
    assert any("failed" in line for line in failure["log_tail"])

    with azurite_service.Azurite(location=str(location)) as restarted:
        assert containers(restarted.connection_string, prefix), "the dead run left nothing: the test proves nothing"
        proc, out, failed = launch(tmp_path, "rerun", task(1), kernel_env(**{BLOB_ENV: restarted.connection_string}))
        log, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, log[-3000:]
        assert out.exists() and not failed.exists()
        assert json.loads((tmp_path / "rerun.meta.json").read_text())["leftovers_removed"]
        assert containers(restarted.connection_string) == []


def test_a_blob_endpoint_that_never_answers_fails_the_point_in_seconds_in_one_line(tmp_path):
    key = azurite_service.DEV_KEY
    with silent_endpoint() as port:
        task = io_task(2, "mfmw", "blob", tmp_path, reps=1, warmups=0, name_prefix="mbt-silent",
                       request_timeout_s=1,
                       retry={"total": 2, "initial_backoff_s": 0.1, "increment_base_s": 0.1, "jitter_s": 0})
        started = time.monotonic()
        proc, out, failed = launch(tmp_path, "silent", task,
                                   kernel_env(**{BLOB_ENV: azurite_service.connection_string(port)}))
        log, _ = proc.communicate(timeout=90)
        took = time.monotonic() - started
    assert proc.returncode != 0
    assert took < 45, took  # 3 tries of 1 s, plus mpiexec and imports on a loaded machine; launch's limit is 120 s
    line = (f"io blob: the endpoint http://127.0.0.1:{port}/devstoreaccount1 did not answer within 1 s "
            "(io.request_timeout_s; retried 2 times)")
    failure = json.loads(failed.read_text())
    assert failure["error"].startswith("kernel exited with status") and failure["error"].endswith(f"({line})")
    assert "Traceback" not in failure["error"] and "Traceback" not in log, log[-3000:]
    assert f"mfmw on blob failed: {line}" in log
    assert not out.exists()
    for text in (log, failed.read_text()):
        assert key not in text
