"""The whole pipeline with snakemake on tiny campaigns in temp folders."""

import json
import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from conftest import MPIEXEC, snakemake
from movebench.core.records import read_jsonl

pytestmark = pytest.mark.pipeline

TINY = {
    "campaign": {"name": "tiny", "results_dir": "results",
                 "launches": 1, "repetitions": 3, "warmups": 1, "timeout": 60},
    "shuffle": {"patterns": ["uni", "bidi", "shuffle"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4],
                "iterations": 5, "tuples_per_rank": 2000, "tuple_size": 32, "skew": [0]},
}


class Tables(HTMLParser):
    """The report's tables as lists of rows of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def jobs_planned(proc) -> dict:
    """Snakemake's dry-run job counts per rule."""
    counts = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A tiny campaign run once; the tests below read it (and one of them extends it)."""
    workdir = tmp_path_factory.mktemp("campaign")
    (workdir / "config.yaml").write_text(json.dumps(TINY))
    snakemake(workdir)
    return workdir


def test_records_tables_and_report_exist(finished):
    raw = finished / "results" / "raw" / "shuffle"
    records = sorted(raw.rglob("*.jsonl"))
    assert len(records) == 3
    for path in records:
        recs = read_jsonl(path)
        assert len(recs) == 4 and sum(r["warmup"] for r in recs) == 1
        meta = json.loads(path.with_name(path.name.replace(".jsonl", ".meta.json")).read_text())
        assert meta["config_hash"] and meta["launcher"] == "mpiexec" and meta["ranks"] == 2
    for name in ("shuffle.csv", "shuffle.parquet", "shuffle_summary.csv"):
        assert (finished / "results" / "tables" / name).stat().st_size > 0
    assert (finished / "results" / "logs" / "report.log").exists()
    assert len(list((finished / "results" / "logs" / "shuffle").rglob("*.log"))) == 3


def test_meta_names_the_commit_and_packages_the_campaign_looked_up_once(finished):
    from movebench.core import envinfo

    metas = [json.loads(p.read_text()) for p in (finished / "results" / "raw" / "shuffle").rglob("*.meta.json")]
    assert metas and all(m["packages"] == envinfo.package_versions() and m["packages"]["mpi4py"] for m in metas)
    assert {m["git_commit"] for m in metas} == {envinfo.git_commit()}


def test_efficiency_gives_each_familys_fixed_cost_per_point(finished, capsys, monkeypatch):
    from movebench.cli import main

    monkeypatch.chdir(finished)
    assert main(["--configfile", "config.yaml", "efficiency"]) == 0
    printed = capsys.readouterr().out
    line = next(ln for ln in printed.splitlines() if ln.strip().startswith("shuffle") and "[" in ln)
    printed_median = float(line.split()[1])  # per launch; a launch per point here, so per point too
    costs = []
    for meta in (finished / "results" / "raw" / "shuffle").rglob("*.meta.json"):
        timed = sum(r["elapsed_s"] for r in read_jsonl(meta.with_name(meta.name.replace(".meta.json", ".jsonl"))))
        costs.append(json.loads(meta.read_text())["launch_wall_s"] - timed)
    assert line.rstrip().endswith("3, 3") and printed_median == pytest.approx(sorted(costs)[1], abs=0.006)


def test_report_numbers_are_the_medians_of_the_records(finished):
    html = (finished / "results" / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    parser = Tables()
    parser.feed(html)
    summary = next(t for t in parser.tables
                   if t and "records" in t[0] and any(h.startswith("bandwidth (") for h in t[0]))
    header = summary[0]
    column = next(h for h in header if h.startswith("bandwidth ("))
    factor = {"bandwidth (GB/s)": 1e9, "bandwidth (MB/s)": 1e6, "bandwidth (kB/s)": 1e3}[column]  # human units
    checked = 0
    for row in summary[1:]:
        cells = dict(zip(header, row, strict=True))
        recs = [r for r in read_jsonl(finished / "results" / cells["records"]) if not r["warmup"]]
        median = pd.Series([r["bandwidth_Bps"] for r in recs]).median()
        assert float(cells[column]) * factor == pytest.approx(median, rel=5e-3)  # three significant digits
        assert int(cells["n"]) == 3
        low, high = (float(v) * factor for v in cells["bandwidth 95% CI"].split(" – "))
        assert low <= median * (1 + 5e-3) and high >= median * (1 - 5e-3)
        checked += 1
    assert checked == 3
    table = pd.read_csv(finished / "results" / "tables" / "shuffle_summary.csv")
    assert set(table["measure"]) >= {"bandwidth_Bps", "elapsed_s", "efficiency"}


def test_a_second_run_does_nothing(finished):
    proc = snakemake(finished, "--dry-run")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_adding_a_message_size_runs_only_the_new_points(finished):
    config = json.loads((finished / "config.yaml").read_text())
    config["shuffle"]["message_sizes"].append("8KiB")
    (finished / "config.yaml").write_text(json.dumps(config))
    before = {p: p.stat().st_mtime_ns for p in (finished / "results" / "raw").rglob("*.jsonl")}
    planned = jobs_planned(snakemake(finished, "--dry-run"))
    assert planned["shuffle_point"] == 3  # uni, bidi and shuffle at 8KiB
    snakemake(finished)
    after = {p: p.stat().st_mtime_ns for p in (finished / "results" / "raw").rglob("*.jsonl")}
    assert len(after) == 6
    assert all(after[p] == t for p, t in before.items())  # finished points untouched


def test_a_failing_point_leaves_the_others_intact_and_a_rerun_completes_it(tmp_path):
    config = json.loads(json.dumps(TINY))
    config["shuffle"].update(patterns=["uni"], message_sizes=["1KiB", "2KiB", "4KiB"])
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    launcher = tmp_path / "flaky-mpiexec"
    launcher.write_text(f"""#!/bin/sh
for task; do :; done  # the last argument: the kernel's task file
if grep -q '"message_size": 2048' "$task"; then echo "injected launcher failure" >&2; exit 3; fi
exec {MPIEXEC} "$@"
""")
    launcher.chmod(0o755)
    proc = snakemake(tmp_path, "--set-resources", f"shuffle_point:mpi='{launcher}'", check=False)
    assert proc.returncode != 0
    raw = tmp_path / "results" / "raw" / "shuffle" / "pattern~uni" / "nodes~1" / "ranks~2"
    assert sorted(p.name for p in raw.glob("message_size~*")) == ["message_size~1024", "message_size~4096"]
    failed = list((tmp_path / "results" / "failed").rglob("*.json"))
    assert len(failed) == 1
    failure = json.loads(failed[0].read_text())
    assert failure["message_size"] == 2048 and "status 3" in failure["error"]
    assert "injected launcher failure" in "\n".join(failure["log_tail"])
    assert not (tmp_path / "results" / "report.html").exists()  # never a report that looks complete
    partial = tmp_path / "results" / "report.partial.html"
    html = partial.read_text()
    assert 'id="partial"' in html and "injected launcher failure" in html
    assert partial.stat().st_mtime > 1e9  # dated as written, not back-dated
    counts = next(t for t in _tables(html) if t and t[0] == ["family", "points", "ok", "failed", "missing"])
    assert counts[1] == ["shuffle", "3", "2", "1", "0"]
    # A rerun with a working launcher redoes only the failed point.
    dry = snakemake(tmp_path, "--dry-run")
    assert jobs_planned(dry).get("shuffle_point") == 1, dry.stdout + dry.stderr
    snakemake(tmp_path)
    assert not list((tmp_path / "results" / "failed").rglob("*.json"))
    html = (tmp_path / "results" / "report.html").read_text()
    assert 'id="partial"' not in html and not partial.exists()


def _tables(html):
    parser = Tables()
    parser.feed(html)
    return parser.tables


def test_dry_run_with_the_slurm_profile_shows_resources_per_job(tmp_path):
    config = json.loads(json.dumps(TINY))
    config["shuffle"].update(patterns=["uni"], ranks=[2, 4], nodes=[1, 2])
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    proc = snakemake(tmp_path, "--dry-run", profile="slurm")
    jobs = proc.stdout.split("rule shuffle_point:")[1:]
    assert len(jobs) == 4
    seen = set()
    for job in jobs:
        res = re.search(r"resources: (.*)", job).group(1)
        tasks = int(re.search(r"tasks=(\d+)", res).group(1))
        nodes = int(re.search(r"nodes=(\d+)", res).group(1))
        assert f"ranks~{tasks}" in job and f"nodes~{nodes}" in job
        assert "mpi=" in res and "runtime=" in res and "mem_mb=" in res
        seen.add((nodes, tasks))
    assert seen == {(1, 2), (1, 4), (2, 2), (2, 4)}


def test_efficiency_before_a_run_says_so(tmp_path, capsys, monkeypatch):
    from movebench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text('{"campaign": {"results_dir": "not-yet"}, "shuffle": {"patterns": ["uni"]}}')
    assert main(["--configfile", "config.yaml", "efficiency"]) == 1
    err = capsys.readouterr().err
    assert "no finished run in not-yet" in err and "campaign_run.json" in err
