"""A campaign's services stopped between the points that need them (movebench.services.hold), on a real Azurite."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import snakemake
from movebench.campaign import CampaignRun
from movebench.families import io as io_family
from movebench.services import azurite as azurite_service
from movebench.services import hold
from test_hardening import SLOW, finish, snakemake_cmd, start, wait_for, write

pytestmark = pytest.mark.azurite

BLOB = {"pattern": "sfmw", "backend": "blob", "nodes": 1, "ranks": 2, "size_per_proc": 65536}
POSIX = {**BLOB, "backend": "posix"}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def azurite():
    why = azurite_service.node_missing()
    if why:
        pytest.skip(why)
    with azurite_service.Azurite() as service:
        yield service
    assert not Path(service.log_path).exists()  # the log it made in /tmp went with it


@pytest.fixture
def published(azurite, monkeypatch):
    """Azurite published for io's blob points and paused, as the campaign leaves it; running again afterwards."""
    for name, value in hold.publish({"io": [azurite.pid]}, {"io": [BLOB]}).items():
        monkeypatch.setenv(name, value)
    hold.pause_all()
    yield azurite
    hold.resume([azurite.pid])


def state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def upload_and_read_back(connection_string: str) -> bytes:
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(connection_string, retry_total=0, connection_timeout=5,
                                                       read_timeout=10)
    container = service.get_container_client(f"mbhold-{uuid.uuid4().hex[:12]}")
    container.create_container()
    try:
        data = os.urandom(64 * 1024)
        container.upload_blob("part", data)
        assert container.download_blob("part").readall() == data
        return data
    finally:
        container.delete_container()


def test_a_paused_service_neither_answers_nor_uses_cpu(published):
    assert state(published.pid) == "T"
    assert not azurite_service.answers(published.port)
    before = hold.cpu_seconds([published.pid])
    time.sleep(1.5)  # Azurite's timers run every second or so when it may
    assert hold.cpu_seconds([published.pid]) == before


def test_held_for_a_blob_point_serves_it_and_pauses_again(published):
    with hold.held("io", [POSIX, BLOB]) as services:
        assert state(published.pid) != "T"
        assert azurite_service.answers(published.port)
        upload_and_read_back(published.connection_string)
    assert state(published.pid) == "T" and not azurite_service.answers(published.port)
    assert services.cpu_seconds() > 0 and services.pids == [published.pid]


def test_held_for_posix_points_leaves_it_paused(published):
    with hold.held("io", [POSIX]) as services:
        assert state(published.pid) == "T"
    assert state(published.pid) == "T"
    assert services.cpu_seconds() is None and services.pids == []


def test_held_pauses_again_when_the_launch_raises(published):
    with pytest.raises(RuntimeError), hold.held("io", [BLOB]):
        assert state(published.pid) != "T"
        raise RuntimeError("the kernel failed")
    assert state(published.pid) == "T"


def test_overlapping_launches_pause_it_only_when_the_last_ends(published):
    with hold.held("io", [BLOB]):
        with hold.held("io", [BLOB]):
            pass
        assert state(published.pid) != "T"  # the outer launch still runs against it
        with hold.held("io", [POSIX]):
            assert state(published.pid) != "T"
    assert state(published.pid) == "T"


def test_a_posix_point_pauses_what_a_killed_launch_left_running(published):
    hold.resume([published.pid])  # as a launch SIGKILLed inside `held` leaves it
    with hold.held("io", [POSIX]):
        assert state(published.pid) == "T"
    hold.resume([published.pid])
    with hold.held("shuffle", [{"pattern": "uni"}]) as services:
        assert state(published.pid) == "T"
    assert services.cpu_seconds() is None


def test_nothing_published_nothing_done(azurite, monkeypatch):
    monkeypatch.delenv(hold.ENV_VAR, raising=False)
    with hold.held("io", [BLOB]) as services:
        assert azurite_service.answers(azurite.port)
    assert services.cpu_seconds() is None and state(azurite.pid) != "T"
    assert hold.publish({}) == {} and hold.publish({"io": []}) == {}


def test_a_reused_pid_is_never_signalled(azurite):
    environ = hold.publish({"io": [azurite.pid]})
    entry = json.loads(environ[hold.ENV_VAR])
    entry["io"]["starts"] = [entry["io"]["starts"][0] + 1]  # another process than the one published
    environ = {hold.ENV_VAR: json.dumps(entry)}
    hold.pause_all(environ)
    with hold.held("io", [BLOB], environ) as services:
        pass
    assert state(azurite.pid) != "T" and services.cpu_seconds() is None


def test_too_many_points_to_publish_hold_for_every_point():
    many = [{**BLOB, "size_per_proc": size} for size in range(20000)]
    entry = json.loads(hold.publish({"io": [os.getpid()]}, {"io": many})[hold.ENV_VAR])
    assert entry["io"]["points"] is None


def test_the_campaign_pauses_its_azurite_and_its_end_stops_it_paused(tmp_path, monkeypatch):
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    monkeypatch.delenv(hold.ENV_VAR, raising=False)
    run = CampaignRun({"campaign": {"results_dir": str(tmp_path / "results")}}, {}, {})
    run.enter_services({"io": io_family._azurite()}, {"io": [POSIX, BLOB]})
    entry = hold.published()["io"]
    pid = entry["pids"][0]
    assert entry["points"] == [hold.digest(BLOB)] and state(pid) == "T"
    started = time.monotonic()
    run.services.close()
    assert time.monotonic() - started < 5  # SIGTERM acted on, not the SIGKILL ten seconds later
    assert not Path(f"/proc/{pid}").exists()
    assert hold.ENV_VAR not in os.environ and io_family.AZURITE_ENV not in os.environ


def test_a_killed_campaign_leaves_no_stopped_azurite():
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    script = ("import sys, time\nfrom movebench.services import azurite, hold\n"
              "service = azurite.Azurite(die_with_parent=True).start()\nhold.pause([service.pid])\n"
              "print(service.pid, flush=True)\ntime.sleep(600)\n")
    campaign = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(campaign.stdout.readline())
    assert state(pid) == "T"
    campaign.kill()
    campaign.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and state(pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or state(pid) == "Z"


@pytest.mark.pipeline
def test_blob_points_hold_the_workflows_azurite_and_posix_points_do_not(campaign, monkeypatch, tmp_path):
    """Through snakemake and launch: the blob point finds its Azurite running, the posix point holds nothing."""
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    monkeypatch.delenv(hold.ENV_VAR, raising=False)
    workdir = campaign({
        "campaign": {"name": "io-hold", "results_dir": "results",
                     "launches": 1, "repetitions": 2, "warmups": 0, "timeout": 120},
        "io": {"patterns": ["sfmw"], "backends": ["posix", "blob"], "size_per_proc": ["64KiB"], "ranks": [2],
               "posix": {"path": str(tmp_path / "target")}, "blob": {"emulator": "azurite"}},
    })
    proc = snakemake(workdir, timeout=600)
    raw = workdir / "results" / "raw" / "io"
    for path in raw.rglob("*.jsonl"):
        assert all(json.loads(line)["ok"] for line in path.read_text().splitlines())
    loads = {p.as_posix().split("backend~")[1].split("/")[0]: json.loads(p.read_text())["host_load"]
             for p in raw.rglob("*.meta.json")}
    assert loads["blob"]["services_cpus"] >= 0 and "services_cpus" not in loads["posix"]
    pid = int(re.search(r"Azurite up on 127\.0\.0\.1:\d+ \(pid (\d+)\)", proc.stdout + proc.stderr).group(1))
    assert not Path(f"/proc/{pid}").exists() or state(pid) == "Z"


@pytest.mark.pipeline
def test_ctrl_c_while_another_familys_point_runs_stops_the_paused_azurite(tmp_path, monkeypatch):
    """A shuffle point runs beside a stopped Azurite; Ctrl-C then must end Azurite, not leave it stopped."""
    if azurite_service.node_missing():
        pytest.skip(azurite_service.node_missing())
    monkeypatch.delenv(io_family.AZURITE_ENV, raising=False)
    monkeypatch.delenv(hold.ENV_VAR, raising=False)
    work = write(tmp_path / "work", {**SLOW, "io": {"patterns": ["sfmw"], "backends": ["blob"],
                                                     "size_per_proc": ["64KiB"], "blob": {"emulator": "azurite"}}})
    proc = start(snakemake_cmd(work), work)
    console = work / "console.txt"
    wait_for(lambda: "Azurite up" in console.read_text(), timeout=300)
    pid = int(re.search(r"Azurite up on 127\.0\.0\.1:\d+ \(pid (\d+)\)", console.read_text()).group(1))
    logs = work / "results" / "logs" / "shuffle"
    assert wait_for(lambda: any("movebench: " in log.read_text() for log in logs.rglob("*.log"))
                    if logs.exists() else False, timeout=300, every=0.1)
    assert state(pid) == "T"
    os.killpg(proc.pid, signal.SIGINT)
    text = finish(proc, work)
    assert proc.returncode != 0 and "Azurite stopped" in text, text[-3000:]
    assert not Path(f"/proc/{pid}").exists() or state(pid) == "Z"
