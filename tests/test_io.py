"""The io family without MPI: config checks, grid, payload, credentials, the stand-in's auth, the report section."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from fileshare_standin import StandIn, signature, string_to_sign
from io_support import kernel_env, silent_endpoint
from movebench import families
from movebench.core import records
from movebench.engine import config as campaign_config
from movebench.engine import plan
from movebench.families import io as io_family
from movebench.families.io import kernel as io_kernel
from movebench.families.io import report as io_report
from movebench.families.io.storage import ReadOnlyView, azure, open_backend, pieces
from movebench.services import azurite as azurite_service

CONN_ENV = "MOVEBENCH_TEST_IO_CONNECTION"
FAKE_BLOB = azurite_service.connection_string(10000)


def validate(io_section: dict):
    return campaign_config.validate({"campaign": {}, "io": io_section})


def problems(io_section: dict) -> str:
    with pytest.raises(campaign_config.ConfigError) as caught:
        validate(io_section)
    return caught.value.message()


def test_defaults_fill_every_key(tmp_path):
    config = validate({"posix": {"path": str(tmp_path)}})
    io = config["io"]
    assert io["patterns"] == ["sfsw", "sfmw", "mfmw"] and io["backends"] == ["posix", "mpiio"]
    assert io["block_size"] == "100MiB" and io["range_size"] == "4MiB"
    assert io["fsync"] and io["verify"] and io["cleanup"]
    assert io["blob"]["connection_string_env"] == "AZURE_STORAGE_CONNECTION_STRING"
    assert io["retry"] == {"total": 3, "initial_backoff_s": 1, "increment_base_s": 2, "jitter_s": 0.5}


@pytest.mark.parametrize(
    "section, expected",
    [
        ({"block_size": "4001MiB"}, "io.block_size = '4001MiB': must be at most 4000MiB (Azure's Put Block limit)"),
        ({"range_size": "5MiB"}, "io.range_size = '5MiB': must be at most 4MiB (Azure Files' Put Range limit)"),
        ({"range_size": "4 furlongs"}, "io.range_size = '4 furlongs': '4 furlongs' is not a size"),
        ({"size_per_proc": ["1MiB", "lots"]}, "io.size_per_proc = [1MiB, lots]: 'lots' is not a size"),
        ({"size_per_proc": {"from": "1MiB", "to": "1KiB"}}, "range from '1MiB' to '1KiB' is empty"),
        ({"patterns": ["sfsw", "mfsw"]}, "io.patterns[1] = 'mfsw': must be one of sfsw, sfmw, mfmw"),
        ({"backends": ["s3"]}, "io.backends[0] = 's3': must be one of posix, mpiio, blob, fileshare"),
        ({"ranks": [2], "nodes": [4]}, "io.nodes = 4: more nodes than the 2 ranks"),
        ({"iterations": 6}, "io.iterations = 6: renamed: use io.repetitions"),
        ({"buffer": 1}, "io.buffer = 1: unknown key 'buffer'"),
    ],
)
def test_bad_input_is_named_with_what_would_be_valid(section, expected, tmp_path):
    assert expected in problems({"posix": {"path": str(tmp_path)}, **section})


def test_a_blob_beyond_its_block_limit_is_refused(monkeypatch):
    monkeypatch.setenv(CONN_ENV, FAKE_BLOB)
    message = problems(
        {
            "backends": ["blob"],
            "patterns": ["sfmw"],
            "size_per_proc": ["200MiB"],
            "ranks": [30000],
            "blob": {"connection_string_env": CONN_ENV},
        }
    )
    assert "io.size_per_proc = [200MiB]: pattern sfmw makes a" in message
    assert "60000 blocks" in message and "at most 50000 blocks" in message


def test_a_file_beyond_azure_files_limit_is_refused(monkeypatch, tmp_path):
    path = tmp_path / "conn"
    path.write_text("AccountName=a;AccountKey=eA==;FileEndpoint=http://127.0.0.1:1/a")
    message = problems(
        {
            "backends": ["fileshare"],
            "patterns": ["sfsw", "mfmw"],
            "size_per_proc": ["2TiB"],
            "ranks": [4],
            "fileshare": {"credentials_file": str(path)},
        }
    )
    assert "pattern sfsw makes a 8TiB file; an Azure file holds at most 4TiB" in message
    assert "pattern mfmw" not in message  # 2 TiB per rank fits one file each


def test_missing_credentials_of_an_enabled_cloud_backend(monkeypatch):
    monkeypatch.delenv(CONN_ENV, raising=False)
    message = problems({"backends": ["blob"], "blob": {"connection_string_env": CONN_ENV}})
    assert f"io.blob.connection_string_env = '{CONN_ENV}': backend blob is enabled but has no credentials" in message
    assert f"environment variable {CONN_ENV} is not set" in message


def test_missing_credentials_file(tmp_path):
    missing = tmp_path / "nope.txt"
    message = problems({"backends": ["fileshare"], "fileshare": {"credentials_file": str(missing)}})
    assert f"io.fileshare.credentials_file = '{missing}'" in message and "No such file" in message


def test_azurite_connection_string_cannot_serve_fileshare_and_its_key_is_not_shown(monkeypatch):
    monkeypatch.setenv(CONN_ENV, FAKE_BLOB)
    message = problems({"backends": ["fileshare"], "fileshare": {"connection_string_env": CONN_ENV}})
    assert "no FileEndpoint (Azurite has no Azure Files service)" in message
    assert azurite_service.DEV_KEY not in message


def test_credentials_are_named_never_passed(monkeypatch, tmp_path):
    monkeypatch.setenv(CONN_ENV, FAKE_BLOB)
    config = validate({"backends": ["blob"], "blob": {"connection_string_env": CONN_ENV}})
    point = io_family.FAMILY.points(config["io"])[0]
    settings = io_family.FAMILY.kernel_settings(point, config["io"], config["campaign"])
    assert settings["connection_string_env"] == CONN_ENV
    assert azurite_service.DEV_KEY not in str(settings) and "AccountKey" not in str(settings)


@pytest.mark.parametrize("path", ["/proc/movebench-io", "FILE/sub"])
def test_an_unwritable_posix_path_is_refused(path, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    path = path.replace("FILE", str(afile))
    message = problems({"posix": {"path": path}})
    assert f"io.posix.path = '{path}': must be a writable folder (or creatable)" in message


def test_grid_and_kernel_arguments(tmp_path):
    config = validate(
        {
            "posix": {"path": str(tmp_path)},
            "size_per_proc": {"from": "1MiB", "to": "4MiB"},
            "repetitions": 7,
            "fsync": False,
            "mpiio": {"hints": {"romio_cb_write": "enable"}},
        }
    )
    points = io_family.FAMILY.points(config["io"])
    assert len(points) == 3 * 2 * 3
    assert points[0] == {"pattern": "sfsw", "backend": "posix", "nodes": 1, "ranks": 2, "size_per_proc": 2**20}
    mpiio = next(p for p in points if p["backend"] == "mpiio")
    task = plan.tasks(config, plan.grid(config))["io"][families.point_path(mpiio)]
    settings = task.settings
    assert task.repetitions == 7 and settings["fsync"] is False
    assert settings["hints"] == {"romio_cb_write": "enable"} and settings["path"] == str(tmp_path)
    assert settings["transfer_size"] == 16 * 2**20 and "block_size" not in settings  # blob's key, not mpiio's


def test_the_grid_depends_on_the_config_alone(monkeypatch, tmp_path):
    """No environment variable takes a backend out of the grid (make run and plain snakemake agree)."""
    monkeypatch.setenv("MOVEBENCH_SKIP_BACKENDS", "blob")
    section = _emulated_section(tmp_path)
    assert {p["backend"] for p in io_family.FAMILY.points(section)} == {"posix", "blob"}


def test_name_prefixes_are_valid_container_names_and_differ_by_point_and_campaign():
    point = {"pattern": "sfmw", "backend": "fileshare", "nodes": 1, "ranks": 4, "size_per_proc": 2**20}
    prefix = io_family.name_prefix(point, "movebench")
    space = f"{prefix}-deadbeef"
    assert 3 <= len(space) <= 63 and space == space.lower() and "--" not in space
    assert all(c.isalnum() or c == "-" for c in space)
    assert prefix != io_family.name_prefix({**point, "ranks": 2}, "movebench")
    assert prefix != io_family.name_prefix(point, "other")


def test_payload_words_encode_their_position_in_the_object():
    whole = io_kernel.make_payload(3 * 1001, 0)
    parts = [io_kernel.make_payload(1001, r * 1001) for r in range(3)]
    assert np.array_equal(np.concatenate(parts), whole)  # each rank's part is its slice of one object
    assert not np.array_equal(parts[0], parts[1])  # a part written at the wrong offset would not verify


def test_pieces_and_read_only_view():
    assert pieces(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert pieces(0, 4) == []
    view = ReadOnlyView(np.arange(10, dtype=np.uint8))
    assert view.read(4) == bytes(range(4)) and view.tell() == 4
    view.seek(-2, 2)
    assert view.read() == bytes([8, 9]) and len(view) == 10


def test_connection_string_problems_never_quote_the_secret():
    assert azure.connection_problem("nonsense", "blob") == (
        "is not a connection string (expected Key=Value pairs separated by ';')"
    )
    assert azure.connection_problem("AccountName=a", "blob") == "has neither AccountKey nor SharedAccessSignature"
    assert azure.connection_problem(FAKE_BLOB, "blob") is None
    real = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net"
    assert azure.connection_problem(real, "file") is None
    assert azure.endpoint_of(real, "file") == "https://acct.file.core.windows.net"


def test_the_standin_rejects_requests_without_the_account_signature(standin_server):
    url = f"http://127.0.0.1:{standin_server.port}/{standin_server.server.account}?comp=list"
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(urllib.request.Request(url, headers={"x-ms-date": "now"}))
    assert unsigned.value.code == 403 and unsigned.value.headers["x-ms-error-code"] == "AuthenticationFailed"
    forged = "SharedKey standinaccount:" + base64.b64encode(b"x" * 32).decode()
    with pytest.raises(urllib.error.HTTPError) as wrong:
        urllib.request.urlopen(urllib.request.Request(url, headers={"x-ms-date": "now", "Authorization": forged}))
    assert wrong.value.code == 403
    # Signed as the spec says, with the account key: accepted.
    path = f"/{standin_server.server.account}?comp=list"
    headers = {"x-ms-date": "Mon, 01 Jan 2024 00:00:00 GMT", "x-ms-version": "2025-01-05"}
    sig = signature(standin_server.server.key, string_to_sign("GET", path, headers, standin_server.server.account))
    headers["Authorization"] = f"SharedKey {standin_server.server.account}:{sig}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as ok:
        assert ok.status == 200 and b"<EnumerationResults" in ok.read()


def test_the_sdk_with_a_wrong_key_fails_with_a_clear_error(standin_server, monkeypatch):
    wrong = base64.b64encode(b"not-the-account-key-at-all-0000!").decode()
    monkeypatch.setenv(CONN_ENV, standin_server.connection_string(key=wrong))
    settings = {
        "connection_string_env": CONN_ENV,
        "credentials_file": None,
        "range_size": 4 << 20,
        "max_concurrency": 1,
        "retry": {"total": 0, "initial_backoff_s": 0, "increment_base_s": 0, "jitter_s": 0},
        "request_timeout_s": 5,
    }
    backend = open_backend("fileshare", settings)
    with pytest.raises(Exception) as caught:
        backend.remove_leftovers("mbio-")
    line = azure.describe_error(caught.value)
    assert "HTTP 403" in line and "AuthenticationFailed" in line and wrong not in line


@pytest.fixture()
def standin_server():
    with StandIn() as server:
        yield server


def test_report_section_tables_match_the_medians(tmp_path):
    from movebench.engine import aggregate

    paths = []
    for pattern in ("sfsw", "mfmw"):
        for backend in ("posix", "blob"):
            for size in (2**20, 2**22):
                point = {"pattern": pattern, "backend": backend, "nodes": 1, "ranks": 2, "size_per_proc": size}
                recs = [
                    records.record(
                        "io",
                        pattern,
                        point,
                        i,
                        False,
                        elapsed_s=0.01 * (i + 1),
                        nbytes=2 * size,
                        retries=0,
                        retries_write=0,
                    )
                    for i in range(5)
                ]
                path = tmp_path / "raw" / "io" / f"{families.point_path(point)}.jsonl"
                records.write_jsonl(path, recs)
                paths.append(path)
    table = aggregate.load("io", paths)
    ctx = io_report.REPORT.context(table, aggregate.summarize("io", table), {})
    assert [pattern for pattern, _ in ctx["tables"]] == ["sfsw", "mfmw"]
    sfsw = ctx["tables"][0][1]
    # Median latency 0.03 s = 30 ms; bandwidth median of 2 MiB / {0.01..0.05} s = 2 MiB / 0.03 s = 66.7 MiB/s.
    assert "latency (ms)" in sfsw and "bandwidth (MiB/s)" in sfsw
    assert "<td>30.0</td>" in sfsw and "<td>66.7</td>" in sfsw and "<td>2MiB</td>" in sfsw
    assert ctx["figure"].startswith("data:image/png;base64,")
    assert ctx["emulated_blob"] and ctx["backends"] == ["POSIX", "Blob"]


# --- the Azurite manager ---


@pytest.mark.azurite
def test_azurite_cli_up_env_status_down(tmp_path):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    env = kernel_env(MOVEBENCH_AZURITE_STATE=str(tmp_path / "state.json"))
    cli = [sys.executable, "-m", "movebench.services.azurite"]
    assert subprocess.run([*cli, "up"], env=env, capture_output=True, text=True, timeout=120).returncode == 0
    try:
        exported = subprocess.run([*cli, "env"], env=env, capture_output=True, text=True, timeout=30).stdout
        assert (
            exported.startswith(f"export {azurite_service.ENV_VAR}='") and "BlobEndpoint=http://127.0.0.1:" in exported
        )
        port = int(exported.split("127.0.0.1:")[1].split("/")[0])
        assert azurite_service.answers(port)
        assert subprocess.run([*cli, "status"], env=env, capture_output=True, timeout=30).returncode == 0
    finally:
        assert subprocess.run([*cli, "down"], env=env, capture_output=True, timeout=60).returncode == 0
    assert not azurite_service.answers(port)
    assert not (tmp_path / "state.json").exists()


@pytest.mark.azurite
def test_azurite_run_exports_the_connection_string_and_stops_after(tmp_path):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    probe = "import os; print(os.environ['MOVEBENCH_AZURITE_CONNECTION_STRING'].split('127.0.0.1:')[1].split('/')[0])"
    done = subprocess.run(
        [sys.executable, "-m", "movebench.services.azurite", "run", "--", sys.executable, "-c", probe],
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    port = int(done.stdout.strip())
    assert "Azurite up on 127.0.0.1" in done.stderr and "Azurite stopped" in done.stderr
    assert not azurite_service.answers(port)


def test_azurite_keeps_blobs_on_disk_when_the_campaign_uploads_more_than_a_quarter_of_memory():
    from movebench.families import io as io_family

    MiB = io_family.MiB

    section = {"repetitions": {"min": 2, "max": 5}, "warmups": 1, "launches": 3}
    points = [{"backend": "blob", "size_per_proc": 128 * MiB, "ranks": 4},
              {"backend": "posix", "size_per_proc": 1024 * MiB, "ranks": 4}]
    assert io_family.blob_upload_bytes(section, points) == 128 * MiB * 4 * (1 + 5) * 3  # posix points upload nothing
    assert io_family.azurite_on_disk(section, points, 24 * 1024 * MiB)  # 9 GiB > 6 GiB
    assert not io_family.azurite_on_disk(section, points, 64 * 1024 * MiB)


@pytest.mark.azurite
def test_azurite_on_disk_serves_and_leaves_no_folder(capsys):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    from movebench.families import io as io_family

    with io_family._azurite(on_disk=True) as service:
        location = Path(service.location)
        assert location.is_dir() and azurite_service.answers(service.port)
        assert os.environ[io_family.AZURITE_ENV] == service.connection_string
    assert not location.exists() and not azurite_service.answers(service.port)
    assert f"blobs on disk in {location}" in capsys.readouterr().err


def test_azurite_run_without_node_says_so(tmp_path):
    # A PATH holding only python: no node, no npm.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    env = kernel_env(PATH=str(bin_dir))
    done = subprocess.run([sys.executable, "-m", "movebench.services.azurite", "run", "--", "python3", "-c", "1"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "cannot start Azurite: node is not on PATH" in done.stderr


def test_azurite_is_installed_locally_and_ignored_by_git():
    root = Path(__file__).resolve().parents[1]
    assert ".node/" in (root / ".gitignore").read_text().split()


# --- the workflow's hook: Azurite when a blob point on the emulator is about to run ---


def _emulated_section(tmp_path):
    return validate({"posix": {"path": str(tmp_path)}, "backends": ["posix", "blob"], "blob": {"emulator": "azurite"}})[
        "io"
    ]


@pytest.mark.azurite
def test_services_hook_starts_azurite_for_blob_points_and_stops_it(tmp_path, monkeypatch, capsys):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    section = _emulated_section(tmp_path)
    points = io_family.FAMILY.points(section)
    posix_only = [p for p in points if p["backend"] == "posix"]
    assert io_family.FAMILY.services(section, {"name": "t"}, posix_only) is None  # nothing to serve
    with io_family.FAMILY.services(section, {"name": "t"}, points):
        connection = os.environ[io_family.AZURITE_ENV]
        port = int(connection.split("127.0.0.1:")[1].split("/")[0])
        assert azurite_service.answers(port)
        blob = next(p for p in points if p["backend"] == "blob")
        assert io_family.FAMILY.kernel_settings(blob, section, {"name": "t"})["connection_string_env"] == (
            io_family.AZURITE_ENV)
    assert io_family.AZURITE_ENV not in os.environ
    assert not azurite_service.answers(port)
    assert "Azurite up on 127.0.0.1" in capsys.readouterr().err


def test_blob_on_azurite_without_node_is_refused_before_any_job(tmp_path, monkeypatch):
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, no npm
    message = problems({"posix": {"path": str(tmp_path)}, "backends": ["posix", "blob"],
                        "blob": {"emulator": "azurite"}})
    assert "io.backends = [posix, blob]: blob runs on Azurite" in message and "node is not on PATH" in message


def test_an_emulated_blob_never_takes_a_real_account(monkeypatch, tmp_path):
    monkeypatch.setenv(io_family.AZURITE_ENV, "AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net")
    message = problems({"posix": {"path": str(tmp_path)}, "backends": ["blob"], "blob": {"emulator": "azurite"}})
    assert "io.blob.emulator = 'azurite': MOVEBENCH_AZURITE_CONNECTION_STRING names a blob endpoint" in message


def test_request_timeout_default_and_a_timeout_the_campaign_kills_first_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(CONN_ENV, FAKE_BLOB)
    section = {"backends": ["blob"], "blob": {"connection_string_env": CONN_ENV}}
    assert validate(section)["io"]["request_timeout_s"] == 30
    with pytest.raises(campaign_config.ConfigError) as caught:
        campaign_config.validate({"campaign": {"timeout": 60}, "io": {**section, "request_timeout_s": 60}})
    message = caught.value.message()
    assert "io.request_timeout_s = 60: must be below campaign.timeout = 60 s" in message
    # Only cloud backends make requests: posix alone keeps whatever request_timeout_s says.
    campaign_config.validate({"campaign": {"timeout": 60},
                              "io": {"posix": {"path": str(tmp_path)}, "request_timeout_s": 600}})


SAS = "sv=2024-01-01&ss=b&srt=sco&sp=rwdlac&se=2099-01-01&sig=CanarySignature0123456789abcdefAAAA%3D"


@pytest.mark.parametrize("backend", ["blob", "fileshare"])
def test_an_endpoint_that_never_answers_ends_in_one_line_without_the_secret(backend, monkeypatch):
    service = "blob" if backend == "blob" else "file"
    with silent_endpoint() as port:
        endpoint = f"http://127.0.0.1:{port}/devstoreaccount1"
        secret = azurite_service.DEV_KEY if backend == "blob" else SAS
        credential = f"AccountKey={secret}" if backend == "blob" else f"SharedAccessSignature={secret}"
        monkeypatch.setenv(CONN_ENV, f"AccountName=devstoreaccount1;{credential};"
                                     f"{service.capitalize()}Endpoint={endpoint}")
        settings = {"connection_string_env": CONN_ENV, "credentials_file": None, "block_size": 1 << 20,
                    "range_size": 1 << 20, "max_concurrency": 1, "request_timeout_s": 0.5,
                    "retry": {"total": 2, "initial_backoff_s": 0.05, "increment_base_s": 0.1, "jitter_s": 0}}
        store = open_backend(backend, settings)
        started = time.monotonic()
        with pytest.raises(Exception) as caught:
            store.remove_leftovers("mbio-")
        took = time.monotonic() - started
    # 3 tries of 0.5 s and two short backoffs: the SDK's own timeout ended it, not a test timeout.
    assert 1.4 < took < 15, took
    line = store.reason(caught.value)
    assert line == (f"io {backend}: the endpoint {endpoint} did not answer "
                    "within 0.5 s (io.request_timeout_s; retried 2 times)")
    assert secret not in line and "sig=" not in line
    assert store.retries == 2


def test_a_refused_connection_is_not_called_unanswered(monkeypatch):
    # Nothing listens: the error's own text (connection refused) says it, not "did not answer".
    with silent_endpoint() as port:
        pass
    monkeypatch.setenv(CONN_ENV, azurite_service.connection_string(port))
    settings = {"connection_string_env": CONN_ENV, "credentials_file": None, "block_size": 1 << 20,
                "max_concurrency": 1, "request_timeout_s": 0.5,
                "retry": {"total": 0, "initial_backoff_s": 0, "increment_base_s": 0, "jitter_s": 0}}
    store = open_backend("blob", settings)
    with pytest.raises(Exception) as caught:
        store.remove_leftovers("mbio-")
    assert store.reason(caught.value) is None
    assert "ServiceRequestError" in azure.describe_error(caught.value)
