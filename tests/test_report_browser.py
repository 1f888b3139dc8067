"""The report as a person sees it: headless Chromium loads it with no console message."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import snakemake
from test_pipeline import TINY

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--window-size=1300,3000"]


def open_in_chromium(page: Path, screenshot: Path, profile: Path) -> list[str]:
    """Console messages the page produced while Chromium rendered it to `screenshot`."""
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert screenshot.exists() and screenshot.stat().st_size > 10_000, proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def chromium():
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs Debian's chromium (or: apt-get install chromium)")
    return CHROMIUM


def test_console_errors_are_caught_by_this_check(chromium, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><p>" + "x " * 5000 + "</p><script>undefinedFunction();</script></body></html>")
    messages = open_in_chromium(page, tmp_path / "bad.png", tmp_path / "profile")
    assert any("undefinedFunction is not defined" in m for m in messages)


def test_report_opens_without_console_messages(chromium, tmp_path):
    # with calibration points, so that the page shows upper bounds, % of bound and the findings they give
    config = {**TINY, "calibration": {"probes": ["memcpy"], "ranks": [2], "memcpy_sizes": ["4KiB"],
                                      "repetition_time": 0.01}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    snakemake(tmp_path)
    report = tmp_path / "results" / "report.html"
    # in the test's own folder (pytest keeps the last few sessions' folders): the checkout's results/ is the user's
    screenshot = tmp_path / "report-screenshot.png"
    messages = open_in_chromium(report, screenshot, tmp_path / "profile")
    print(f"\nscreenshot: {screenshot}")
    assert messages == []
