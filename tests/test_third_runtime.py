"""A third runtime plugs in from one file: `plain` (one process, neither MPI nor Dragon) is written here into a
temporary folder named in MOVEBENCH_RUNTIMES, a small family that declares it (`memcopy`, a bytes copy) into one
named in MOVEBENCH_FAMILIES, and `python -m movebench.engine.launch` runs its points end to end: the runtime's
environment, its check before the start, its watch over the output and what it adds to the meta all take effect,
and nothing in the engine names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

RUNTIME = '''
"""plain: the kernel as one process of this Python, its own report lines held back and put into the meta."""
from movebench.engine.launchers import CannotStart, Runtime, Watch

#: the most bytes a point may copy (a check before the start)
LIMIT = 1 << 20


class PlainWatch(Watch):
    def __init__(self):
        self.reports, self.pid = [], None

    def started(self, pid):
        self.pid = pid

    def swallow(self, line):
        if line.startswith("plain-report:"):
            self.reports.append(line.split(":", 1)[1].strip())
            return True
        return False

    def summary_lines(self):
        return [f"plain: {len(self.reports)} report line(s) held back"]

    def meta(self, task, kernel_meta):
        return {"plain": {"reports": self.reports, "launcher_pid": self.pid}}, []


class Plain(Runtime):
    name = "plain"

    def environment(self, task, env):
        return {**env, "PLAIN_POINT_SIZE": str(task.point["size"])}

    def prepare(self, task, say):
        if task.point["size"] > LIMIT:
            raise CannotStart(f"plain: {task.point['size']} bytes is more than the {LIMIT} a plain point may copy")

    def watch(self):
        return PlainWatch()


RUNTIME = Plain()
'''

FAMILY = '''
from movebench.core.sizes import expand_sizes
from movebench.spec import Axis, Family, Setting


class MemCopy(Family):
    name = "memcopy"
    runtime = "plain"
    variant = "operation"
    axes = (Axis("operation", "operations"), Axis("size", "sizes", expand_sizes))
    settings = (Setting("copies"),)


FAMILY = MemCopy()
'''

KERNEL = '''
import os
import time

from movebench.core import records
from movebench.core.adaptive import AdaptiveRepetitions
from movebench.core.runner import counted_value, each_task, write


def measure_task(task, group_meta):
    started = time.time()
    source = bytearray(os.urandom(task.point["size"]))
    reps, recs = AdaptiveRepetitions(task.policy, task.warmups), []
    for rep, warmup in reps:
        start = time.perf_counter()
        for _ in range(task.settings["copies"]):
            copy = bytes(source)
        elapsed = time.perf_counter() - start
        assert copy == source
        recs.append(records.record(task.family, task.variant, task.point, rep, warmup, elapsed_s=elapsed,
                                   nbytes=len(source) * task.settings["copies"]))
        if not warmup:
            reps.add(counted_value(recs[-1]))
    for rec in recs:
        rec.update(reps.decision.record_fields())
    print(f"plain-report: copied in process {os.getpid()}", flush=True)
    write(task, recs, kernel_start=started, repetitions=task.repetitions,
          environment_size=os.environ["PLAIN_POINT_SIZE"], **group_meta)


def main():
    for task, group_meta in each_task():
        measure_task(task, group_meta)


if __name__ == "__main__":
    main()
'''

SCHEMA = '''
type: object
additionalProperties: false
properties:
  operations: {type: array, minItems: 1, default: [copy], items: {enum: [copy]}, description: The loop measured.}
  sizes: {$ref: "#/$defs/sizes", default: [4KiB], description: Bytes copied per copy.}
  copies: {type: integer, minimum: 1, default: 10, description: Copies per repetition.}
'''


@pytest.fixture
def third(tmp_path):
    runtimes, families = tmp_path / "site-runtimes", tmp_path / "site-families" / "memcopy"
    runtimes.mkdir()
    families.mkdir(parents=True)
    (runtimes / "plain.py").write_text(textwrap.dedent(RUNTIME))
    for name, text in (("__init__.py", FAMILY), ("kernel.py", KERNEL), ("schema.yaml", SCHEMA)):
        (families / name).write_text(textwrap.dedent(text))
    return {**os.environ, "MOVEBENCH_RUNTIMES": str(runtimes), "MOVEBENCH_FAMILIES": str(families.parent),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}


def python(code: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def launch(tmp_path: Path, size: int, env: dict) -> tuple[subprocess.CompletedProcess, Path]:
    task = python(f"""
import json
from movebench import families
print(json.dumps(families.load("memcopy").task({{"operation": "copy", "size": {size}}}, {{"copies": 5}}, 4, 1)
      .to_dict()))""", env)
    out = tmp_path / "raw" / f"size~{size}.jsonl"
    done = subprocess.run([sys.executable, "-m", "movebench.engine.launch", "--task", json.dumps(task),
                           "--out", str(out), "--meta", str(out.with_suffix(".meta.json")),
                           "--failed", str(tmp_path / f"{size}.json"),
                           "--log", str(tmp_path / f"{size}.log"), "--timeout", "60"],
                          capture_output=True, text=True, env=env, timeout=120)
    return done, out


def test_a_runtime_from_one_file_runs_a_family_through_launch(third, tmp_path):
    engine = python("""
import json
from movebench import campaign
from movebench.engine import launchers
print(json.dumps({"names": launchers.names(), "tasks": launchers.job_resources("memcopy", {"operation": "copy",
                  "size": 8}, {})["tasks"], "sources": campaign.kernel_sources("memcopy")}))""", third)
    assert "plain" in engine["names"] and engine["tasks"] == 1
    assert any(path.endswith("site-runtimes/plain.py") for path in engine["sources"])  # its edit reruns the points

    done, out = launch(tmp_path, 4096, third)
    assert done.returncode == 0, (done.stderr, (tmp_path / "4096.log").read_text())
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    counted = [r for r in recs if not r["warmup"]]
    assert len(recs) == 5 and len(counted) == 4
    assert all(r["ok"] and r["bytes"] == 4096 * 5 and r["elapsed_s"] > 0 for r in recs)
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["environment_size"] == "4096"  # the runtime's environment reached the kernel
    (report,) = meta["plain"]["reports"]  # the runtime's watch held its line back and put it in the meta
    assert report.startswith("copied in process ") and meta["plain"]["launcher_pid"] == int(report.split()[-1])
    assert meta["command"].split()[1:3] == ["-m", "movebench.families.memcopy.kernel"]
    assert "transport" not in meta and "stack" not in meta  # the mpi runtime's additions are its own
    log = (tmp_path / "4096.log").read_text()
    assert "plain-report:" not in log and "plain: 1 report line(s) held back" in log


def test_the_runtimes_check_before_the_start_fails_the_point_with_its_reason(third, tmp_path):
    done, out = launch(tmp_path, 2 << 20, third)
    assert done.returncode == 1 and not out.exists()
    failure = json.loads((tmp_path / f"{2 << 20}.json").read_text())
    assert failure["error"] == f"plain: {2 << 20} bytes is more than the {1 << 20} a plain point may copy"
    assert failure["family"] == "memcopy" and failure["size"] == 2 << 20 and not failure["ok"]
    assert "FAILED: plain:" in done.stderr


def test_a_family_naming_no_runtime_is_refused_with_the_runtimes_there_are(third):
    bad = dict(third, MOVEBENCH_RUNTIMES="")
    done = subprocess.run([sys.executable, "-c",
                           "from movebench.engine import launchers; launchers.of_family('memcopy')"],
                          capture_output=True, text=True, env=bad, timeout=60)
    assert done.returncode != 0
    assert "family memcopy: runtime = 'plain': no such runtime; valid: dragon, mpi" in done.stderr
