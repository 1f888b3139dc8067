"""What reruns after an edit: only measuring code reruns measurements; the rest reruns tables and the report.

The campaign runs from a copy of the workflow and the package (PYTHONPATH points its jobs at the
copy), so that touching files here never makes other tests' campaigns out of date.
"""

import json
import os
import re
import time

import pytest

from conftest import copied_workflow

pytestmark = pytest.mark.pipeline

CONFIG = {
    "campaign": {"name": "reruns", "results_dir": "results",
                 "launches": 1, "repetitions": 2, "warmups": 0, "timeout": 60},
    "shuffle": {"patterns": ["uni"], "ranks": [2], "message_sizes": ["1KiB", "2KiB"], "windows": [2],
                "iterations": 3},
    "bcast": {"kinds": ["dense"], "methods": ["buffer", "p2p"], "shapes": [[16, 16]], "ranks": [2]},
}


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """(repository copy, campaign folder, run(*args)) with the tiny campaign run once."""
    base = tmp_path_factory.mktemp("reruns")
    repo = base / "repo"
    work = base / "work"
    work.mkdir()
    (work / "config.yaml").write_text(json.dumps(CONFIG))
    run = copied_workflow(repo, work)

    run()
    return repo, work, run


def planned(run) -> dict[str, int]:
    proc = run("--dry-run")
    counts = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def edit(path):
    """A real edit (Snakemake 9 ignores a newer file whose checksum it recorded), dated later than the outputs."""
    comment = "{# edited #}" if path.suffix == ".j2" else "# edited"
    path.write_text(path.read_text() + f"\n{comment}\n")
    later = time.time() + 1
    os.utime(path, (later, later))
    # past that date before anything runs: an output written before its input's (future) date fails the job
    # as clock skew, and a point finishes in well under a second
    time.sleep(max(0.0, later - time.time()) + 0.1)


def test_nothing_reruns_without_a_change(copy):
    repo, _, run = copy
    assert planned(run) == {}
    path = repo / "src/movebench/families/shuffle/kernel.py"
    later = time.time() + 1
    os.utime(path, (later, later))  # newer, same content
    time.sleep(max(0.0, later - time.time()) + 0.1)  # as edit(): later tests run points of this family
    assert planned(run) == {}


def test_a_report_edit_reruns_tables_and_report_only(copy):
    repo, _, run = copy
    edit(repo / "src/movebench/families/shuffle/report.py")
    assert planned(run) == {"aggregate": 1, "report": 1, "all": 1}
    run()


def test_a_statistics_edit_reruns_every_familys_tables_and_the_report_only(copy):
    """The summaries are computed by core.stats: a new interval must reach the tables, not only new runs."""
    repo, _, run = copy
    edit(repo / "src/movebench/core/stats.py")
    assert planned(run) == {"aggregate": 2, "report": 1, "all": 1}
    run()


def test_a_hint_in_the_spec_reruns_tables_and_report_only(copy):
    repo, _, run = copy
    spec = repo / "src/movebench/families/shuffle/__init__.py"
    spec.write_text(spec.read_text().replace("use an even count such as 2, 4 or 8", "use an even count, e.g. 2 or 4"))
    assert planned(run) == {"aggregate": 1, "report": 1, "all": 1}
    run()


def test_a_template_edit_reruns_the_report_only(copy):
    repo, _, run = copy
    edit(repo / "src/movebench/families/bcast/report.html.j2")
    edit(repo / "src/movebench/templates/report.html.j2")
    assert planned(run) == {"report": 1, "all": 1}
    run()


@pytest.mark.parametrize("module", ["judging/claims.py", "judging/report_verdicts.py", "judging/findings.py"])
def test_an_edit_to_a_module_only_the_report_imports_reruns_the_report_only(copy, module):
    """The report's rerun trigger is what it imports (campaign.report_sources), not a list kept by hand."""
    repo, _, run = copy
    edit(repo / "src/movebench" / module)
    assert planned(run) == {"report": 1, "all": 1}
    run()


def test_an_edit_to_the_verdicts_statistics_recomputes_the_tables_and_the_report(copy):
    """core/verdict.py gives the tables their detectable change and the report its verdicts."""
    repo, _, run = copy
    edit(repo / "src/movebench/core/verdict.py")
    assert planned(run) == {"aggregate": 2, "report": 1, "all": 1}
    run()


def test_a_references_edit_reruns_the_report_only(copy):
    repo, _, run = copy
    edit(repo / "config/references/published.yaml")
    assert planned(run) == {"report": 1, "all": 1}
    run()


def test_a_kernel_edit_reruns_that_familys_points_only(copy):
    repo, _, run = copy
    edit(repo / "src/movebench/families/bcast/kernel.py")
    assert planned(run) == {"bcast_point": 2, "aggregate": 1, "report": 1, "all": 1}
    run()


def test_a_shared_runner_edit_reruns_every_point(copy):
    repo, _, run = copy
    edit(repo / "src/movebench/core/runner.py")
    assert planned(run) == {"shuffle_point": 2, "bcast_point": 2, "aggregate": 2, "report": 1, "all": 1}
