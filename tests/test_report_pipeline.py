"""The report's verdicts on a real tiny campaign: calibration points bound the other families' bandwidths,
findings and a table of contents come first, every family opens with Published vs measured here, and two
swept values of one campaign are compared point by point with --match-ignoring."""

import json
import re

import pandas as pd
import pytest

from conftest import snakemake
from movebench.cli import main
from movebench.judging import compare
from test_pipeline import Tables

pytestmark = pytest.mark.pipeline

KiB = 1024
CAMPAIGN = {
    "campaign": {"name": "bounded", "results_dir": "results",
                 "launches": 1, "repetitions": 6, "warmups": 1, "timeout": 120},
    "calibration": {"probes": ["memcpy", "fio"], "ranks": [2], "memcpy_sizes": ["4KiB", "64KiB"],
                    "repetition_time": 0.01, "fio_patterns": ["sfmw"], "fio_sizes": ["1MiB"]},
    "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], "message_sizes": ["4KiB", "64KiB"], "windows": [1, 4],
                "iterations": 20},
    "io": {"patterns": ["sfmw"], "backends": ["posix"], "size_per_proc": ["1MiB"], "ranks": [2]},
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bounded")
    config = json.loads(json.dumps(CAMPAIGN))
    config["io"]["posix"] = {"path": str(workdir / "io")}
    config["calibration"]["fio_path"] = str(workdir / "io")  # fio bounds io where io writes
    (workdir / "config.yaml").write_text(json.dumps(config))
    snakemake(workdir)
    return workdir / "results"


def _summary(html, family):
    part = html[html.index(f'<h2 id="{family}">'):]
    part = part[part.index(f'id="{family}-summary"'):]
    parser = Tables()
    parser.feed(part)
    return parser.tables[0]


def test_every_bandwidth_point_has_its_bound_and_share(finished):
    html = (finished / "report.html").read_text()
    for family, kind in (("shuffle", "memcpy, 2 processes at "), ("io", "fio sfmw, 2 jobs at 1MiB")):
        table = _summary(html, family)
        header = table[0]
        assert "% of bound" in header and "bound" in header
        for row in table[1:]:
            cells = dict(zip(header, row, strict=True))
            assert cells["bound"].startswith(kind) and float(cells["% of bound"].rstrip(" ⚠")) > 0
    shuffle = dict(zip(_summary(html, "shuffle")[0], _summary(html, "shuffle")[1], strict=True))
    # the nearest memcpy size bounds each message size
    assert shuffle["message_size"] in ("4KiB", "64KiB") and shuffle["bound"].endswith(shuffle["message_size"])
    # % of bound is the point's median over the memcpy median at that size, both from the tables
    summary = pd.read_csv(finished / "tables" / "shuffle_summary.csv")
    calibration = pd.read_csv(finished / "tables" / "calibration_summary.csv")
    point = summary[(summary["measure"] == "bandwidth_Bps")].iloc[0]
    bound = calibration[(calibration["measure"] == "bandwidth_Bps") & (calibration["probe"] == "memcpy")
                        & (calibration["size"] == point["message_size"])]["median"].iloc[0]
    row = next(dict(zip(_summary(html, "shuffle")[0], r, strict=True)) for r in _summary(html, "shuffle")[1:]
               if r[-1] == f"raw/shuffle/{point['point']}.jsonl")
    assert float(row["% of bound"].rstrip(" ⚠")) == pytest.approx(100 * point["median"] / bound, rel=5e-3)
    # a row above 100% of its bound is marked; one below is not
    for family in ("shuffle", "io"):
        part = html[html.index(f'id="{family}-summary"'):]
        part = part[:part.index("</table>")]
        for marked, row in re.findall(r'<tr( class="above")?>(<td.*?)</tr>', part, re.S):
            share = float(re.findall(r"<td[^>]*>([\d.]+)(?: ⚠)?</td>", row)[-1])
            assert bool(marked) == (share > 100), row


def test_the_report_opens_with_contents_findings_and_published_vs_measured(finished):
    html = (finished / "report.html").read_text()
    assert html.index('id="contents"') < html.index('id="findings"') < html.index('id="overview"')
    findings = re.findall(r'<li class="(bad|warn|info)">(.*?) <a class="more"', html, re.S)
    texts = [t for _, t in findings]
    assert any(t.startswith("shuffle: uni at 4KiB, 2 ranks: window 4 moves ") for t in texts)
    assert any(t.startswith("calibration: memcpy: 2 processes copy ") for t in texts)
    assert any(t.startswith("Published vs measured here: ") for t in texts)
    # how quiet the host was and what the campaign resolves lead, whatever their level (findings.build); the rest
    # worst first
    lead = [t.startswith(("The host was", "Detectable change:")) for t in texts]
    assert lead[:sum(lead)] == [True] * sum(lead) and texts[0].startswith("The host was")
    levels = [level for (level, _), leading in zip(findings, lead, strict=True) if not leading]
    assert levels == sorted(levels, key=("bad", "warn", "info").index)
    for family in ("shuffle", "io"):
        part = html[html.index(f'<h2 id="{family}">'):]
        assert part.index(f'id="{family}-published"') < part.index('<img class="plot"')
    assert "not measured</span>: 4 references of Benchmarking and Optimizations of Data Shuffling" in html
    assert any(re.fullmatch(r"bandwidth \((GB|MB|kB)/s\)", h) for h in _summary(html, "io")[0])  # human units


def test_two_values_of_one_campaign_compared_point_by_point(finished, tmp_path, capsys):
    rc = main(["compare", str(finished), str(finished), "--match-ignoring", "window=4:1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "matched ignoring window (BASE 4, NEW 1); left out: 4 base points" in out
    frame = pd.read_csv(tmp_path / "compare.csv")
    shuffle = frame[frame["family"] == "shuffle"]
    assert set(shuffle["point"].str.extract(r"window~(\d+)")[0]) == {"4"}
    assert set(shuffle["point_new"].str.extract(r"window~(\d+)")[0]) == {"1"}
    assert len(shuffle[["point"]].drop_duplicates()) == 4 and not shuffle["verdict"].isin(
        [compare.ONLY_BASE, compare.ONLY_NEW]).any()
    # other families have no window: each point is paired with itself
    io = frame[frame["family"] == "io"]
    assert (io["point"] == io["point_new"]).all() and set(io["verdict"]) <= {"unchanged", "inconclusive"}
