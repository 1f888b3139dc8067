"""The results folder's layout has one owner (core.layout), and a point's name comes from its parameters, not from
where its results folder sits."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import snakemake
from movebench import families
from movebench.core.layout import ResultsLayout
from movebench.engine import aggregate
from movebench.judging import compare

SRC = Path(__file__).resolve().parents[1] / "src" / "movebench"


def test_a_launch_and_its_files_translate_both_ways(tmp_path):
    layout = ResultsLayout(tmp_path / "shuffle" / "results")
    launch = "pattern~uni/ranks~2/launch~1"
    for path in (layout.records("shuffle", launch), layout.meta("shuffle", launch),
                 layout.failure("shuffle", launch)):
        assert layout.launch_of(path) == ("shuffle", launch)
    assert ResultsLayout.holding(layout.records("shuffle", launch), "shuffle", launch) == layout
    assert layout.meta_of(layout.records("shuffle", launch)) == layout.meta("shuffle", launch)
    assert layout.named(layout.records("io", "backend~posix")) == "raw/io/backend~posix.jsonl"
    with pytest.raises(ValueError, match="not a launch's file"):
        layout.launch_of(layout.table("shuffle"))
    with pytest.raises(ValueError, match="not shuffle's launch"):
        ResultsLayout.holding(tmp_path / "x.jsonl", "shuffle", launch)


def test_no_module_spells_out_the_results_folders_names():
    """raw/, failed/, tables/, .kept/ and the run's files are core.layout's to name: a second spelling would drift."""
    spelled = re.compile(r"""["'/](raw|failed|tables|\.kept|campaign_run\.json|launch_order\.json|\.retries)["'/]""")
    allowed = {SRC / "core" / "layout.py"}
    offenders = []
    for path in sorted(SRC.rglob("*.py")) + sorted((SRC.parents[1] / "workflow").rglob("*.smk")):
        if path in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            # docstrings and messages may name the folders to a user; paths are built only from the layout
            if spelled.search(code) and re.search(r"/\s*[\"']|[\"']\s*/|joinpath|Path\(", code):
                offenders.append(f"{path.relative_to(SRC.parents[1])}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_records_name_their_point_from_their_parameters(tmp_path):
    """A records file under a results folder inside a folder named like its family: the point is the parameters'
    path, not the rest of the file's path after the first folder of that name."""
    fam = families.load("shuffle")
    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 4,
             "mpi_thread_level": "multiple", "memory_mode": "4k", "stack": "default", "env": ""}
    path = fam.path(point)
    layout = ResultsLayout(tmp_path / "campaigns" / "shuffle" / "results")
    records = layout.records("shuffle", f"{path}/launch~1")
    records.parent.mkdir(parents=True)
    rows = [{"family": "shuffle", "variant": "uni", **point, "rep": rep, "warmup": False, "ok": True,
             "elapsed_s": 0.1, "bytes": 1000, "bandwidth_Bps": 1e4, "launch": 1} for rep in range(3)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = aggregate.load("shuffle", [records], layout.raw)
    assert set(table["point"]) == {path}
    foreign = layout.records("shuffle", "pattern~uni")
    foreign.write_text(json.dumps({"family": "shuffle", "rep": 0, "warmup": False, "ok": True, "elapsed_s": 1}) + "\n")
    with pytest.raises(ValueError, match="do not say which shuffle point"):
        aggregate.point_of({"rep": 0}, foreign, "shuffle")
    assert aggregate.point_of({"rep": 0}, foreign, "shuffle", layout.raw) == "pattern~uni"


TINY = {
    "campaign": {"name": "where", "launches": 2, "repetitions": 3, "warmups": 1, "timeout": 60},
    "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4],
                "iterations": 5, "launch_groups": False},
}


def _run(workdir: Path, results_dir: str) -> ResultsLayout:
    config = json.loads(json.dumps(TINY))
    config["campaign"]["results_dir"] = results_dir
    workdir.mkdir(parents=True)
    (workdir / "config.yaml").write_text(json.dumps(config))
    snakemake(workdir)
    return ResultsLayout(workdir / results_dir)


@pytest.mark.pipeline
def test_a_campaign_under_a_folder_named_like_its_family_names_its_points_as_anywhere_else(tmp_path):
    inside = _run(tmp_path / "a", "campaigns/shuffle/results")
    elsewhere = _run(tmp_path / "b", "results")
    tables = {name: pd.read_parquet(layout.table("shuffle")) for name, layout in
              (("inside", inside), ("elsewhere", elsewhere))}
    points = {name: set(table["point"]) for name, table in tables.items()}
    assert points["inside"] == points["elsewhere"] and len(points["inside"]) == 2
    assert all(p.startswith("pattern~") for p in points["inside"]), points["inside"]
    rows = compare.compare(elsewhere.root, inside.root)
    assert set(rows["point"]) == points["inside"]
    assert not rows["verdict"].str.startswith("only in").any(), rows[["point", "verdict"]]
    report_points = {}
    for name, layout in (("inside", inside), ("elsewhere", elsewhere)):
        html = layout.report.read_text()
        report_points[name] = set(re.findall(r"raw/shuffle/([^<\"]+?)\.jsonl", html))
    assert report_points["inside"] == report_points["elsewhere"] and report_points["inside"]


def _loaded_by(*modules: str) -> set[str]:
    """The movebench modules' files Python loads when it imports `modules` (run in a fresh interpreter)."""
    import subprocess
    import sys

    probe = ("import importlib, json, sys\n"
             f"for name in {list(modules)!r}: importlib.import_module(name)\n"
             "print(json.dumps(sorted(m.__file__ for k, m in sys.modules.items()\n"
             "    if (k == 'movebench' or k.startswith('movebench.')) and getattr(m, '__file__', None))))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return {str(Path(f).resolve()) for f in json.loads(out)}


def test_the_report_and_the_tables_rerun_on_every_module_they_import():
    """The report's and aggregate's code inputs (campaign.report_sources, aggregate_sources) hold every movebench
    module that importing them, and the families' hooks, loads as Python itself finds them."""
    from movebench import campaign

    names = families.names()
    declared = {str(p.resolve()) for p in campaign.report_sources(names)}
    loaded = _loaded_by("movebench.judging.report", *(f"movebench.families.{n}.report" for n in names))
    missing = sorted(loaded - declared)
    assert not missing, f"the report imports these and its rule would not rerun on their edit: {missing}"
    for module in ("judging/claims.py", "core/verdict.py", "reportkit.py", "judging/findings.py"):
        assert str((SRC / module).resolve()) in declared
    for name in names:
        declared = {str(p.resolve()) for p in campaign.aggregate_sources(name)}
        loaded = _loaded_by("movebench.engine.aggregate", f"movebench.families.{name}",
                            f"movebench.families.{name}.report")
        assert not sorted(loaded - declared), name
        assert str((SRC / "core" / "verdict.py").resolve()) in declared
