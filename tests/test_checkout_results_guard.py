"""The session guard of tests/conftest.py: what it compares of the checkout's results/ before and after the tests."""

import os

from conftest import results_changes, results_snapshot


def test_the_guard_sees_a_file_added_removed_grown_or_touched_and_a_new_folder(tmp_path):
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    (results / "report.html").write_text("the user's report")
    (results / "tables" / "bcast.csv").write_text("a,b\n1,2\n")
    (results / "campaign_run.json").write_text("{}")
    before = results_snapshot(results)
    assert results_changes(before, results_snapshot(results)) == []  # looking changes nothing

    (results / "report.partial.html").write_text("a test campaign's partial report")
    (results / "tables" / "bcast.csv").write_text("a,b\n1,2\n3,4\n")
    stat = (results / "report.html").stat()
    os.utime(results / "report.html", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # same size, later
    (results / "campaign_run.json").unlink()
    (results / "raw").mkdir()
    changes = results_changes(before, results_snapshot(results))
    assert [line.split(" (")[0] for line in changes] == [
        "added raw", "added report.partial.html", "removed campaign_run.json", "changed report.html",
        "changed tables/bcast.csv"]


def test_a_missing_results_folder_is_empty_and_its_creation_is_a_change(tmp_path):
    results = tmp_path / "results"
    before = results_snapshot(results)
    assert before == {}
    (results / "raw").mkdir(parents=True)
    (results / "report-screenshot.png").write_bytes(b"\x89PNG")
    assert results_changes(before, results_snapshot(results)) == ["added raw", "added report-screenshot.png"]
