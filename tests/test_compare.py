"""compare and check on results folders built from known records (the real pipeline: test_verdict_pipeline.py)."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from movebench import families
from movebench.cli import main
from movebench.core import envinfo
from movebench.judging import compare, references

MPICH = "MPICH Version:      5.0.2"
POINT_4K = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~8"
POINT_64K = "pattern~uni/nodes~1/ranks~2/message_size~65536/window~8"


def _meta(mpi=MPICH, cpu="AMD EPYC", numpy_version="2.4.6", env=None, with_fingerprint=True, group=None):
    meta = {"launch_group": group, "hostname": "vm", "nodes": ["vm"], "cpu_model": cpu, "mpi_library": mpi,
            "mpi_version": "5.0",
            "mpi_thread_level": "multiple", "page_size": 4096, "transparent_hugepage": "madvise",
            "packages": {"movebench": "0.1.0", "numpy": numpy_version, "mpi4py": "4.1.2"},
            "environment": {"OMP_NUM_THREADS": "1", "PMI_RANK": "0", **(env or {})}}
    if with_fingerprint:
        meta["fingerprint"] = envinfo.fingerprint(meta)
    return meta


def write_results(root, points: dict, metas: dict | None = None, failed=(), run=None):
    """A results folder: `points` maps a shuffle point path to its measured times (s); 1 MB per repetition."""
    rows = []
    for point, times in points.items():
        params = {k: int(v) if v.isdigit() else v for k, v in (seg.split("~") for seg in point.split("/"))}
        iterations = int(params.pop("iterations", 10))
        ident = {"family": "shuffle", "variant": params["pattern"], **params, "point": point}  # as records carry them
        rows.append({**ident, "rep": 0, "warmup": True, "ok": True, "elapsed_s": times[0] * 3, "bytes": 1_000_000,
                     "iterations": iterations})
        for rep, t in enumerate(times):
            rows.append({**ident, "rep": rep, "warmup": False, "ok": True, "elapsed_s": t,
                         "bytes": 1_000_000 * iterations // 10, "iterations": iterations})
    frame = pd.DataFrame(rows)
    frame["bandwidth_Bps"] = frame["bytes"] / frame["elapsed_s"]
    (root / "tables").mkdir(parents=True)
    frame.to_parquet(root / "tables" / "shuffle.parquet", index=False)
    for point in points:
        meta_path = root / "raw" / "shuffle" / f"{point}.meta.json"
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps((metas or {}).get(point, _meta())))
    for point in failed:
        fail = root / "failed" / "shuffle" / f"{point}.json"
        fail.parent.mkdir(parents=True, exist_ok=True)
        fail.write_text(json.dumps({"point": point, "error": "timed out"}))
    if run:
        (root / "campaign_run.json").write_text(json.dumps(run))
    return root


def _times(n, factor=1.0, seed=0, cv=0.02):
    rng = np.random.default_rng(seed)
    return (rng.lognormal(0, cv, n) * 0.01 * factor).tolist()


def _row(frame, point, measure):
    rows = frame[(frame["point"] == point) & (frame["measure"] == measure)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_a_slowdown_regresses_time_and_bandwidth_alike(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(10, seed=1)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(10, 1.3, seed=2)})
    frame = compare.compare(base, new)
    t, bw = _row(frame, POINT_4K, "elapsed_s"), _row(frame, POINT_4K, "bandwidth_Bps")
    assert t.verdict == bw.verdict == "regressed"
    assert t.ratio == pytest.approx(1.3, rel=0.1) and bw.ratio == pytest.approx(1 / 1.3, rel=0.1)
    assert t.ci_low < t.ratio < t.ci_high and t.p_value < 0.01
    assert (t.n_base, t.n_new, t.better, bw.better) == (10, 10, "lower", "higher")
    assert t.median_base == pytest.approx(np.median(_times(10, seed=1)))
    assert list(frame.columns) == list(compare.COLUMNS)


def test_a_speedup_improves(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8, seed=1)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(8, 0.7, seed=2)})
    assert set(compare.compare(base, new)["verdict"]) == {"improved"}


def test_the_same_records_are_unchanged(tmp_path):
    times = _times(10, seed=3)
    frame = compare.compare(write_results(tmp_path / "a", {POINT_4K: times}),
                            write_results(tmp_path / "b", {POINT_4K: times}))
    assert set(frame["verdict"]) == {"unchanged"}
    assert set(frame["differs"]) == {""}


def test_fewer_than_six_repetitions_is_inconclusive(tmp_path):
    frame = compare.compare(write_results(tmp_path / "a", {POINT_4K: _times(5, seed=1)}),
                            write_results(tmp_path / "b", {POINT_4K: _times(10, 2.0, seed=2)}))
    assert set(frame["verdict"]) == {"inconclusive"}
    assert _row(frame, POINT_4K, "elapsed_s").ratio == pytest.approx(2.0, rel=0.15)


def test_points_on_one_side_are_listed_not_dropped(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8, seed=1)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(8, seed=1), POINT_64K: _times(8, seed=2)},
                        failed=[])
    base_failed = write_results(tmp_path / "c", {POINT_64K: _times(8, seed=2)}, failed=[POINT_4K])
    frame = compare.compare(base, new)
    assert set(frame[frame["point"] == POINT_64K]["verdict"]) == {compare.ONLY_NEW}
    assert _row(frame, POINT_64K, "elapsed_s").n_base == 0
    back = compare.compare(new, base_failed)
    only = back[back["point"] == POINT_4K]
    assert set(only["verdict"]) == {compare.ONLY_BASE} and set(only["note"]) == {"failed in new"}
    assert compare.summary_lines(frame)[0] == (
        "4 point-measures in 2 points: 0 regressed, 0 improved, 2 unchanged, 0 inconclusive; 1 point only in new")


def test_fingerprint_differences_are_named(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8)})
    new_meta = _meta(numpy_version="2.5.0", env={"MPIR_CVAR_CH4_NETMOD": "ofi", "PMI_RANK": "1"})
    new_meta["mpi_library"] = "MPICH Version:      4.3.0"
    new_meta["fingerprint"] = envinfo.fingerprint(new_meta)
    new = write_results(tmp_path / "b", {POINT_4K: _times(8)}, metas={POINT_4K: new_meta})
    row = _row(compare.compare(base, new), POINT_4K, "elapsed_s")
    # an MPI upgrade is what a comparison is for: named, still judged; PMI_* is not a tuning variable
    assert row.verdict == "unchanged" and row.comparable
    assert row.differs == "env.MPIR_CVAR_CH4_NETMOD, mpi_library_version, packages.numpy"
    assert "packages.numpy: 2.4.6 -> 2.5.0" in row.differs_detail


@pytest.mark.parametrize("change", [{"mpi": "Open MPI v4.1.5, package: Open MPI"}, {"cpu": "Intel Xeon"},
                                    {"group": {"name": "nodes~1/ranks~2/launch~0", "size": 3, "position": 1}}])
def test_another_mpi_library_cpu_model_or_launch_grouping_is_not_comparable(tmp_path, change):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8, seed=1)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(8, 1.5, seed=2)}, metas={POINT_4K: _meta(**change)})
    frame = compare.compare(base, new)
    assert set(frame["verdict"]) == {compare.NOT_COMPARABLE} and not frame["comparable"].any()
    assert any("not comparable" in line and "--allow-different" in line for line in compare.summary_lines(frame))
    allowed = compare.compare(base, new, allow_different=True)
    assert set(allowed["verdict"]) == {"regressed"}


def test_old_metas_without_a_fingerprint_get_one_when_read(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8)}, metas={POINT_4K: _meta(with_fingerprint=False)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(8)}, metas={POINT_4K: _meta(cpu="Intel Xeon")})
    assert _row(compare.compare(base, new), POINT_4K, "elapsed_s").differs == "cpu_model"


def test_times_of_different_work_are_not_compared(tmp_path):
    # iterations: auto calibrated another loop count: the bandwidth compares, the time does not
    point_a, point_b = POINT_4K + "/iterations~10", POINT_4K + "/iterations~20"
    base = write_results(tmp_path / "a", {point_a: _times(8, seed=1)})
    new = write_results(tmp_path / "b", {point_b: _times(8, 2.0, seed=2)})
    # same point path on both sides: rename b's
    table = pd.read_parquet(new / "tables" / "shuffle.parquet").assign(point=point_a)
    table.to_parquet(new / "tables" / "shuffle.parquet", index=False)
    (new / "raw" / "shuffle" / f"{point_b}.meta.json").rename(new / "raw" / "shuffle" / f"{point_a}.meta.json")
    frame = compare.compare(base, new)
    t, bw = _row(frame, point_a, "elapsed_s"), _row(frame, point_a, "bandwidth_Bps")
    assert t.verdict == compare.NOT_COMPARABLE and "iterations 10 -> 20" in t.note
    assert bw.verdict == "unchanged"


def test_thresholds_per_family_and_measure(tmp_path):
    base = write_results(tmp_path / "a", {POINT_4K: _times(10, seed=1)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(10, 1.08, seed=1)})  # the same noise, 8% slower
    assert set(compare.compare(base, new)["verdict"]) == {"regressed"}
    assert set(compare.compare(base, new, {"default": 0.10})["verdict"]) == {"unchanged"}
    mixed = compare.compare(base, new, {"default": 0.10, "shuffle.elapsed_s": 0.05})
    assert _row(mixed, POINT_4K, "elapsed_s").verdict == "regressed"
    assert _row(mixed, POINT_4K, "bandwidth_Bps").verdict == "unchanged"
    assert compare.threshold_for({"shuffle": {"default": 0.2, "elapsed_s": 0.3}}, "shuffle", "elapsed_s") == 0.3
    assert compare.threshold_for({"shuffle": {"default": 0.2}}, "shuffle", "bandwidth_Bps") == 0.2
    assert compare.threshold_for({"shuffle": 0.2}, "shuffle", "x_s") == 0.2
    assert compare.threshold_for(None, "shuffle", "x_s") == 0.05
    assert compare.threshold_for({"shuffle": {"default": 0.2}, "shuffle.x_s": 0.3}, "shuffle", "x_s") == 0.3


def _launches(root, effects: dict, seed: int):
    """A campaign of several uni points, each launch moving a point's figures by its own factor."""
    points = {f"pattern~uni/nodes~1/ranks~2/message_size~{1024 << k}/window~8": _times(
        10, effects.get(k, 1.0), seed=seed * 100 + k) for k in range(6)}
    return write_results(root, points), list(points)


def test_thresholds_from_an_aa_pair_absorb_launch_to_launch_spread(tmp_path, capsys):
    # one campaign run twice: every launch moves each point by a few to 25 percent (placement, pages), far
    # beyond the 2% spread within a launch, so plain verdicts call an A/A pair improved and regressed
    a, points = _launches(tmp_path / "a", {0: 1.25, 1: 0.9, 2: 1.05, 4: 0.95}, seed=1)
    a2, _ = _launches(tmp_path / "a2", {}, seed=2)
    a3, _ = _launches(tmp_path / "a3", {1: 1.2, 3: 0.9, 5: 1.06}, seed=3)
    plain = compare.compare(a2, a3)
    assert {"improved", "regressed"} & set(plain["verdict"])
    noise = compare.thresholds_from_noise(compare.compare(a, a2))
    assert set(noise) == {"shuffle.elapsed_s", "shuffle.bandwidth_Bps"}
    t = noise["shuffle.elapsed_s"]
    logs = [math.log(f) for f in (1.25, 0.9, 1.05, 1.0, 0.95, 1.0)]
    rms = math.sqrt(sum(v * v for v in logs) / 6)
    assert t.points == 6 and t.rms_log_ratio == pytest.approx(rms, rel=0.15) and t.raised
    assert t.threshold == pytest.approx(math.exp(compare.NOISE_Z * t.rms_log_ratio) - 1)
    assert t.largest_ratio == pytest.approx(1.25, rel=0.05)
    thresholds = {k: n.threshold for k, n in noise.items()}
    # another A/A pair judged at those thresholds: nothing improved or regressed
    assert not {"improved", "regressed"} & set(compare.compare(a2, a3, thresholds)["verdict"])
    # a change beyond the launch spread is still found
    slow = write_results(tmp_path / "b", {p: _times(10, 2.0 if k == 2 else 1.0, seed=400 + k)
                                          for k, p in enumerate(points)})
    judged = compare.compare(a2, slow, thresholds)
    assert _row(judged, points[2], "elapsed_s").verdict == "regressed"
    # never below the floor: a quiet pair keeps the threshold asked for
    quiet = compare.thresholds_from_noise(compare.compare(a2, a2), {"default": 0.1})
    assert all(n.threshold == 0.1 and not n.raised for n in quiet.values())
    # the command: --noise-from prints what it derived and judges with it
    assert main(["compare", str(a2), str(a3), "--noise-from", str(a), str(a2), "--out", str(tmp_path / "o"),
                 "--fail-on", "regressed", "--fail-on", "improved"]) == 0
    printed = capsys.readouterr().out
    assert "thresholds from the A/A pair" in printed and "shuffle.elapsed_s: " in printed
    assert main(["compare", str(a2), str(a3), "--out", str(tmp_path / "o"), "--fail-on", "improved",
                 "--fail-on", "regressed"]) == 1
    assert main(["compare", str(a2), str(a3), "--noise-from", str(a), str(tmp_path / "none")]) == 2
    assert main(["compare", str(a2), str(a3), "--noise-from", str(a)]) == 2
    assert "at least twice" in capsys.readouterr().err
    # three runs: every pair's ratios pooled
    three = compare.noise_from([a, a2, a3]).thresholds
    assert three["shuffle.elapsed_s"].points == 18 and three["shuffle.elapsed_s"].threshold > 0.05


def test_a_busy_host_is_warned_about(tmp_path):
    busy = {"host_load": {"cpus": 2, "busy_cpus": 2.0, "campaign_cpus": 0.5, "other_cpus": 1.5}}
    base = write_results(tmp_path / "a", {POINT_4K: _times(8)}, run=busy)
    new = write_results(tmp_path / "b", {POINT_4K: _times(8)})
    lines = compare.summary_lines(compare.compare(base, new))
    assert lines[0].startswith("warning: BASE ran while other processes kept 1.50 of the host's 2 CPUs busy")


def test_not_a_results_folder(tmp_path):
    with pytest.raises(compare.ResultsError, match="no tables/ or raw/"):
        compare.read_results(tmp_path)


# --- the command ---


def test_compare_command_writes_a_self_contained_page_and_the_csv(tmp_path, capsys):
    base = write_results(tmp_path / "a", {POINT_4K: _times(10, seed=1), POINT_64K: _times(10, seed=5)})
    new = write_results(tmp_path / "b", {POINT_4K: _times(10, 1.4, seed=2)})
    out = tmp_path / "out"
    assert main(["compare", str(base), str(new), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 regressed" in printed and "worst regressions:" in printed and POINT_4K in printed
    page = (out / "compare.html").read_text()
    assert "<script" not in page.lower() and not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "<style>" in page and "regressed" in page and compare.ONLY_BASE in page
    csv = pd.read_csv(out / "compare.csv")
    assert set(csv["verdict"]) == {"regressed", compare.ONLY_BASE}
    assert main(["compare", str(base), str(new), "--out", str(out), "--fail-on", "regressed"]) == 1
    assert main(["compare", str(base), str(new), "--out", str(out), "--fail-on", "improved"]) == 0
    assert main(["compare", str(base), str(new), "--out", str(out), "--threshold", "50%",
                 "--fail-on", "regressed"]) == 0
    assert main(["compare", str(base), str(new)]) == 0 and (new / "compare.html").exists()
    section = compare.render_section(compare.compare(base, new), "a", "b")
    assert "<html" not in section and "<style" not in section and 'id="verdicts"' in section


def test_compare_command_rejects_bad_input(tmp_path, capsys):
    base = write_results(tmp_path / "a", {POINT_4K: _times(8)})
    assert main(["compare", str(base), str(tmp_path / "missing")]) == 2
    assert "missing: no such results folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(base), str(base), "--threshold", "shuffle=fast"])
    assert exc.value.code == 2
    assert "'shuffle=fast': expected a fraction such as 0.05 or 5%" in capsys.readouterr().err


# --- references ---


def _refs(*entries, studies=None):
    return {"studies": studies if studies is not None else {
        "s": {"title": "A study", "source": "somewhere", "system": "Big Iron"}}, "references": list(entries)}


RATIO = {"id": "r", "study": "s", "family": "shuffle", "ratio": {"numerator": "bidi", "denominator": "uni"},
         "parameters": {"message_size": "4KiB"}, "metric": "bandwidth_Bps", "value": 2.0, "lower": -0.25,
         "upper": 0.25, "unit": "x"}


def test_references_schema_problems_name_key_value_and_fix():
    bad = [
        {**RATIO, "unit": "furlongs"},
        {**RATIO, "id": "r2", "tolerance": 0.1},
        {k: v for k, v in RATIO.items() if k != "value"} | {"id": "r3"},
        {**RATIO, "id": "r4", "lower": 0.5},
    ]
    with pytest.raises(references.ReferencesError) as exc:
        references.validate(_refs(*bad), "refs.yaml")
    message = exc.value.message()
    assert message.startswith("invalid references file refs.yaml (4 problems):")
    assert "  references[0].unit = 'furlongs': must be one of x, 1, %, s, ms" in message
    assert "  references[1].tolerance = 0.1: unknown key 'tolerance'; valid keys: denominator" not in message
    assert "  references[1].tolerance = 0.1: unknown key 'tolerance'; valid keys: family, id, judged" in message
    assert "  references[2] = None: 'value' is a required property" in message
    assert "  references[3].lower = 0.5: must be <= 0" in message


def test_references_cross_checks():
    bad = [
        {**RATIO, "study": "nowhere"},
        {**RATIO, "id": "r", "family": "teleport"},
        {**RATIO, "id": "both", "variant": "uni"},
        {k: v for k, v in RATIO.items() if k != "ratio"} | {"id": "neither", "unit": "x"},
        {**RATIO, "id": "ratio-unit", "unit": "s"},
        {k: v for k, v in RATIO.items() if k != "ratio"} | {"id": "dims", "variant": "uni", "metric": "elapsed_s",
                                                            "unit": "MiB/s"},
    ]
    with pytest.raises(references.ReferencesError) as exc:
        references.validate(_refs(*bad))
    lines = exc.value.message().splitlines()[1:]
    assert lines == [
        "  references[0].study = 'nowhere': not a key of `studies`: s",
        "  references[1].id = 'r': already used by an earlier reference: ids must be unique",
        f"  references[1].family = 'teleport': must be one of {', '.join(families.names())}",
        "  references[2] = {variant: uni, ratio: {numerator: bidi, denominator: uni}}: give `variant` (a metric of "
        "one variant) or `ratio` (two variants' medians), not both",
        "  references[3] = {}: give `variant` (a metric of one variant) or `ratio` (two variants' medians), "
        "one of them",
        "  references[4].unit = 's': a ratio of two variants is in x",
        "  references[5].unit = 'MiB/s': elapsed_s is a time: use s, ms, us",
    ]


def test_references_file_errors(tmp_path):
    with pytest.raises(references.ReferencesError, match="cannot be read"):
        references.load(tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("references: [\n")
    with pytest.raises(references.ReferencesError, match="is not YAML"):
        references.load(tmp_path / "bad.yaml")


def test_the_published_references_are_valid_and_cite_their_studies():
    doc = references.load()
    studies = doc["studies"]
    assert set(studies) == {"dragon-ddict", "dagger-bcast", "cloud-output-azure", "cloud-output-cirrus",
                            "shuffle-thesis"}
    by_id = {r["id"]: r for r in doc["references"]}
    assert all(r["study"] in studies and r.get("quote") for r in doc["references"])
    assert by_id["kv/batch_put-vs-put/4KiB/1node"]["value"] == 5.6
    assert by_id["kv/frozen_get-vs-get/64MiB/1node"]["value"] == 2
    assert by_id["kv/frozen_get-vs-get/16MiB/2nodes"]["parameters"] == {"value_size": "16MiB", "nodes": 2}
    assert by_id["bcast/dense/10000x10000/pickle-over-buffer"]["value"] == 3.4
    assert by_id["bcast/sparse/0.6/pickle-over-pkl5"]["value"] == 4.76
    # absolute figures are shown, never judged; every ratio the issue names is judged
    assert not any(r.get("judged", "ratio" in r) for r in doc["references"] if "ratio" not in r)
    io = [r for r in doc["references"] if r["family"] == "io"]
    assert len(io) == 2 * 11 * 4 + 11 * 2
    # the tables' columns agree: the study's bandwidth is a mean over iterations of size / time, so by Jensen's
    # inequality never below 20 ranks x size per proc / mean latency, and here at most 31% above it
    pairs = {}
    for r in io:
        key = r["id"].rsplit("/", 1)[0]
        pairs.setdefault(key, {})[r["metric"]] = r
    for key, pair in pairs.items():
        mib = 20 * int(pair["elapsed_s"]["parameters"]["size_per_proc"].removesuffix("MiB"))
        assert 0.76 <= mib / pair["elapsed_s"]["value"] / pair["bandwidth_Bps"]["value"] <= 1.001, key


def _two_variants(tmp_path, uni_times, bidi_times):
    uni = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~8"
    bidi = "pattern~bidi/nodes~1/ranks~2/message_size~4096/window~8"
    return write_results(tmp_path, {uni: uni_times, bidi: bidi_times}), uni, bidi


def test_check_judges_ratios_and_shows_absolute_figures(tmp_path):
    results, uni, bidi = _two_variants(tmp_path / "r", _times(10, 2.0, seed=1), _times(10, 1.0, seed=2))
    doc = references.validate(_refs(
        RATIO,
        {**RATIO, "id": "too-high", "value": 5.0},
        {**RATIO, "id": "elsewhere", "parameters": {"message_size": "1MiB"}},
        {"id": "abs", "study": "s", "family": "shuffle", "variant": "uni", "parameters": {"window": 8},
         "metric": "bandwidth_Bps", "value": 50, "unit": "MB/s"},
        {"id": "own-baseline", "study": "s", "family": "shuffle", "variant": "uni", "metric": "elapsed_s",
         "value": 20, "lower": -0.5, "upper": 0.5, "unit": "ms", "judged": True},
    ))
    frame = references.check(results, doc).set_index("id")
    assert list(references.check(results, doc).columns) == list(references.COLUMNS)
    r = frame.loc["r"]
    assert r.status == "pass" and r.measured == pytest.approx(2.0, rel=0.1) and r.point == bidi
    assert r.ci_low < r.measured < r.ci_high and r.ci_vs_band == "inside" and r.n == "10 / 10"
    assert (r.low, r.high) == (1.5, 2.5)
    assert frame.loc["too-high"].status == "fail" and frame.loc["too-high"].ci_vs_band == "outside"
    assert frame.loc["elsewhere"].status == "not measured" and pd.isna(frame.loc["elsewhere"].point)
    shown = frame.loc["abs"]
    assert shown.status == "shown" and shown.system == "Big Iron" and shown.point == uni
    assert shown.measured == pytest.approx(1e6 / np.median(_times(10, 2.0, seed=1)) / 1e6)  # in MB/s
    own = frame.loc["own-baseline"]
    assert own.status == "pass" and own.measured == pytest.approx(1e3 * np.median(_times(10, 2.0, seed=1)))
    lines = references.summary_lines(references.check(results, doc))
    assert lines[0] == "2 pass, 1 fail, 0 inconclusive, 1 shown, 1 not measured"
    assert any("published on Big Iron" in line for line in lines)


def test_check_command(tmp_path, capsys):
    results, _, _ = _two_variants(tmp_path / "r", _times(10, 2.0, seed=1), _times(10, 1.0, seed=2))
    refs_file = tmp_path / "refs.yaml"
    refs_file.write_text(yaml.safe_dump(_refs(RATIO, {**RATIO, "id": "too-high", "value": 5.0})))
    assert main(["check", str(results), "--references", str(refs_file)]) == 0
    assert "1 pass, 1 fail" in capsys.readouterr().out
    assert pd.read_csv(results / "check.csv")["status"].tolist() == ["pass", "fail"]
    assert main(["check", str(results), "--references", str(refs_file), "--fail-on", "fail"]) == 1
    refs_file.write_text(yaml.safe_dump(_refs({**RATIO, "unit": "s"})))
    assert main(["check", str(results), "--references", str(refs_file)]) == 2
    assert "references[0].unit = 's': a ratio of two variants is in x" in capsys.readouterr().err


def test_units_convert_to_the_metrics_si_unit():
    assert references.UNITS["MiB/s"][1] == 2**20 and references.UNITS["us"][1] == 1e-6
    assert references.dimension("bandwidth_Bps") == "bandwidth" and references.dimension("ops_per_s") == "rate"
    assert references.dimension("rss_hwm_delta_bytes") == "bytes" and references.dimension("efficiency") == "ratio"
    assert math.isclose(references.UNITS["%"][1], 0.01)


def test_host_load_separates_the_campaign_from_other_processes():
    import subprocess
    import sys

    load = envinfo.HostLoad()
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)
    result = load.finish()
    assert result["cpus"] >= 1
    assert result["campaign_cpus"] > 0  # the child's 0.3 s of CPU, over a wall time of at least that
    assert result["other_cpus"] >= 0 and result["busy_cpus"] <= result["cpus"] + 0.05


W64 = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~64"
W1 = "pattern~uni/nodes~1/ranks~2/message_size~4096/window~1"


def test_match_ignoring_pairs_points_that_differ_in_one_parameter(tmp_path):
    base = write_results(tmp_path / "a", {W64: _times(10, seed=1)})
    new = write_results(tmp_path / "b", {W1: _times(10, 3.0, seed=2)})
    plain = compare.compare(base, new)
    assert set(plain["verdict"]) == {compare.ONLY_BASE, compare.ONLY_NEW}
    frame = compare.compare(base, new, match_ignoring={"window": None})
    assert set(frame["point"]) == {W64} and set(frame["point_new"]) == {W1}
    t = _row(frame, W64, "elapsed_s")
    assert t.verdict == "regressed" and t.ratio == pytest.approx(3.0, rel=0.1)
    assert f"NEW's point is {W1}" in t.note
    assert "matched ignoring window; left out: 0 base points at other values, 0 new points at other values" in \
        compare.summary_lines(frame)


def test_match_ignoring_refuses_two_candidates_and_takes_the_values_given(tmp_path):
    base = write_results(tmp_path / "a", {W64: _times(10, seed=1), W1: _times(10, 3.0, seed=3)})
    new = write_results(tmp_path / "b", {W1: _times(10, 3.0, seed=2)})
    with pytest.raises(compare.MatchError, match=r"BASE has two shuffle points that differ only in window: "
                                                 r".*window~1 and .*window~64; pick one value per side"):
        compare.compare(base, new, match_ignoring={"window": None})
    frame = compare.compare(base, new, match_ignoring=compare.parse_match_ignoring(["window=64:1"]))
    assert set(frame["point"]) == {W64} and set(frame["verdict"]) == {"regressed"}
    assert frame.attrs["left_out"] == {"base": 1, "new": 0}
    assert "Points paired ignoring window (BASE at 64, NEW at 1)" in compare.render_html(frame, "a", "b")


def test_match_ignoring_on_the_command_line(tmp_path, capsys):
    base = write_results(tmp_path / "a", {W64: _times(10, seed=1), W1: _times(10, 3.0, seed=3)})
    new = write_results(tmp_path / "b", {W1: _times(10, 3.0, seed=2)})
    assert main(["compare", str(base), str(new), "--match-ignoring", "window=64:1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "matched ignoring window (BASE 64, NEW 1); left out: 1 base points" in out and "2 regressed" in out
    for bad in ("window=64", "window"):
        assert main(["compare", str(base), str(new), "--match-ignoring", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("movebench compare: ") and "window=64:1" in err and len(err.strip().splitlines()) == 1
