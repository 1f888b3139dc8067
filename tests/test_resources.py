"""The report layer's files come through the package (movebench.core.resources), so an installed movebench renders."""

import fnmatch
import subprocess
import tomllib

import pandas as pd

from conftest import PYTHON, ROOT
from movebench.core import resources
from movebench.judging import compare, report


def test_the_page_templates_render_from_the_package_resources():
    folder = resources.templates()
    assert {p.name for p in folder.glob("*.j2")} == {"report.html.j2", "compare.html.j2", "compare_section.html.j2",
                                                     "history.html.j2"}
    env = report._environment()
    assert env.get_template("report.html.j2").filename == str(folder / "report.html.j2")
    row = {"family": "shuffle", "variant": "uni", "point": "pattern~uni/size~4096", "measure": "bandwidth_Bps",
           "better": "higher", "threshold": 0.05, "n_base": 5, "n_new": 5, "median_base": 1e9, "median_new": 2e9,
           "ratio": 2.0, "ci_low": 1.9, "ci_high": 2.1, "p_value": 0.01, "verdict": "improved", "comparable": True,
           "differs": "", "differs_detail": "", "note": "", "point_new": "pattern~uni/size~4096",
           "launches_base": 1, "launches_new": 1, "unit": "repetitions", "mdc": None, "mdc_double": None}
    page = compare.render_html(pd.DataFrame([row]), "base", "new")
    assert "<html" in page and "improved" in page and "pattern~uni" in page
    section = compare.render_section(pd.DataFrame([row]), "base", "new", id_prefix="compare-")
    assert "<html" not in section and "improved" in section


def test_package_data_ships_every_resource():
    """pyproject's package-data globs cover the templates, schemas and data that movebench.core.resources finds."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["movebench"]
    package = ROOT / "src" / "movebench"
    shipped = [p for folder in ("templates", "schemas", "data") for p in (package / folder).iterdir() if p.is_file()]
    assert shipped and resources.schema("references") in shipped
    for path in shipped:
        assert any(fnmatch.fnmatch(path.relative_to(package).as_posix(), g) for g in globs), path


def test_the_shipped_published_references_are_the_checkouts():
    """An installed movebench reads the package's copy of config/references/published.yaml: edit both alike."""
    assert resources.published_references() == ROOT / "config" / "references" / "published.yaml"
    assert resources.path("data", "published.yaml").read_text() == resources.published_references().read_text()


def test_resources_import_nothing_from_movebench():
    probe = "import sys, movebench.core.resources; print(sorted(m for m in sys.modules if m.startswith('movebench.')))"
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['movebench.core', 'movebench.core.resources']"
