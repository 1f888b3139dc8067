"""Every family is one package of the same shape, and only its measuring code is heavy where it runs."""

import importlib
import json
import subprocess

import pytest
import yaml

from conftest import PYTHON, ROOT
from movebench import families
from movebench.spec import HIGHER, LOWER

NAMES = families.names()
#: What a kernel never imports: tables, plots, templates, config parsing.
NOT_IN_KERNELS = ("pandas", "seaborn", "matplotlib", "jinja2", "yaml", "jsonschema", "scipy.stats")


def test_the_families_are_found_by_their_folders():
    """Every package folder under movebench/families is a family, and nothing else is (no list to edit)."""
    folders = sorted(p.parent.name for p in families.HERE.glob("*/__init__.py"))
    assert NAMES == folders and NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_family_is_one_folder_with_its_conda_env(name):
    folder = families.folder(name)
    for part in ("__init__.py", "kernel.py", "report.py", "schema.yaml", "report.html.j2", "environment.yaml"):
        assert (folder / part).is_file(), part
    env = yaml.safe_load((folder / "environment.yaml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert not any("pandas" in str(d) or "seaborn" in str(d) for d in env["dependencies"])  # only what its jobs need


@pytest.mark.parametrize("name", NAMES)
def test_the_spec_declares_axes_variant_and_measures(name):
    fam = families.load(name)
    assert fam.name == name and fam.variant in fam.point_keys
    assert {"bandwidth_Bps", "elapsed_s"} <= set(fam.measure)
    for measure in fam.measures:
        assert measure.unit and measure.better in (HIGHER, LOWER)
    from movebench.engine.config import family_schema  # the family's schema.yaml and the engine's keys and factors

    schema = family_schema(name)
    for axis in fam.axes:
        assert axis.key in schema["properties"], f"axis {axis.name} reads {axis.key}, which the schema lacks"


@pytest.mark.parametrize("name", NAMES)
def test_the_report_is_a_family_report(name):
    from movebench.reportkit import FamilyReport

    report = families.report(name)
    assert isinstance(report, FamilyReport)
    assert report is importlib.import_module(f"movebench.families.{name}.report").REPORT


#: What a family's report.py and the report kit may import from movebench: the kit, core, the spec, the family.
REPORT_MAY_IMPORT = ("movebench.reportkit", "movebench.core", "movebench.spec", "movebench.families")


@pytest.mark.parametrize("module", [f"movebench.families.{name}.report" for name in NAMES] + ["movebench.reportkit"])
def test_a_report_imports_only_the_kit_core_and_the_spec(module):
    probe = (f"import json, sys, {module}; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('movebench.'))))")
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert [m for m in loaded if not m.startswith(REPORT_MAY_IMPORT)] == []
    own = module.rsplit(".", 1)[0] if module.startswith("movebench.families.") else None
    others = [m for m in loaded if m.startswith("movebench.families.") and not (own and m.startswith(own))]
    assert others == []


@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_imports_no_table_plot_or_template_code(name):
    probe = (f"import sys, movebench.families.{name}.kernel; "
             f"print(sorted(m for m in sys.modules if m in {NOT_IN_KERNELS!r}))")
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", NAMES)
def test_the_spec_imports_nothing_heavy(name):
    """The launcher imports the spec for every point: no numpy, no MPI, no Dragon there."""
    probe = (f"import sys, movebench.families.{name}; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'mpi4py', 'dragon', 'pandas')))")
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_old_per_family_modules_are_gone():
    package = ROOT / "src" / "movebench"
    assert not any((package / f"{name}.py").exists() for name in NAMES)
    assert not (ROOT / "workflow" / "rules" / "shuffle.smk").exists()


def test_implicit_axis_defaults_stay_out_of_the_path():
    from movebench.families import point_path

    point = {"pattern": "uni", "nodes": 1, "ranks": 2, "message_size": 4096, "window": 64}
    assert point_path({**point, "mpi_thread_level": "multiple", "memory_mode": "4k"}) == point_path(point)
    assert point_path({**point, "mpi_thread_level": "single", "memory_mode": "thp"}).endswith(
        "window~64/mpi_thread_level~single/memory_mode~thp")
