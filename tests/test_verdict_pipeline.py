"""compare and check on real campaigns: the same tiny broadcast campaign run twice on this machine."""

import json
import re

import pandas as pd
import pytest
import yaml

from conftest import snakemake
from movebench.cli import main
from movebench.core import stats
from movebench.core import verdict as verdict_module
from movebench.core.tables import counted
from movebench.judging import compare, references

pytestmark = pytest.mark.pipeline

# dense 100x100 is the Dagger study's lightweight case (published.yaml shows it); 2 launches of 5 repetitions
# per point, so that compare judges on launches
AA = {
    "campaign": {"name": "aa", "launches": 2, "repetitions": 5, "warmups": 2, "timeout": 120},
    "bcast": {"kinds": ["dense"], "methods": ["pickle", "buffer"], "shapes": [[100, 100]], "dtypes": ["float64"],
              "ranks": [2], "nodes": [1]},
}
POINTS = {f"kind~dense/method~{m}/nodes~1/ranks~2/shape~100x100/dtype~float64" for m in ("pickle", "buffer")}


def run_campaign(workdir, **campaign):
    """The campaign in `workdir`; the workflow records the CPUs other processes kept busy meanwhile."""
    config = {**AA, "campaign": {**AA["campaign"], "results_dir": "results", **campaign}}
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(workdir)
    return workdir / "results"


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """The same campaign twice; the second one's report compares it with the first (campaign.compare_to)."""
    root = tmp_path_factory.mktemp("aa")
    first = run_campaign(root / "a")
    return first, run_campaign(root / "b", compare_to=str(first), compare_thresholds={"bcast": 0.5})


def test_a_real_campaign_compares_point_by_point(twice):
    base, new = twice
    frame = compare.compare(base, new)
    assert set(frame["point"]) == POINTS
    assert set(frame["measure"]) == {"bandwidth_Bps", "elapsed_s", "tracemalloc_peak_bytes", "rss_hwm_delta_bytes",
                                     "root_tracemalloc_peak_bytes", "root_rss_hwm_delta_bytes"}
    assert frame["comparable"].all() and (frame["n_base"] == 10).all() and (frame["n_new"] == 10).all()
    assert not frame["verdict"].isin([compare.ONLY_BASE, compare.ONLY_NEW, compare.NOT_COMPARABLE]).any()
    # same machine, same install: the fingerprints agree on everything
    assert set(frame["differs"]) == {""}
    meta = json.loads((base / "raw" / "bcast" / f"{sorted(POINTS)[0]}.meta.json").read_text())
    fp = meta["fingerprint"]
    assert fp["mpi_library"] == "MPICH" and fp["mpi_thread_level"] and fp["page_size"] > 0
    assert fp["transparent_hugepage"] in ("always", "madvise", "never") and fp["packages"]["mpi4py"]
    assert fp["env"].get("OMP_NUM_THREADS") == "1" and not any(k.startswith("PMI_") for k in fp["env"])
    load = json.loads((base / "campaign_run.json").read_text())["host_load"]
    assert load["cpus"] >= 1 and load["campaign_cpus"] > 0


def test_a_real_aa_comparison_is_judged_on_launches(twice, tmp_path, capsys):
    """Whether an A/A pair draws a false verdict is chance (its rate is tested on synthetic two-level data in
    test_launches.py and measured by bench/launches.py); what a real pair must show is that the launch is the
    unit, every verdict follows from the row's own statistics, and the exit status follows from the verdicts."""
    base, new = twice
    rc = main(["compare", str(base), str(new), "--out", str(tmp_path), "--threshold", "bcast=0.5",
               "--fail-on", "regressed", "--fail-on", "improved"])
    printed = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "compare.csv")
    assert (frame["unit"] == "launches").all(), printed
    assert (frame["launches_base"] == 2).all() and (frame["launches_new"] == 2).all()
    assert "with 2 launches" in printed, printed
    timed = frame[frame["measure"] == "elapsed_s"]
    assert len(timed) == 2 and (timed["mdc"] > 0).all() and (timed["mdc_double"] < timed["mdc"]).all()
    for row in frame.itertuples():
        result = verdict_module.Comparison(
            n_base=row.n_base, n_new=row.n_new, median_base=row.median_base, median_new=row.median_new,
            ratio=row.ratio, ci_low=row.ci_low, ci_high=row.ci_high, p_value=row.p_value, scale="log",
            launches_base=row.launches_base, launches_new=row.launches_new, unit=row.unit)
        assert verdict_module.verdict(result, row.better, row.threshold) == row.verdict, row
    judged = frame["verdict"].isin(["regressed", "improved"]).any()
    assert rc == (1 if judged else 0), printed
    html = (tmp_path / "compare.html").read_text()
    assert "2 / 2" in html


def test_check_on_a_real_campaign(twice, tmp_path, capsys):
    results, _ = twice
    ratio = {"study": "here", "family": "bcast", "ratio": {"numerator": "pickle", "denominator": "buffer"},
             "parameters": {"kind": "dense", "shape": "100x100"}, "metric": "elapsed_s", "unit": "x"}
    doc = {"studies": {"here": {"title": "this test", "source": "tests/test_verdict_pipeline.py",
                                "system": "a 2-core VM"}},
           "references": [
               # the ratio's CI is at the launch level: 2 launches a side and no family to borrow df from leave it
               # about 1 df, a CI as wide as 1/200 to 200 on this busy machine; bands far beyond it settle the verdict
               {**ratio, "id": "any-positive-ratio", "value": 1.0, "lower": -1 + 1e-9, "upper": 1e9},
               {**ratio, "id": "a-million", "value": 1e15, "lower": -0.1, "upper": 0.1},
               {**ratio, "id": "not-run", "parameters": {"kind": "dense", "shape": "10000x10000"}, "value": 3.4},
               {"id": "absolute", "study": "here", "family": "bcast", "variant": "buffer", "metric": "bandwidth_Bps",
                "parameters": {"shape": "100x100"}, "value": 100, "unit": "MB/s"},
           ]}
    refs_file = tmp_path / "refs.yaml"
    refs_file.write_text(yaml.safe_dump(doc))
    frame = references.check(results, references.load(refs_file)).set_index("id")
    assert frame["status"].to_dict() == {"any-positive-ratio": "pass", "a-million": "fail", "not-run": "not measured",
                                         "absolute": "shown"}
    row = frame.loc["any-positive-ratio"]
    assert 0 < row.ci_low <= row.measured <= row.ci_high and row.n == "10 / 10"
    absolute = frame.loc["absolute"]
    table = pd.read_parquet(results / "tables" / "bcast.parquet")
    buffer = counted(table)
    buffer = buffer[buffer["variant"] == "buffer"]
    # the figure of 2 launches: the median of their medians, as the report's summary has it
    per_launch = [part["bandwidth_Bps"].tolist() for _, part in buffer.groupby("launch")]
    assert len(per_launch) == 2
    assert absolute.measured == pytest.approx(stats.launch_summary(per_launch)["median"] / 1e6)
    assert main(["check", str(results), "--references", str(refs_file), "--out", str(tmp_path),
                 "--fail-on", "fail"]) == 1
    assert "1 pass, 1 fail, 0 inconclusive, 1 shown, 1 not measured" in capsys.readouterr().out
    # the shipped references: the Dagger study's lightweight dense case is shown beside ours
    published = references.check(results).set_index("id")
    assert published.loc["bcast/dense/100x100/pickle-over-buffer"].status == "shown"
    assert (published["status"] == "not measured").sum() == len(published) - 1


def test_compare_to_puts_the_comparison_in_the_report(twice):
    base, new = twice
    html = (new / "report.html").read_text()
    part = html[html.index('<h2 id="compared">'):html.index('<h2 id="bcast">')]
    assert f"Compared with <code>{base}</code>" in part
    # the section's counts are compare's on the same two campaigns (read from their tables here, from the raw
    # metas there) with the campaign's threshold
    expected = compare.counts(compare.compare(base, new, {"bcast": 0.5}))
    header = re.findall(r'<th class="[^"]*">([^<]+)</th>', part[:part.index("</table>")])
    cells = [int(c) for c in re.findall(r"<td[^>]*>(\d+)</td>", part[:part.index("</table>")])]
    assert dict(zip(header, cells, strict=True)) == expected
    assert sum(expected.values()) == 12 and "bcast = 0.5" in part
    findings = html[html.index('id="findings"'):html.index('id="overview"')]
    assert f"Compared with {base}: {expected['regressed']} regressed, {expected['improved']} improved" in findings


def test_the_compared_tables_are_inputs_of_the_report(twice):
    base, new = twice
    proc = snakemake(new.parent, "--dry-run", "--forcerun", "report")
    job = (proc.stdout + proc.stderr).split("rule report:")[1].split("rule all:")[0]
    inputs = job[job.index("input:"):job.index("output:")]
    for name in ("bcast.parquet", "bcast_points.csv"):
        assert str(base / "tables" / name) in inputs
    assert str(base / "campaign_run.json") in inputs and "config/references/published.yaml" in inputs
