"""A non-editable `pip install .` validates a campaign and renders a report: its schemas, templates and published
references come through the package (movebench.core.resources), not from a checkout."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import PYTHON, ROOT


@pytest.mark.pipeline
def test_an_installed_movebench_validates_and_renders(tmp_path):
    target = tmp_path / "site"
    subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([PYTHON, str(ROOT / "tests" / "installed" / "validate_and_render.py"), str(target)],
                          cwd=work, env={**os.environ, "PYTHONPATH": str(target)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["refused"].endswith("shuffle.windows[0] = 0: must be >= 1")
    assert (work / out["report"]).is_file() and "movebench: inst" in out["html"] and "pattern~uni" in out["html"]
