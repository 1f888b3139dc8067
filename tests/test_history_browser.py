"""The history as a person sees it: a campaign with campaign.history adds itself at its end, its report links to the
history page, and headless Chromium loads that page (with change points drawn) with no console message."""

import copy
import json
from html.parser import HTMLParser

import pytest

from conftest import snakemake
from history_support import write_series
from movebench.cli import main
from movebench.judging.history import store
from test_pipeline import TINY
from test_report_browser import chromium, open_in_chromium  # noqa: F401 - chromium is a fixture

pytestmark = pytest.mark.browser


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.images = [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.hrefs.append(attrs.get("href"))
        if tag == "img" and (attrs.get("src") or "").startswith("data:image/png;base64,"):
            self.images += 1


def test_a_campaign_adds_itself_and_its_history_page_opens_clean(chromium, tmp_path):  # noqa: F811
    history = tmp_path / "shared" / "history.duckdb"
    # nightly runs of another campaign in the same store, one point 1.5x slower from run 7 on
    for folder in write_series(tmp_path / "nightly", 10, step_at=7, step=1.5, change_meta_at=7):
        assert main(["history", "add", str(folder), "--store", str(history), "--no-page"]) == 0
    config = copy.deepcopy(TINY)
    config["campaign"]["history"] = str(history)
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    proc = snakemake(tmp_path)
    assert "added to the history store" in proc.stderr
    runs, _ = store.load(history)
    assert sorted(runs["campaign"]) == ["nightly"] * 10 + ["tiny"]
    page = store.default_page(history)
    report = tmp_path / "results" / "report.html"
    links = Links()
    links.feed(report.read_text())
    assert "../shared/history.html" in links.hrefs
    assert (report.parent / "../shared/history.html").resolve() == page.resolve()
    text = page.read_text()
    seen = Links()
    seen.feed(text)
    assert seen.images >= 2  # the changed series' figures (elapsed and bandwidth), drawn inline
    assert "mpi_library: MPICH -&gt; Open MPI" in text and "tiny, started" in text and "http" not in text
    messages = open_in_chromium(page, tmp_path / "history.png", tmp_path / "profile")
    assert messages == []
