"""Claims judged on small synthetic record tables: each kind reproduced, not reproduced and not measured, with
its evidence (the slope and its CI, the crossover's position, k of n cells, the medians against the band)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from movebench import families
from movebench.core.tables import counted
from movebench.judging import claims, references

SERIES = {"nodes": 1, "clients_per_node": 2, "managers_per_node": 1, "data_format": "bytes"}


def rows(family: str, variant: str, point: dict, value: float, metric="bandwidth_Bps", launches=3, reps=4,
         seed=0, cv=0.02) -> list[dict]:
    rng = np.random.default_rng(seed)
    path = families.point_path(point)
    out = []
    for launch in range(launches):
        shift = rng.lognormal(0, cv)
        out.append({"family": family, "variant": variant, "point": path, **point, "launch": launch, "rep": 0,
                    "warmup": True, "ok": True, metric: value * 10})  # a warm-up far off: left out
        out += [{"family": family, "variant": variant, "point": path, **point, "launch": launch, "rep": i,
                 "warmup": False, "ok": True, metric: value * shift * rng.lognormal(0, cv)} for i in range(reps)]
    return out


def kv(op, value, seed=0, **params):
    point = {"operation": op, **SERIES, "value_size": 4096, **params}
    return rows("kv", op, point, value, seed=seed)


def doc(*items) -> dict:
    base = {"study": "s", "family": "kv", "metric": "bandwidth_Bps", "statement": "a claim"}
    return claims.validate({"claims": [{**base, "id": f"c{i}", **c} for i, c in enumerate(items)]})


def judged(table, *items) -> pd.DataFrame:
    return claims.judge(pd.DataFrame(table), doc(*items)).set_index("id")


LINEAR = {"kind": "trend", "variant": "put", "axis": "nodes", "sign": 1, "slope": {"value": 1, "within": 0.25}}


def test_trend_fits_the_log_log_slope_with_its_ci():
    linear = [r for n, s in ((1, 1), (2, 2), (4, 3)) for r in kv("put", 1e9 * n, seed=s, nodes=n)]
    flat = [r for n, s in ((1, 1), (2, 2), (4, 3)) for r in kv("put", 1e9 * n**0.3, seed=s, nodes=n)]
    falling = [r for n, s in ((1, 1), (2, 2)) for r in kv("put", 1e9 / n, seed=s, nodes=n)]
    r = judged(linear, LINEAR).loc["c0"]
    assert r.status == "reproduced" and r.points == 3
    series = claims._series(claims._figures(counted(pd.DataFrame(linear)), doc(LINEAR)["claims"][0]), "nodes")
    slope, low, high = claims.fit_slope(next(iter(series.values())))
    assert slope == pytest.approx(1, abs=0.05) and 0.5 < low < slope < high < 1.5
    assert f"slope {slope:.2f} [{low:.2f}, {high:.2f}] over 3 values" in r.evidence and "nodes=4: 3." in r.evidence
    f = judged(flat, LINEAR).loc["c0"]
    # rises, but not linearly: the slope's whole interval lies below the claimed [0.75, 1.25]
    assert f.status == "not reproduced" and "outside the claimed [0.75, 1.25]" in f.evidence
    two = judged(falling, LINEAR).loc["c0"]  # two points: the same weighted fit, its CI from their two CIs
    assert two.status == "not reproduced" and "slope -1.0" in two.evidence and "over 2 values" in two.evidence
    one = judged(kv("put", 1e9), LINEAR).loc["c0"]
    assert one.status == "not measured" and "two or more values of nodes" in one.evidence


def test_trend_of_a_ratio_pairs_cells_and_respects_the_axis_range():
    table = []
    for size, gain, s in ((1024, 6.0, 1), (65536, 3.0, 2), (2**20, 1.2, 3), (2**24, 1.0, 4), (2**26, 1.0, 5)):
        table += kv("put", 1e8, seed=s, value_size=size) + kv("batch_put", 1e8 * gain, seed=s + 10, value_size=size)
    claim = {"kind": "trend", "ratio": {"numerator": "batch_put", "denominator": "put"}, "axis": "value_size",
             "sign": -1}
    assert judged(table, claim).loc["c0"].status == "reproduced"
    rising = {**claim, "sign": 1}
    assert judged(table, rising).loc["c0"].status == "not reproduced"
    # the flat part alone (>= 1 MiB): the slope's interval holds 0, so the fall is not settled there
    flat = judged(table, {**claim, "axis_range": ["16MiB", "64MiB"]}).loc["c0"]
    assert flat.status == "inconclusive" and "reaches past the claimed below 0" in flat.evidence
    assert "over 2 values" in flat.evidence and "launches" in flat.evidence


def bcast(method, density, seconds, seed):
    point = {"kind": "sparse", "method": method, "nodes": 1, "ranks": 2, "shape": "100x100", "density": density,
             "dtype": "float64"}
    return rows("bcast", method, point, seconds, metric="elapsed_s", seed=seed)


CROSS = {"kind": "crossover", "family": "bcast", "metric": "elapsed_s", "ratio": {"numerator": "pickle",
         "denominator": "buffer"}, "axis": "density", "between": [0.0008, 0.008]}


def test_crossover_places_the_crossing_between_the_stated_values():
    table = []
    for density, pickle, buffer, s in ((0.0008, 1.0, 3.0, 1), (0.008, 5.0, 2.0, 2), (0.6, 50.0, 10.0, 3)):
        table += bcast("pickle", density, pickle, s) + bcast("buffer", density, buffer, s + 10)
    r = judged(table, CROSS).loc["c0"]
    assert r.status == "reproduced" and "as claimed; the medians cross 1 near density=0.00" in r.evidence
    assert r.points == 3
    late = judged(table, {**CROSS, "between": [0.008, 0.6]}).loc["c0"]  # at 0.008 pickle is already slower
    assert late.status == "not reproduced"
    assert "not as claimed (a CI lies wholly on the wrong side of 1: claimed below 1 at every density <= 0.008" \
        in late.evidence
    dense_only = judged([r for r in table if r["density"] > 0.001], CROSS).loc["c0"]
    assert dense_only.status == "not measured" and "no value at or below 0.0008" in dense_only.evidence


def test_share_counts_the_cells_whose_ratio_ci_lies_above_one():
    table = []
    for i, (size, gain) in enumerate(((1024, 1.5), (4096, 1.4), (65536, 0.7), (2**20, 1.3))):
        table += kv("put", 1e8, seed=i, value_size=size) + kv("get", 1e8 * gain, seed=i + 10, value_size=size)
    claim = {"kind": "share", "ratio": {"numerator": "get", "denominator": "put"}, "at_least": 0.5}
    r = judged(table, claim).loc["c0"]
    assert r.status == "reproduced" and "above 1 in 3 of 4 cells (75%" in r.evidence and "below 1 in 1" in r.evidence
    assert judged(table, {**claim, "at_least": 1}).loc["c0"].status == "not reproduced"
    gets_only = [x for x in table if x["variant"] == "get"]
    assert judged(gets_only, claim).loc["c0"].status == "not measured"


def test_share_across_another_parameter_than_the_variant():
    table = []
    for backend, bw, s in (("posix", 5e9, 1), ("blob", 5e8, 2)):
        point = {"pattern": "mfmw", "backend": backend, "nodes": 1, "ranks": 2, "size_per_proc": 2**20}
        table += rows("io", "mfmw", point, bw, seed=s)
    claim = {"kind": "share", "family": "io", "across": "backend", "ratio": {"numerator": "posix",
             "denominator": "blob"}, "where": {"pattern": "mfmw"}, "at_least": 1}
    assert judged(table, claim).loc["c0"].status == "reproduced"
    fileshare = {**claim, "ratio": {"numerator": "blob", "denominator": "fileshare"}}
    assert judged(table, fileshare).loc["c0"].status == "not measured"


def test_band_of_percent_of_peak():
    point = {"pattern": "shuffle", "nodes": 1, "ranks": 2, "message_size": 131072, "window": 16, "skew": 0.0}
    claim = {"kind": "band", "family": "shuffle", "variant": "shuffle", "metric": "efficiency",
             "where": {"message_size": "128KiB"}, "low": 80, "high": 90, "unit": "%"}
    inside = rows("shuffle", "shuffle", point, 0.85, metric="efficiency")
    r = judged(inside, claim).loc["c0"]
    assert r.status == "reproduced" and "1 of 1 intervals wholly in [80, 90]%" in r.evidence and "85" in r.evidence
    below = rows("shuffle", "shuffle", point, 0.55, metric="efficiency")
    assert judged(below, claim).loc["c0"].status == "not reproduced"
    other_size = rows("shuffle", "shuffle", {**point, "message_size": 4096}, 0.85, metric="efficiency")
    assert judged(other_size, claim).loc["c0"].status == "not measured"


def test_the_published_claims_are_valid_and_name_known_studies():
    document = claims.load()
    studies = references.load()["studies"]
    assert {c["study"] for c in document["claims"]} == set(studies)
    assert all(c.get("quote") for c in document["claims"])
    kinds = {c["kind"] for c in document["claims"]}
    assert kinds == {"trend", "crossover", "share", "band"}
    empty = claims.judge(pd.DataFrame(columns=["family", "point", "variant", "warmup", "ok"]), document)
    assert set(empty["status"]) == {"not measured"} and len(empty) == len(document["claims"])


def test_a_bad_claim_is_refused_with_its_key():
    with pytest.raises(claims.ClaimsError) as error:
        doc({"kind": "crossover", "variant": "put", "axis": "nodes"})
    message = error.value.message()
    assert "invalid claims file" in message and "give `ratio`" in message and "needs `between`" in message


def test_a_claims_file_that_is_not_yaml_is_one_line_naming_it(tmp_path):
    broken = tmp_path / "claims.yaml"
    broken.write_text("claims:\n  - id: a\n   kind: [band\n")
    with pytest.raises(claims.ClaimsError) as error:
        claims.load(broken)
    assert str(broken) in error.value.message() and "is not YAML" in error.value.message()


def test_check_judges_a_studys_claims_on_a_results_folder(tmp_path, capsys):
    from movebench.cli import main

    table = []
    for i, (size, gain) in enumerate(((1024, 1.5), (4096, 1.4))):
        table += kv("put", 1e8, seed=i, value_size=size) + kv("get", 1e8 * gain, seed=i + 10, value_size=size)
    (tmp_path / "tables").mkdir()
    pd.DataFrame(table).to_parquet(tmp_path / "tables" / "kv.parquet", index=False)
    assert main(["check", str(tmp_path), "--studies", "dragon-ddict"]) == 0
    out = capsys.readouterr().out
    assert ("the claims of dragon-ddict: 1 reproduced, 0 not reproduced, 0 inconclusive, 0 not comparable, "
            "6 not measured") in out
    assert "REPRODUCED      ddict/get-frequently-above-put: above 1 in 2 of 2 cells" in out
    assert (tmp_path / "claims.csv").exists()
    assert main(["check", str(tmp_path), "--studies", "ddict"]) == 2
    assert "no such study" in capsys.readouterr().err


def test_check_with_judges_claims_on_two_campaigns_points_together(tmp_path, capsys):
    """A study whose systems ran as campaigns of their own (the cloud study's Azure VMs and Cirrus' Lustre):
    `check A --with B` judges a claim between them on both folders' points; a point in both is refused."""
    from movebench.cli import main

    folders = {}
    for name, op, gain in (("puts", "put", 1.0), ("gets", "get", 1.5)):
        table = []
        for i, size in enumerate((1024, 4096)):
            table += kv(op, 1e8 * gain, seed=i + int(gain * 10), value_size=size)
        folders[name] = tmp_path / name
        (folders[name] / "tables").mkdir(parents=True)
        pd.DataFrame(table).to_parquet(folders[name] / "tables" / "kv.parquet", index=False)
    assert main(["check", str(folders["puts"]), "--studies", "dragon-ddict"]) == 0
    assert "NOT MEASURED    ddict/get-frequently-above-put" in capsys.readouterr().out
    assert main(["check", str(folders["puts"]), "--with", str(folders["gets"]), "--studies", "dragon-ddict"]) == 0
    out = capsys.readouterr().out
    assert f"on {folders['puts']} with {folders['gets']}" in out
    assert "REPRODUCED      ddict/get-frequently-above-put: above 1 in 2 of 2 cells" in out
    assert main(["check", str(folders["puts"]), "--with", str(folders["puts"]), "--studies", "dragon-ddict"]) == 2
    err = capsys.readouterr().err
    assert "is in both" in err and "give each point in one results folder" in err
    assert main(["check", str(folders["puts"]), "--with", str(folders["gets"])]) == 2
    assert "name them with --studies" in capsys.readouterr().err


def test_per_link_reads_a_share_of_nodes_times_the_stated_link_rate():
    # "~1/3 of the hardware-limited network bandwidth": 2 nodes of 200 Gbit/s links carry 50 GB/s
    table = kv("put", 16.5e9, nodes=2, value_size=64 * 2**20)
    claim = {"kind": "band", "variant": "put", "metric": "bandwidth_Bps", "per": "link", "low": 25, "high": 42,
             "unit": "%"}
    links = claims.link_rates({"campaign": {}, "kv": {"link_rate_gbit": 200}})
    assert links == {"kv": 25e9}
    r = claims.judge(pd.DataFrame(table), doc(claim), links=links).loc[0]
    assert r.status == "reproduced" and "33" in r.evidence, r.evidence
    assert claims.judge(pd.DataFrame(table), doc(claim), links={"kv": 5e9}).loc[0, "status"] == "not reproduced"
    unstated = claims.judge(pd.DataFrame(table), doc(claim)).loc[0]
    assert unstated.status == "not measured" and "kv.link_rate_gbit" in unstated.evidence


def test_per_rank_pairs_points_at_equal_ranks_per_node_and_divides_by_ranks():
    """The thesis' cluster grows one process per node: 2 ranks on 2 nodes against 4 on 4, per rank."""
    def shuffle(ranks, nodes, aggregate, seed):
        point = {"pattern": "shuffle", "nodes": nodes, "ranks": ranks, "message_size": 131072, "window": 16,
                 "skew": 0.0}
        return rows("shuffle", "shuffle", point, aggregate, seed=seed)

    # per rank: 100 on 2 nodes, 60 on 4 (lowers); the aggregate of 4 ranks rises from 2 nodes to 4
    table = shuffle(2, 2, 200e6, 1) + shuffle(4, 2, 180e6, 2) + shuffle(4, 4, 240e6, 3)
    claim = {"kind": "trend", "family": "shuffle", "variant": "shuffle", "axis": "nodes", "sign": -1}
    aggregate = judged(table, claim).loc["c0"]
    assert aggregate.status == "not reproduced" and "ranks=4" in aggregate.evidence
    per_rank = judged(table, {**claim, "per": "rank"}).loc["c0"]
    assert per_rank.status == "reproduced", per_rank.evidence
    assert "ranks_per_node=1" in per_rank.evidence and "ranks_per_node=2" not in per_rank.evidence  # one value
    figures = claims._figures(counted(pd.DataFrame(table)), doc({**claim, "per": "rank"})["claims"][0])
    per = {(f.params["nodes"], f.params["ranks_per_node"]): f.median for f in figures}
    assert per.keys() == {(2, "1"), (2, "2"), (4, "1")}
    assert per[(2, "1")] == pytest.approx(100e6, rel=0.05) and per[(4, "1")] == pytest.approx(60e6, rel=0.05)


# --- the three-way word: never stronger than the interval (issue 39's examples) ---


def figure(median, low, high, launches=3, **params):
    return claims.Figure(params, median, low, high, "p", "n", ("p",), launches)


BAND = {"kind": "band", "ratio": {"numerator": "pickle", "denominator": "buffer"}, "low": 0.8, "high": 1.25,
        "unit": "x"}


def test_a_band_is_reproduced_only_when_the_whole_interval_lies_inside():
    claim = doc(BAND)["claims"][0]
    wide = claims._band(claim, [figure(1.0, 0.001, 1000)])  # the median in the band says nothing on its own
    assert wide[0] == "inconclusive" and "overlaps" in wide[1]
    assert claims._band(claim, [figure(1.0, 0.9, 1.1)])[0] == "reproduced"
    assert claims._band(claim, [figure(2.0, 1.6, 2.5)])[0] == "not reproduced"
    # one point outside outweighs one open: the claim holds at every point or not at all
    assert claims._band(claim, [figure(1.0, 0.5, 2), figure(2.0, 1.6, 2.5)])[0] == "not reproduced"
    near = claims._band(claim, [figure(1.0, 0.78, 1.28, launches=3)])
    assert near[0] == "inconclusive" and "about" in near[1] and "launches (now 3) would settle it" in near[1]


def test_a_slope_interval_reaching_past_linear_is_inconclusive():
    assert claims.place(0.07, 2.35, *claims._claimed_slopes(LINEAR)) == "overlaps"
    # end to end: linear medians, but launches so noisy that the slope's interval spans far beyond 0.75..1.25
    noisy = [r for n, s in ((1, 1), (2, 2)) for r in rows("kv", "put", {"operation": "put", **SERIES,
                                                                          "value_size": 4096, "nodes": n},
                                                          1e9 * n, seed=s, cv=0.3)]
    r = judged(noisy, LINEAR).loc["c0"]
    assert r.status == "inconclusive" and "reaches past the claimed [0.75, 1.25]" in r.evidence


def test_three_wide_points_give_a_slope_interval_as_wide_as_they_are():
    """1.07, 1.00, 0.94, each known to within a factor 2: the medians alone fit a tight -0.09, the points do not."""
    points = [(n, figure(m, m / 2, m * 2, nodes=n)) for n, m in ((1, 1.07), (2, 1.00), (4, 0.94))]
    slope, low, high = claims.fit_slope(points)
    assert slope == pytest.approx(-0.09, abs=0.01)
    assert low < -0.6 and high > 0.4  # the intervals' width, not the medians' near-perfect line
    tight = [(n, figure(m, m / 1.01, m * 1.01, nodes=n)) for n, m in ((1, 1.07), (2, 1.00), (4, 0.94))]
    assert claims.fit_slope(tight)[2] < 0  # the same medians known to 1%: the fall is settled
    claim = doc({"kind": "trend", "variant": "put", "axis": "nodes", "sign": -1})["claims"][0]
    assert claims._trend(claim, [f for _, f in points])[0] == "inconclusive"
    assert claims._trend(claim, [f for _, f in tight])[0] == "reproduced"


def test_a_figure_whose_interval_reaches_zero_is_reported_not_dropped():
    claim = doc(BAND)["claims"][0]
    status, evidence, n = claims._band(claim, [figure(1.0, 0.0, 3.0)])
    assert status == "inconclusive" and n == 1 and "its interval reaches 0" in evidence
    trend = doc({"kind": "trend", "variant": "put", "axis": "nodes", "sign": 1})["claims"][0]
    points = [figure(1.0, 0.9, 1.1, nodes=1), figure(2.0, 0.0, 4.0, nodes=2), figure(4.0, 3.6, 4.4, nodes=4)]
    status, evidence, n = claims._trend(trend, points)
    # the zero-reaching point weighs nothing, the other two settle the rise, and all three are listed
    assert status == "reproduced" and n == 3 and "nodes=2: 2 [0, 4] (its interval reaches 0)" in evidence
    # a ratio whose denominator's interval reaches 0 has no upper end: kept, with inf
    table = []
    for method, seconds in (("pickle", 2.0), ("buffer", 1.0)):
        table += rows("bcast", method, {"kind": "dense", "method": method, "nodes": 1, "ranks": 2, "shape": "100x100",
                                        "density": 1.0, "dtype": "float64"}, seconds, metric="elapsed_s")
    frame = pd.DataFrame(table)
    frame.loc[(frame["variant"] == "buffer") & (frame["launch"] == 0), "elapsed_s"] = 1e-300
    frame.loc[(frame["variant"] == "buffer") & (frame["launch"] == 1), "elapsed_s"] = -1.0
    r = judged(frame, {**BAND, "family": "bcast", "metric": "elapsed_s"}).loc["c0"]
    assert r.status == "inconclusive" and r.points == 1 and "inf]" in r.evidence


def test_a_share_is_not_reproduced_only_when_the_open_cells_cannot_save_it():
    claim = doc({"kind": "share", "ratio": {"numerator": "get", "denominator": "put"}, "at_least": 0.5})["claims"][0]
    above, below, open_ = figure(1.5, 1.2, 1.8), figure(0.5, 0.4, 0.6), figure(1.0, 0.5, 2.0)
    assert claims._share(claim, [above, open_])[0] == "reproduced"  # 1 of 2 settled above is half
    assert claims._share(claim, [below, open_])[0] == "inconclusive"  # the open cell could make it half
    assert claims._share(claim, [below, below, open_])[0] == "not reproduced"  # at most 1 of 3


def test_a_claim_run_on_a_stand_in_is_not_comparable_and_says_what_it_would_be():
    table = []
    for backend, bw, s in (("posix", 5e9, 1), ("blob", 5e8, 2)):
        point = {"pattern": "mfmw", "backend": backend, "nodes": 1, "ranks": 2, "size_per_proc": 2**20}
        table += rows("io", "mfmw", point, bw, seed=s)
    claim = {"kind": "share", "family": "io", "across": "backend", "ratio": {"numerator": "posix",
             "denominator": "blob"}, "where": {"pattern": "mfmw"}, "at_least": 1, "needs": ["azure-blob", "lustre"]}
    paths = {b: families.point_path({"pattern": "mfmw", "backend": b, "nodes": 1, "ranks": 2,
                                     "size_per_proc": 2**20}) for b in ("posix", "blob")}
    here = {("io", paths["posix"]): claims.ran_on({"storage.backend": "posix", "storage.filesystem": "ext4"}),
            ("io", paths["blob"]): claims.ran_on({"storage.backend": "blob",
                                                  "storage.endpoint": "http://127.0.0.1:10000/devstoreaccount1"})}
    r = claims.judge(pd.DataFrame(table), doc(claim), conditions=here).set_index("id").loc["c0"]
    assert r.status == "not comparable" and r.needs == "azure-blob, lustre"
    assert "blob on azurite" in r.evidence and "posix on ext4" in r.evidence
    assert "On these points it would be reproduced" in r.evidence
    cluster = {("io", paths["posix"]): claims.ran_on({"storage.backend": "posix", "storage.filesystem": "lustre"}),
               ("io", paths["blob"]): claims.ran_on({"storage.backend": "blob",
                                                     "storage.endpoint": "https://acct.blob.core.windows.net"})}
    assert claims.judge(pd.DataFrame(table), doc(claim), conditions=cluster).loc[0, "status"] == "reproduced"
    unknown = claims.judge(pd.DataFrame(table), doc(claim)).loc[0]
    assert unknown.status == "not comparable" and "no meta says what it ran on" in unknown.evidence


def test_a_claim_over_nodes_run_on_one_host_is_not_comparable():
    table = [r for n, s in ((1, 1), (2, 2), (4, 3)) for r in kv("put", 1e9 * n, seed=s, nodes=n)]
    paths = {n: families.point_path({"operation": "put", **SERIES, "value_size": 4096, "nodes": n})
             for n in (1, 2, 4)}
    one_host = {("kv", p): claims.ran_on({"fingerprint.hosts": '["vm"]'}) for p in paths.values()}
    spread = {("kv", p): claims.ran_on({"fingerprint.hosts": str([f"n{i}" for i in range(n)]).replace("'", '"')})
              for n, p in paths.items()}
    claim = {**LINEAR, "needs": ["host-per-node"]}
    r = claims.judge(pd.DataFrame(table), doc(claim), conditions=one_host).loc[0]
    assert r.status == "not comparable" and "4 nodes on 1 host(s)" in r.evidence
    assert claims.judge(pd.DataFrame(table), doc(claim), conditions=spread).loc[0, "status"] == "reproduced"


def test_launches_to_settle_shrinks_the_interval_as_t_over_root_l():
    need = references.launches_to_settle(3, half=0.2, distance=0.1)
    assert need is not None and need > 3
    from movebench.core import stats
    ratio = lambda n: stats.t_quantile(0.975, n - 1) / n**0.5  # noqa: E731
    assert 0.2 * ratio(need) / ratio(3) < 0.1 <= 0.2 * ratio(need - 1) / ratio(3)
    assert references.launches_to_settle(3, half=0.2, distance=0.0) is None  # the estimate on the edge
    assert references.launches_to_settle(1, half=0.2, distance=0.1) is None  # no launch-level spread to scale


def test_best_of_judges_the_best_window_per_cell_as_the_thesis_tuned_it():
    def point(window, ranks, efficiency, seed):
        p = {"pattern": "shuffle", "nodes": ranks, "ranks": ranks, "message_size": 131072, "window": window,
             "skew": 0.0}
        return rows("shuffle", "shuffle", p, efficiency, metric="efficiency", seed=seed)

    table = point(1, 2, 0.30, 1) + point(16, 2, 0.85, 2) + point(1, 4, 0.20, 3) + point(16, 4, 0.84, 4)
    claim = {"kind": "band", "family": "shuffle", "variant": "shuffle", "metric": "efficiency",
             "where": {"message_size": "128KiB"}, "low": 80, "high": 90, "unit": "%"}
    every = judged(table, claim).loc["c0"]
    assert every.status == "not reproduced" and every.points == 4  # window 1 is far below the band
    best = judged(table, {**claim, "best_of": ["window"]}).loc["c0"]
    assert best.status == "reproduced" and best.points == 2 and best.evidence.count("best=window=16 of 2") == 2


def test_a_flat_trend_needs_its_slope_interval_inside_the_flat_range():
    flat = [r for n, s in ((1, 1), (2, 2), (4, 3)) for r in kv("put", 1e9, seed=s, nodes=n)]
    claim = {"kind": "trend", "variant": "put", "axis": "nodes", "sign": 0, "slope": {"value": 0, "within": 0.1}}
    assert judged(flat, claim).loc["c0"].status == "reproduced"
    rising = [r for n, s in ((1, 1), (2, 2), (4, 3)) for r in kv("put", 1e9 * n, seed=s, nodes=n)]
    assert judged(rising, claim).loc["c0"].status == "not reproduced"
    with pytest.raises(claims.ClaimsError, match="needs `slope`"):
        doc({"kind": "trend", "variant": "put", "axis": "nodes", "sign": 0})


def test_a_series_with_one_usable_interval_fits_no_slope_and_says_why():
    trend = doc({"kind": "trend", "variant": "put", "axis": "nodes", "sign": 1})["claims"][0]
    status, evidence, n = claims._trend(trend, [figure(1.0, 0.9, 1.1, nodes=1), figure(2.0, 0.0, 4.0, nodes=2)])
    assert status == "inconclusive" and n == 2 and "no slope is fitted" in evidence
