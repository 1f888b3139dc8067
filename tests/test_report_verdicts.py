"""The report's verdicts, on tables of known records: upper bounds and % of bound, findings, human units,
Published vs measured per family, and the comparison with an earlier campaign (campaign.compare_to)."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from movebench import campaign as campaign_run
from movebench import families, reportkit
from movebench.core import units
from movebench.engine import aggregate, config
from movebench.judging import bounds, findings, report, report_verdicts

KiB, MiB = 2**10, 2**20
MPICH = "MPICH Version:      5.0.2"


# --- synthetic campaigns: records as kernels write them, tables as aggregate writes them ---


def records(family: str, variant: str, point: dict, bandwidths, size: int = 10**6) -> list[dict]:
    """One warm-up and the measured repetitions of a point whose repetitions move `size` bytes."""
    path = families.point_path(point)
    rows = [{"family": family, "variant": variant, **point, "rep": 0, "warmup": True, "ok": True,
             "elapsed_s": size / bandwidths[0] * 3, "bytes": size}]
    rows += [{"family": family, "variant": variant, **point, "rep": i, "warmup": False, "ok": True,
              "elapsed_s": size / bw, "bytes": size} for i, bw in enumerate(bandwidths)]
    for row in rows:
        row["bandwidth_Bps"] = row["bytes"] / row["elapsed_s"]
        row["point"] = path
    return rows


def noisy(value, n=8, seed=0, cv=0.02):
    return (np.random.default_rng(seed).lognormal(0, cv, n) * value).tolist()


def section(name: str, rows: list[dict], meta: dict | None = None, failed=()) -> dict:
    """A family's section as report.collect builds it: records, summary, points (status and flattened meta)."""
    table = aggregate.tidy(name, pd.DataFrame(rows))
    summary = aggregate.summarize(name, table)
    fam = families.load(name)
    points = []
    for path, group in table.groupby("point", sort=True):
        first = group.iloc[0]
        points.append({"family": name, "variant": first["variant"], "point": path,
                       **{k: first[k] for k in fam.point_keys if k in group}, "status": "ok", "cpu_count": 2,
                       "fingerprint.mpi_library": MPICH, "fingerprint.cpu_model": "AMD EPYC", **(meta or {})})
    for path, error in failed:
        points.append({"family": name, "variant": "uni", "point": path, "status": "failed", "error": error,
                       "log_tail": "", "failure_file": f"failed/{name}/{path}.json"})
    return report._section(pd.DataFrame(points), table, summary)


def memcpy(ranks=2, size=4 * KiB, bandwidth=5e9, seed=1):
    point = {"probe": "memcpy", "ranks": ranks, "size": size}
    return records("calibration", "memcpy", point, noisy(bandwidth, seed=seed))


def stream(pattern, bandwidth, size=4 * KiB, window=64, nodes=1, ranks=2, seed=2):
    point = {"pattern": pattern, "nodes": nodes, "ranks": ranks, "message_size": size, "window": window}
    return records("shuffle", pattern, point, noisy(bandwidth, seed=seed))


def campaign(tmp_path, **keys) -> dict:
    return {"campaign": {"name": "synthetic", "results_dir": str(tmp_path / "results"), "references": None,
                         "compare_to": None, "compare_thresholds": {}, **keys}}


# --- human units ---


@pytest.mark.parametrize("value, text", [(0.000123, "0.000123"), (1.2345, "1.23"), (9.996, "10.0"), (12.345, "12.3"),
                                         (123.4, "123"), (12345.6, "12346"), (0, "0"), (-0.5, "-0.500")])
def test_three_significant_digits_and_no_exponent(value, text):
    assert units.sig(value) == text


def test_a_unit_that_suits_the_values():
    assert units.human(3.2e-5, "s") == "32.0 µs"
    assert units.human(0.0042, "s") == "4.20 ms"
    assert units.human(2.5e9, "B/s") == "2.50 GB/s"
    assert units.human(3 * MiB, "B") == "3.00 MiB"
    assert units.human(5e8, "MiB/s") == "477 MiB/s"  # a display unit asked for by name is kept
    assert units.choose("s", [2e-6, 3e-6, 0.5]) == ("µs", 1e-6)  # the column's median decides
    assert units.choose("1", [0.5]) == ("1", 1.0)


def test_html_tables_name_the_unit_and_keep_three_digits():
    frame = pd.DataFrame({"case": ["a", "b"], "time": [0.0012345, 0.0023456], "bandwidth": [1.5e9, 2.25e9]})
    html = reportkit.html_table(frame, units={"time": "s", "bandwidth": "B/s"})
    assert "time (ms)" in html and "bandwidth (GB/s)" in html
    assert ">1.23<" in html and ">2.35<" in html and ">1.50<" in html and ">2.25<" in html
    assert "e-0" not in html and "e+0" not in html


# --- bounds ---


def test_resolve_picks_exact_then_at_least_then_nearest():
    provided = pd.DataFrame([
        {"kind": "memcpy", "ranks": 1, "size": 4 * KiB, "bound_Bps": 4e9, "label": "m1"},
        {"kind": "memcpy", "ranks": 2, "size": 4 * KiB, "bound_Bps": 7e9, "label": "m2 4KiB"},
        {"kind": "memcpy", "ranks": 2, "size": MiB, "bound_Bps": 9e9, "label": "m2 1MiB"},
        {"kind": "memcpy", "ranks": 4, "size": MiB, "bound_Bps": 15e9, "label": "m4 1MiB"},
        {"kind": "network", "nodes": 2, "bound_Bps": 20e9, "label": "bidi 2 nodes"},
    ])
    near_small = bounds.resolve({"kind": "memcpy", "at_least": {"ranks": 2}, "nearest": {"size": 32 * KiB}}, provided)
    assert near_small == {"bound_Bps": 7e9, "bound": "m2 4KiB", "bound_note": ""}
    # three copiers: the smallest count measured above it bounds them from above
    assert bounds.resolve({"kind": "memcpy", "at_least": {"ranks": 3}, "nearest": {"size": MiB}},
                          provided)["bound"] == "m4 1MiB"
    more = bounds.resolve({"kind": "memcpy", "at_least": {"ranks": 8}, "nearest": {"size": MiB}}, provided)
    assert more["bound"] == "m4 1MiB" and "fewer than the point's 8" in more["bound_note"]
    assert bounds.resolve({"kind": "network", "exact": {"nodes": 2}}, provided)["bound_Bps"] == 20e9
    assert "no network bound at nodes = 3" in bounds.resolve({"kind": "network", "exact": {"nodes": 3}},
                                                            provided)["bound_note"]
    assert "no fio bound measured" in bounds.resolve({"kind": "fio", "exact": {}}, provided)["bound_note"]


def test_copiers_are_capped_at_the_nodes_cpus():
    assert reportkit.copiers(3, {"cpu_count": 2}) == 2
    assert reportkit.copiers(2, {"cpu_count": 16}) == 2
    assert reportkit.copiers(4, {}) == 4


def test_families_drawn_side_by_side_give_the_contexts_drawn_one_after_another(tmp_path):
    sections = {
        "calibration": section("calibration", memcpy(bandwidth=5e9)),
        "shuffle": section("shuffle", stream("bidi", 10e9) + stream("uni", 2.5e9, seed=3)),
    }
    config = campaign(tmp_path)
    one_by_one = report.family_contexts(config, sections, workers=1)
    side_by_side = report.family_contexts(config, sections, workers=2)
    assert set(side_by_side) == {"calibration", "shuffle"}
    assert "data:image/png" in repr(one_by_one["shuffle"]["figures"]), "the synthetic campaign draws figures"
    assert repr(side_by_side) == repr(one_by_one)


def test_a_point_above_its_bound_gets_a_visible_warning(tmp_path):
    sections = {
        "calibration": section("calibration", memcpy(bandwidth=5e9)),
        "shuffle": section("shuffle", stream("bidi", 10e9) + stream("uni", 2.5e9, seed=3)),
    }
    html = report.render_html(campaign(tmp_path), sections)
    summary = sections["shuffle"]["summary"]
    bw = summary[summary["measure"] == "bandwidth_Bps"].set_index("pattern")
    assert bw.loc["bidi", "pct_of_bound"] == pytest.approx(200, rel=0.05)
    assert bw.loc["uni", "pct_of_bound"] == pytest.approx(50, rel=0.05)
    assert bw.loc["bidi", "bound"] == "memcpy, 2 processes at 4KiB"
    assert 'id="shuffle-bounds"' in html and "1 point above 100% of its upper bound" in html
    above = re.findall(r'<tr class="above">(.*?)</tr>', html, re.S)
    assert len(above) == 1 and ">bidi<" in above[0] and ">4KiB<" in above[0] and "⚠" in above[0]
    items = findings.build(sections, None, {})
    assert items[0]["level"] == "bad" and "above 100%" in items[0]["text"] and "bidi" in items[0]["text"]
    # the bandwidth plot draws the bound: its title says so
    assert "dashed: the points&#39; upper bound" in html or "dashed: the points' upper bound" in html


def test_a_median_above_its_bound_within_both_intervals_is_at_the_bound_not_a_warning(tmp_path):
    """fio's bound and a posix point are both measured: a median 3% over the bound with intervals of +-10% is the two
    figures' noise (a fresh machine's first report called such a point one to distrust)."""
    sections = {
        "calibration": section("calibration", memcpy(bandwidth=5e9, seed=5)),
        "shuffle": section("shuffle", records("shuffle", "bidi", {"pattern": "bidi", "nodes": 1, "ranks": 2,
                                                                  "message_size": 4 * KiB, "window": 64},
                                              noisy(5.15e9, seed=6, cv=0.1))),
    }
    html = report.render_html(campaign(tmp_path), sections)
    bw = sections["shuffle"]["summary"].set_index("measure").loc["bandwidth_Bps"]
    assert bw["pct_of_bound"] > 100 and bw["ci_low"] < bw["bound_ci_high_Bps"]
    assert bounds.above(sections["shuffle"]["summary"]).empty
    items = findings.build(sections, None, {})
    assert not any(i["level"] == "bad" for i in items)
    at = [i for i in items if "at its upper bound" in i["text"]]
    assert len(at) == 1 and at[0]["level"] == "info" and "the 95% CIs overlapping" in at[0]["text"]
    assert 'id="shuffle-bounds"' not in html


def test_between_nodes_the_bound_is_the_best_bidi_at_the_same_nodes(tmp_path):
    sections = {"shuffle": section("shuffle", stream("bidi", 3e9, nodes=2) + stream("bidi", 4e9, nodes=2, size=MiB)
                                   + stream("uni", 2e9, nodes=2, seed=4))}
    bw = report_bw(tmp_path, sections).set_index(["pattern", "message_size"])
    assert bw.loc[("uni", 4 * KiB), "pct_of_bound"] == pytest.approx(50, rel=0.05)
    assert bw.loc[("bidi", MiB), "pct_of_bound"] == pytest.approx(100)
    assert bw.loc[("uni", 4 * KiB), "bound"].startswith("best bidi at 2 nodes")


def report_bw(tmp_path, sections):
    report.render_html(campaign(tmp_path), sections)
    summary = sections["shuffle"]["summary"]
    return summary[summary["measure"] == "bandwidth_Bps"]


def test_io_posix_is_bounded_by_fio_in_the_same_folder_only(tmp_path):
    fio = {"probe": "fio", "pattern": "sfmw", "ranks": 2, "size_per_proc": 16 * MiB}
    io_point = {"pattern": "sfmw", "backend": "posix", "nodes": 1, "ranks": 2, "size_per_proc": 4 * MiB}
    blob_point = {**io_point, "backend": "blob"}
    io_rows = records("io", "sfmw", io_point, noisy(150 * MiB)) + records("io", "sfmw", blob_point, noisy(50 * MiB))
    for folder, expected in (("/scratch/a", 50.0), ("/elsewhere", None)):
        sections = {"calibration": section("calibration", records("calibration", "fio", fio, noisy(300 * MiB)),
                                           meta={"settings.fio_path": "/scratch/a"}),
                    "io": section("io", io_rows, meta={"settings.path": folder})}
        html = report.render_html(campaign(tmp_path), sections)
        bw = sections["io"]["summary"].query("measure == 'bandwidth_Bps'").set_index("backend")
        assert pd.isna(bw.loc["blob", "pct_of_bound"])  # no bound for a storage service
        if expected:
            assert bw.loc["posix", "pct_of_bound"] == pytest.approx(expected, rel=0.05)
            assert "POSIX % of fio" in html
        else:
            assert pd.isna(bw.loc["posix", "pct_of_bound"])
            assert "no fio bound at path = /elsewhere" in bw.loc["posix", "bound_note"]


# --- findings ---


def test_findings_come_worst_first_with_failures_limits_and_headlines(tmp_path):
    sections = {"shuffle": section("shuffle", stream("uni", 1e9, window=1) + stream("uni", 4e9, window=64, seed=5),
                                   failed=[("pattern~uni/nodes~1/ranks~2/message_size~8192/window~1",
                                            "timed out after 60 s (campaign.timeout)"),
                                           ("pattern~uni/nodes~1/ranks~2/message_size~16384/window~1",
                                            "kernel exited with status 3")])}
    html = report.render_html(campaign(tmp_path), sections)
    items = findings.build(sections, None, {})
    texts = [i["text"] for i in items]
    assert items[0]["level"] == "bad" and "stopped on a limit (timed out after 60 s (campaign.timeout))" in texts[0]
    assert "1 point failed" in texts[1] and "status 3" in texts[1]
    window = next(t for t in texts if "window 64 moves" in t)
    ratio, low, high = (float(x) for x in re.search(r"moves ([\d.]+)x \[([\d.]+), ([\d.]+)\]", window).groups())
    assert ratio == pytest.approx(4, rel=0.05) and low < ratio < high
    assert html.index('id="findings"') < html.index('id="overview"') < html.index('id="shuffle"')
    toc = html[html.index('id="contents"'):html.index('id="findings"')]
    assert 'href="#shuffle-failed"' in toc and 'href="#findings"' in toc


# --- Published vs measured here ---


def bcast_case(method, seconds, shape="100x100", seed=0):
    point = {"kind": "dense", "method": method, "nodes": 1, "ranks": 2, "shape": shape, "dtype": "float64"}
    rows = records("bcast", method, point, [80_000 / t for t in noisy(seconds, seed=seed)], size=80_000)
    for row in rows:
        row.update(payload_bytes=80_000, rss_hwm_delta_bytes=90_000, tracemalloc_peak_bytes=1000,
                   root_rss_hwm_delta_bytes=90_000, root_tracemalloc_peak_bytes=1000, buffers_reused=method != "pickle")
    return rows


def test_published_vs_measured_says_plainly_what_did_not_reproduce(tmp_path):
    refs = {"studies": {"s": {"title": "A study", "source": "here", "system": "a big machine"}},
            "references": [
                {"id": "pickle-wins", "study": "s", "family": "bcast", "ratio": {"numerator": "buffer",
                 "denominator": "pickle"}, "parameters": {"kind": "dense", "shape": "100x100"}, "metric": "elapsed_s",
                 "value": 2.96, "lower": -0.5, "upper": 1.0, "unit": "x", "quote": "Out-of-place 2,96x"},
                {"id": "in-place-wins", "study": "s", "family": "bcast", "ratio": {"numerator": "pickle",
                 "denominator": "buffer"}, "parameters": {"kind": "dense", "shape": "100x100"}, "metric": "elapsed_s",
                 "value": 3.4, "lower": -0.5, "upper": 1.0, "unit": "x"},
                {"id": "absolute", "study": "s", "family": "bcast", "variant": "buffer", "metric": "elapsed_s",
                 "parameters": {"shape": "100x100"}, "value": 2.0, "unit": "s"},
                {"id": "big", "study": "s", "family": "bcast", "ratio": {"numerator": "pickle", "denominator":
                 "buffer"}, "parameters": {"shape": "10000x10000"}, "metric": "elapsed_s", "value": 3.4, "unit": "x"},
                # a band whose upper edge, 4.0, sits where this campaign's ratio does: its interval overlaps it
                {"id": "at-the-edge", "study": "s", "family": "bcast", "ratio": {"numerator": "pickle",
                 "denominator": "buffer"}, "parameters": {"kind": "dense", "shape": "100x100"},
                 "metric": "elapsed_s", "value": 3.0, "lower": -0.5, "upper": 0.3333333, "unit": "x"},
            ]}
    path = tmp_path / "refs.yaml"
    path.write_text(yaml.safe_dump(refs))
    sections = {"bcast": section("bcast", bcast_case("pickle", 0.004) + bcast_case("buffer", 0.001, seed=1))}
    html = report.render_html(campaign(tmp_path, references=str(path)), sections)
    part = html[html.index('id="bcast-published"'):html.index("One array broadcast")]
    assert "1 reproduced, 1 not reproduced, 1 inconclusive, 1 shown, 1 not measured" in part
    # the interval reaches past the band's edge: neither reproduced nor not, and never a "bad" finding
    assert "Inconclusive. The study found pickle / buffer (elapsed_s, kind=dense, shape=100x100) = 3.00 x" in part
    assert "overlaps the accepted 1.50 to 4.00, so it neither holds nor fails" in part
    # buffer / pickle = 0.25 where the study found 2.96: the other variant wins here, said in words
    assert "Not reproduced. The study found buffer / pickle (elapsed_s, kind=dense, shape=100x100) = 2.96 x" in part
    assert "The other variant wins here: the study&#39;s shape is reversed." in part
    assert "Reproduced: pickle / buffer" in part and "a big machine" in part
    assert "not measured</span>: 1 reference of A study" in part and "shape=10000x10000" in part
    items = findings.build(sections, None, report_verdicts.by_family(
        report_verdicts.published(campaign(tmp_path, references=str(path)), report_verdicts.results_of(
            campaign(tmp_path), sections))))
    assert any(i["level"] == "bad" and i["text"].startswith("pickle-wins: Not reproduced") for i in items)
    assert not any(i["text"].startswith("at-the-edge") for i in items if i["level"] == "bad")


def test_the_shipped_references_are_the_default_and_null_turns_them_off(tmp_path):
    defaults = campaign_run.validate({"campaign": {"name": "x"}, "shuffle": {}})["campaign"]
    assert defaults["references"] == "published" and defaults["compare_to"] is None
    assert report_verdicts.references_file(defaults) == report_verdicts.references.DEFAULT_FILE
    assert report_verdicts.references_file({**defaults, "references": None}) is None
    sections = {"bcast": section("bcast", bcast_case("pickle", 0.004) + bcast_case("buffer", 0.001, seed=1))}
    html = report.render_html({**campaign(tmp_path), "campaign": {**campaign(tmp_path)["campaign"],
                                                                  "references": "published"}}, sections)
    assert "bcast/dense/100x100/pickle-over-buffer" in html and "Dagger" in html


def test_a_campaign_that_carries_a_study_gets_its_view_with_claims_and_published_values(tmp_path):
    sections = {"bcast": section("bcast", bcast_case("pickle", 0.004) + bcast_case("buffer", 0.001, seed=1)
                                 + bcast_case("pkl5", 0.001, seed=4)
                                 + bcast_case("pickle", 0.3, shape="10000x10000", seed=2)
                                 + bcast_case("buffer", 0.1, shape="10000x10000", seed=3))}
    cfg = campaign(tmp_path, references="published", studies=["dagger-bcast"])
    html = report.render_html(cfg, sections)
    assert 'id="study-dagger-bcast"' in html and "Study: Dagger: Benchmarking Broadcast" in html
    # in the findings; the allocation claim is open: both methods' receivers peak at the same 1000 bytes here
    assert ("Study dagger-bcast: 2 claims reproduced, 1 not reproduced, 1 inconclusive, 0 not comparable (a "
            "stand-in), 3 not measured") in html
    assert "discourse.julialang.org" in html
    claims_part = html[html.index('id="study-dagger-bcast-claims"'):html.index('id="study-dagger-bcast-published"')]
    # the massive dense case: pickle 3x slower in every cell -> reproduced; the small one: pickle 4x slower than
    # pkl5, a gain outside 0-1.25x -> not reproduced
    massive = claims_part[claims_part.index("bcast/in-place-wins-for-massive-dense"):]
    assert '"v reproduced">reproduced' in massive[:massive.index("</tr>")] and "above 1 in 1 of 1 cells" in massive
    light = claims_part[claims_part.index("bcast/no-gain-for-lightweight-dense"):]
    assert '"v not-reproduced">not reproduced' in light[:light.index("</tr>")]
    assert "0 of 1 intervals wholly in [0, 1.25]x, 1 wholly outside" in light
    assert "bcast/sparse-crossover-in-density" in claims_part and "not measured" in claims_part
    published = html[html.index('id="study-dagger-bcast-published"'):]
    assert "bcast/dense/10000x10000/pickle-over-buffer" in published and ">3.40 x<" in published
    assert "(2 of 6 measured here)" in published  # the sparse and pkl5 massive references have no point here
    assert 'id="study-' not in report.render_html(campaign(tmp_path, references="published"), sections)


# --- compare_to ---


def write_tables(root, name, rows, mpi=MPICH, run=None):
    """A finished campaign's tables as aggregate writes them (records, points with the flattened meta)."""
    sec = section(name, rows, meta={"fingerprint.mpi_library": mpi})
    (root / "tables").mkdir(parents=True, exist_ok=True)
    sec["table"].to_parquet(root / "tables" / f"{name}.parquet", index=False)
    sec["points_table"].to_csv(root / "tables" / f"{name}_points.csv", index=False)
    if run:
        (root / "campaign_run.json").write_text(json.dumps(run))
    return root


def test_compare_to_adds_the_section_with_its_verdict_counts(tmp_path):
    base = write_tables(tmp_path / "base", "shuffle", stream("uni", 4e9, seed=7) + stream("bidi", 6e9, seed=8),
                        run={"host_load": {"cpus": 2, "campaign_cpus": 1.0, "other_cpus": 1.5}})
    sections = {"shuffle": section("shuffle", stream("uni", 2e9, seed=9) + stream("bidi", 6e9, seed=10))}
    cfg = campaign(tmp_path, compare_to=str(base), compare_thresholds={"shuffle": {"default": 0.1}})
    assert campaign_run.validate({**cfg, "shuffle": {}})["campaign"]["compare_to"] == str(base)
    html = report.render_html(cfg, sections)
    part = html[html.index('id="compared"'):html.index('<h2 id="shuffle"')]
    assert f"Compared with <code>{base}</code>" in part and "BASE ran while other processes kept 1.50" in part
    counts = re.search(r'<tr><td class="regressed">(\d+)</td>', part)
    assert counts and int(counts.group(1)) >= 2  # uni's bandwidth halved and its time doubled
    assert 'id="compare-verdicts"' in part and 'id="compare-shuffle"' in part and part.count('id="shuffle"') == 0
    assert "shuffle = {&#39;default&#39;: 0.1}" in part or "shuffle = {'default': 0.1}" in part
    comparison = report_verdicts.comparison(cfg, report_verdicts.results_of(cfg, sections))
    assert comparison["counts"]["regressed"] >= 2 and set(comparison["frame"]["threshold"]) == {0.1}
    items = findings.build(sections, comparison, {})
    assert any(i["text"].startswith(f"Compared with {base}: ") and i["level"] == "bad" for i in items)
    assert any(i["text"].startswith("regressed: shuffle pattern~uni") for i in items)


def test_compare_to_reads_tables_only_and_names_them_as_inputs(tmp_path):
    base = write_tables(tmp_path / "base", "shuffle", stream("uni", 4e9), mpi="Open MPI v5.0.3",
                        run={"host_load": None})
    wanted = report_verdicts.inputs(campaign(tmp_path, compare_to=str(base)))
    assert wanted["compare_to"] == [str(base / "tables" / "shuffle.parquet"),
                                    str(base / "tables" / "shuffle_points.csv"), str(base / "campaign_run.json")]
    assert wanted["references"] == []
    sections = {"shuffle": section("shuffle", stream("uni", 4e9, seed=3))}
    cfg = campaign(tmp_path, compare_to=str(base))
    frame = report_verdicts.comparison(cfg, report_verdicts.results_of(cfg, sections))["frame"]
    # the MPI library comes from the points table's fingerprint columns
    assert set(frame["verdict"]) == {"not comparable"} and set(frame["differs"]) == {"mpi_library"}


@pytest.mark.parametrize("keys, problem", [
    ({"compare_to": "/no/such/folder"}, "campaign.compare_to = '/no/such/folder': no such folder"),
    ({"compare_thresholds": {"shuffle.bandwith_Bps": 0.1}},
     "campaign.compare_thresholds.shuffle.bandwith_Bps = 0.1: shuffle has no measure bandwith_Bps"),
    ({"compare_thresholds": {"default": 0}}, "campaign.compare_thresholds.default = 0: must be a fraction > 0"),
    ({"compare_thresholds": {"kv": {"gets": 0.1}}}, "campaign.compare_thresholds.kv.gets = 0.1: kv has no measure"),
    ({"references": "/no/refs.yaml"}, "campaign.references = '/no/refs.yaml': /no/refs.yaml: cannot be read"),
])
def test_bad_verdict_keys_are_refused_before_any_job(keys, problem):
    with pytest.raises(config.ConfigError) as error:
        campaign_run.validate({"campaign": {"name": "x", **keys}, "shuffle": {}})
    assert problem in error.value.message()


def test_compare_to_must_be_a_finished_campaign_other_than_this_one(tmp_path):
    (tmp_path / "empty").mkdir()
    for folder, hint in ((tmp_path / "empty", "has no tables"), (tmp_path / "results", "this campaign's own")):
        folder.mkdir(exist_ok=True)
        with pytest.raises(config.ConfigError) as error:
            campaign_run.validate({"campaign": {"name": "x", "results_dir": str(tmp_path / "results"),
                                          "compare_to": str(folder)}, "shuffle": {}})
        assert hint in error.value.message()


def test_kv_is_bounded_by_the_memcpy_of_its_clients_and_managers(tmp_path):
    def kv(operation, bandwidth, seed):
        point = {"operation": operation, "nodes": 1, "clients_per_node": 2, "managers_per_node": 1,
                 "value_size": 4 * KiB}
        return records("kv", operation, point, noisy(bandwidth, seed=seed))

    sections = {"calibration": section("calibration", memcpy(ranks=2, bandwidth=4e9) + memcpy(ranks=4, bandwidth=8e9)),
                "kv": section("kv", kv("put", 1e8, 1) + kv("batch_put", 5e8, 2))}
    html = report.render_html(campaign(tmp_path), sections)
    bw = sections["kv"]["summary"].query("measure == 'bandwidth_Bps'").set_index("operation")
    # 3 processes on a 2-CPU node copy at most as 2 do
    assert bw.loc["put", "bound"] == "memcpy, 2 processes at 4KiB"
    assert bw.loc["batch_put", "pct_of_bound"] == pytest.approx(12.5, rel=0.05)
    assert 'id="kv-summary"' in html and "dashed: the points&#39; upper bound" in html
    texts = [i["text"] for i in findings.build(sections, None, {})]
    line = next(t for t in texts if t.startswith("kv: batch_put / put (aggregate bandwidth): 4KiB (1 node(s)): "))
    assert float(re.search(r": ([\d.]+)x \[", line).group(1)) == pytest.approx(5, rel=0.05)


def test_compare_noise_from_sets_the_sections_thresholds_from_an_aa_pair(tmp_path):
    def run(factors, seed):
        rows = []
        for k, size in enumerate((1, 4, 16, 64)):
            rows += stream("uni", 4e9 * factors.get(k, 1.0), size=size * KiB, seed=seed + k)
        return rows

    # one campaign launched three times moves each point by up to 30% from launch to launch
    a = write_tables(tmp_path / "a", "shuffle", run({0: 1.3, 1: 0.85, 2: 1.1}, 10))
    a2 = write_tables(tmp_path / "a2", "shuffle", run({}, 20))
    base = write_tables(tmp_path / "base", "shuffle", run({}, 30))
    sections = {"shuffle": section("shuffle", run({1: 1.25, 3: 0.9}, 40))}
    plain = campaign(tmp_path, compare_to=str(base))
    assert {"improved", "regressed"} & set(
        report_verdicts.comparison(plain, report_verdicts.results_of(plain, sections))["frame"]["verdict"])
    cfg = campaign(tmp_path, compare_to=str(base), compare_noise_from=[str(a), str(a2)])
    assert campaign_run.validate({**cfg, "shuffle": {}})["campaign"]["compare_noise_from"] == [str(a), str(a2)]
    assert set(report_verdicts.inputs(cfg)["compare_to"]) >= {str(a / "tables" / "shuffle.parquet"),
                                                              str(a2 / "tables" / "shuffle_points.csv")}
    comparison = report_verdicts.comparison(cfg, report_verdicts.results_of(cfg, sections))
    assert not {"improved", "regressed"} & set(comparison["frame"]["verdict"])
    noise = {n["key"]: n for n in comparison["noise"]}
    assert noise["shuffle.bandwidth_Bps"]["raised"] and noise["shuffle.bandwidth_Bps"]["threshold"] > 0.3
    html = report.render_html(cfg, sections)
    assert "Thresholds from the launch-to-launch spread of one campaign run 2 times" in html
    assert "shuffle.bandwidth_Bps" in html


def test_compare_noise_from_runs_with_launches_shows_their_run_to_run_spread(tmp_path):
    def run(seed):  # 3 launches of 4 points
        rows = []
        for k, size in enumerate((1, 4, 16, 64)):
            for launch in range(3):
                noise_seed = seed + 10 * k + launch
                rows += [{**r, "launch": launch} for r in stream("uni", 4e9, size=size * KiB, seed=noise_seed)]
        return rows

    a, a2, base = (write_tables(tmp_path / name, "shuffle", run(seed))
                   for name, seed in (("a", 1), ("a2", 2), ("b", 3)))
    cfg = campaign(tmp_path, compare_to=str(base), compare_noise_from=[str(a), str(a2)])
    sections = {"shuffle": section("shuffle", run(4))}
    comparison = report_verdicts.comparison(cfg, report_verdicts.results_of(cfg, sections))
    assert comparison["noise"] == [] and {r["key"] for r in comparison["run_noise"]} >= {"shuffle.bandwidth_Bps"}
    assert set(comparison["frame"]["unit"]) == {"launches"}
    html = report.render_html(cfg, sections)
    assert "Run-to-run spread from one campaign run 2 times" in html and "Thresholds from" not in html


@pytest.mark.parametrize("keys, problem", [
    ({"compare_noise_from": ["/x", "/y"]}, "campaign.compare_noise_from = [/x, /y]: sets compare_to's thresholds"),
    ({"compare_noise_from": ["/x"]}, "campaign.compare_noise_from"),
])
def test_compare_noise_from_needs_compare_to_and_two_folders(keys, problem):
    with pytest.raises(config.ConfigError) as error:
        campaign_run.validate({"campaign": {"name": "x", **keys}, "shuffle": {}})
    assert problem in error.value.message()


def test_a_published_ratio_whose_interval_overlaps_the_band_is_inconclusive_in_words():
    """The default report once read "Not reproduced ... 2.15x [1.39, 4.21], outside the accepted 2.80 to 11.2"."""
    assert report_verdicts.references.place(1.39, 4.21, 2.80, 11.2) == "overlaps"
    row = {"id": "r", "what": "pickle / buffer", "metric": "elapsed_s", "parameters": "kind=dense", "kind": "ratio",
           "value": 5.6, "unit": "x", "low": 2.80, "high": 11.2, "measured": 2.15, "ci_low": 1.39, "ci_high": 4.21,
           "status": "inconclusive", "launches": 3, "system": "a laptop"}
    words = report_verdicts.in_words(row)
    assert words.startswith("Inconclusive.") and "2.15 x [1.39, 4.21]" in words and "Not reproduced" not in words
    assert "launches (now 3) would settle it" in words or "no number of launches" in words
