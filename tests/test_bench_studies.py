"""bench/studies.py --docs: each study's table in docs/studies.md is rewritten from its claims, and only its own."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "studies.py"
_spec = importlib.util.spec_from_file_location("bench_studies", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _row(study, claims):
    return {"study": study, "command": f"snakemake --profile local --configfile config/studies/{study}.yaml",
            "returncode": 0, "wall_s": 12.3, "claims": claims}


def test_docs_hold_a_block_for_every_study():
    text = bench.DOCS.read_text()
    for study in bench.STUDIES:
        assert f"<!-- study:{study} -->" in text and f"<!-- /study:{study} -->" in text


def test_rewrite_replaces_only_the_run_studys_block(tmp_path):
    page = tmp_path / "studies.md"
    page.write_text(bench.DOCS.read_text())
    before = page.read_text()
    bench.rewrite_docs([_row("shuffle", [
        {"id": "shuffle/a", "status": "reproduced", "evidence": "1.2x [1.1, 1.3] | per rank"},
        {"id": "shuffle/b", "status": "inconclusive", "evidence": "holds 1\nat 4 KiB"}])], page)
    after = page.read_text()
    block = after[after.index("<!-- study:shuffle -->"):after.index("<!-- /study:shuffle -->")]
    assert "1 reproduced, 1 inconclusive" in block
    assert "| shuffle/a | reproduced | 1.2x [1.1, 1.3] \\| per rank |" in block
    assert "| shuffle/b | inconclusive | holds 1 at 4 KiB |" in block
    # everything outside the shuffle block is as it was
    cut = lambda t: t[:t.index("<!-- study:shuffle -->")] + t[t.index("<!-- /study:shuffle -->"):]  # noqa: E731
    assert cut(after) == cut(before)


def test_rewrite_refuses_a_study_without_a_block(tmp_path):
    page = tmp_path / "studies.md"
    page.write_text("# no blocks\n")
    with pytest.raises(SystemExit, match="no <!-- study:bcast --> block"):
        bench.rewrite_docs([_row("bcast", [])], page)
    assert page.read_text() == "# no blocks\n"
