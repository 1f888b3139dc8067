"""campaign.timeout is each point's, in a launch group too (issue 41): the launch's deadline restarts when a member
finishes, so a stuck member is stopped after its own timeout, not its group's added up; it fails as timed out, the
members before it keep their records and those after it fail as never started."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import MPIEXEC
from movebench import families
from movebench.engine.launch import Deadline

PYTHON = sys.executable

# An MPI launcher whose launch group hangs after its first point: it runs the kernel on a group file of the first
# task alone, then waits as a kernel stuck in its second point would (launch's SIGINT ends it).
STUCK_AFTER_FIRST = """#!{python}
import json, os, subprocess, sys, time
group = json.load(open(sys.argv[-1]))
first = os.path.join(os.path.dirname(sys.argv[0]), "first.json")
with open(first, "w") as f:
    json.dump({{**group, "group": group["group"][:1]}}, f)
subprocess.run([{mpiexec!r}, *sys.argv[1:-1], first], check=True)
time.sleep(3600)
"""


def test_the_deadline_restarts_when_a_point_finishes():
    deadline = Deadline(10, now=100.0)
    assert deadline.left(105.0) == 5.0 and deadline.left(111.0) == 0.0
    deadline.progress(1, now=108.0)  # the first point done: the second has its own 10 s from now
    assert deadline.left(111.0) == 7.0 and deadline.left(118.0) == 0.0
    deadline.progress(1, now=117.0)  # no new point finished: no more time
    assert deadline.left(118.0) == 0.0
    deadline.progress(3, now=120.0)  # two finished between two looks: one restart, from when it was seen
    assert deadline.finished == 3 and deadline.left(125.0) == 5.0


@pytest.mark.mpi
def test_a_stuck_member_times_out_alone_and_the_launch_ends_on_its_own_timeout(tmp_path):
    timeout = 30  # well above one small point's launch and run on a loaded machine, far below 3 x 30 s
    fam = families.load("shuffle")
    tasks = [fam.task({"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": size, "window": 1},
                      {"iterations": 3, "repetition_time": 0.5}, repetitions=1, warmups=0)
             for size in (1024, 2048, 4096)]
    raw, failed = tmp_path / "raw", tmp_path / "failed"
    outs = [raw / f"p{i}.jsonl" for i in range(3)]
    metas = [raw / f"p{i}.meta.json" for i in range(3)]
    launcher = tmp_path / "stuck.py"
    launcher.write_text(STUCK_AFTER_FIRST.format(python=PYTHON, mpiexec=MPIEXEC))
    launcher.chmod(0o755)
    proc = subprocess.run([PYTHON, "-m", "movebench.engine.launch", "--group",
                           json.dumps({"name": "g", "group": [t.to_dict() for t in tasks]}), "--launcher",
                           str(launcher), "--timeout", str(timeout), "--records", *map(str, outs), "--metas",
                           *map(str, metas), "--failed", str(failed)],
                          capture_output=True, text=True, timeout=6 * timeout)
    story = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 1, story
    # the first point in the launch's order finished: its records and meta stand
    done = [i for i, out in enumerate(outs) if out.exists()]
    assert len(done) == 1 and metas[done[0]].exists(), story
    meta = json.loads(metas[done[0]].read_text())
    order = meta["launch_group"]["order"]
    assert meta["launch_group"]["position"] == 0 and len(order) == 3
    # the second timed out, on its own timeout; the third never started
    record = {where: json.loads((failed / "shuffle" / f"{where}.json").read_text()) for where in order[1:]}
    stuck, after = record[order[1]], record[order[2]]
    assert stuck["error"] == f"timed out after {timeout} s (campaign.timeout)", story
    assert after["error"] == (f"never started: point {order[1]}, before it in its launch group, ran past "
                              f"campaign.timeout ({timeout} s) and the launch was stopped"), story
    assert "timed out" not in after["error"]  # the report counts only the stuck point as stopped on its limit
    assert [r["launch_group"]["position"] for r in (stuck, after)] == [1, 2]
    assert f"shuffle {order[1]} FAILED: timed out after {timeout} s" in proc.stderr
    # the stuck point had its own timeout from the first one's finish (a load only makes the launch end later)...
    assert stuck["end"] - meta["kernel_end"] >= timeout - 1, stuck["end"] - meta["kernel_end"]
    # ...and the launch ended on it, not on the group's (3 x timeout)
    assert stuck["end"] - stuck["start"] < 2 * timeout + 15, stuck["end"] - stuck["start"]
    assert not [p for p in raw.iterdir() if p.name.startswith(".")]  # no temporary file left
