"""What compare says about its own power: per family the change it can detect, which rows miss the campaign's
mdc_target and what limits them, and the launches that stayed disturbed by outside load."""

import json

import numpy as np
import pandas as pd

from movebench.judging import compare

POINTS = [f"pattern~uni/nodes~1/ranks~2/message_size~{size}/window~8" for size in (4096, 65536, 262144, 1048576)]


def write_run(root, spread: dict[str, float], launches=3, disturbed=(), seed=0, target=0.15, slower=()):
    """A results folder of shuffle points measured in `launches` launches with the given launch spread; the
    launches in `disturbed` ((point, launch)) marked as launch marks them."""
    rng = np.random.default_rng(seed)
    rows = []
    for point in POINTS:
        params = {k: int(v) if v.isdigit() else v for k, v in (seg.split("~") for seg in point.split("/"))}
        for k in range(launches):
            shift = rng.normal(0, spread.get(point, 0.02)) + (np.log(2) if point in slower else 0.0)
            hit = (point, k) in disturbed
            for rep in range(4):
                rows.append({"family": "shuffle", "variant": "uni", **params, "point": point, "launch": k,
                             "rep": rep, "warmup": False, "ok": True, "bytes": 1_000_000, "iterations": 10,
                             "elapsed_s": 0.01 * np.exp(shift + rng.normal(0, 0.005)), "disturbed": hit,
                             "other_cpus": 0.6 if hit else 0.01})
    frame = pd.DataFrame(rows)
    frame["bandwidth_Bps"] = frame["bytes"] / frame["elapsed_s"]
    (root / "tables").mkdir(parents=True)
    frame.to_parquet(root / "tables" / "shuffle.parquet", index=False)
    for point in POINTS:
        meta = root / "raw" / "shuffle" / f"{point}.meta.json"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"launches": {"min": 3, "max": launches, "mdc_target": target}}))
    return root


def test_rows_above_the_target_say_what_limits_them(tmp_path):
    noisy = {POINTS[0]: 0.5}
    base = write_run(tmp_path / "a", noisy, seed=1)
    new = write_run(tmp_path / "b", noisy, seed=2, disturbed={(POINTS[1], 0), (POINTS[1], 1)})
    frame = compare.compare(compare.read_results(base), compare.read_results(new))
    limits = frame.set_index(["point", "measure"])["limit"]
    assert limits[(POINTS[0], "bandwidth_Bps")] == "between-launch spread"
    assert limits[(POINTS[1], "bandwidth_Bps")] == "disturbed launches"
    assert limits[(POINTS[2], "bandwidth_Bps")] == "between-launch spread"
    assert frame.attrs["mdc_target"] == 0.15
    line = next(x for x in compare.resolution_lines(frame) if x.startswith("shuffle bandwidth_Bps"))
    # the quiet points resolve a few %; the noisy one is above the target, limited by its spread
    assert "above the campaign's 15% target, limited by between-launch spread (1)" in line
    noisy_mdc = frame.set_index(["point", "measure"])["mdc"][(POINTS[0], "bandwidth_Bps")]
    quiet_mdc = frame.set_index(["point", "measure"])["mdc"][(POINTS[3], "bandwidth_Bps")]
    assert quiet_mdc < 0.15 < noisy_mdc  # each point's resolution its own


def test_disturbed_launches_are_named_and_counted_as_left_out_or_kept(tmp_path):
    base = write_run(tmp_path / "a", {}, seed=1)
    # POINTS[1]: 2 of 3 launches disturbed (one quiet left: kept); POINTS[2]: 1 of 3 (two quiet: left out)
    new = write_run(tmp_path / "b", {}, seed=2, disturbed={(POINTS[1], 0), (POINTS[1], 1), (POINTS[2], 2)})
    frame = compare.compare(compare.read_results(base), compare.read_results(new))
    warning = next(w for w in frame.attrs["warnings"] if w.startswith("NEW:"))
    assert warning.startswith("NEW: 3 launches stayed disturbed by outside load (other processes kept up to 0.60 "
                              "CPUs busy): 1 left out of the statistics, 2 kept where their point had fewer than 2 "
                              "quiet launches")
    rows = frame.set_index(["point", "measure"])
    assert rows.loc[(POINTS[2], "bandwidth_Bps"), "launches_new"] == 2  # its disturbed launch left out
    assert rows.loc[(POINTS[1], "bandwidth_Bps"), "launches_new"] == 3  # kept: one quiet launch is too few
    assert not any(w.startswith("BASE:") for w in frame.attrs["warnings"])


def test_a_change_on_a_side_measured_under_load_is_not_called(tmp_path):
    base = write_run(tmp_path / "a", {}, seed=1)
    # every point 2x slower in NEW; POINTS[0]'s launches all disturbed (kept), POINTS[1] one of three (left out)
    new = write_run(tmp_path / "b", {}, seed=2, slower=POINTS, disturbed={(POINTS[0], k) for k in range(3)}
                    | {(POINTS[1], 0)})
    rows = compare.compare(compare.read_results(base), compare.read_results(new)).set_index(["point", "measure"])
    loaded = rows.loc[(POINTS[0], "elapsed_s")]
    assert loaded["verdict"] == "inconclusive" and loaded["ratio"] > 1.8
    assert "inconclusive rather than changed: NEW kept launches disturbed by outside load" in loaded["note"]
    assert rows.loc[(POINTS[1], "elapsed_s"), "verdict"] == "regressed"  # its disturbed launch was left out
    assert rows.loc[(POINTS[2], "elapsed_s"), "verdict"] == "regressed"
