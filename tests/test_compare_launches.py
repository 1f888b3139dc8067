"""compare on campaigns measured in several launches (records with a `launch` column) and on old one-launch
results (no `launch` column): which statistic each row gets, and what the page and the summary say."""

import math

import numpy as np
import pandas as pd
import pytest

from movebench.core.verdict import compare_samples
from movebench.judging import compare

POINTS = [f"pattern~alltoall/ranks~4/size~{s}" for s in (4096, 65536, 1048576, 4194304)]


def records(launches: int, factor: dict | None = None, seed: int = 0, with_launch: bool = True,
            repetitions: int = 8) -> pd.DataFrame:
    """shuffle records of POINTS: launch spread 20%, repetition spread 3%; `factor` scales a point's times."""
    rng = np.random.default_rng(seed)
    rows = []
    for point in POINTS:
        for launch in range(launches):
            shift = rng.normal(0, 0.2)
            for rep in range(repetitions):
                t = 0.01 * (factor or {}).get(point, 1.0) * math.exp(shift + rng.normal(0, 0.03))
                row = {"family": "shuffle", "variant": "alltoall", "point": point, "rep": rep, "warmup": False,
                       "ok": True, "elapsed_s": t, "bandwidth_Bps": 1e6 / t, "bytes": 1_000_000, "iterations": 10}
                if with_launch:
                    row["launch"] = launch
                rows.append(row)
    return pd.DataFrame(rows)


def results(frame) -> compare.Results:
    return compare.Results(path=compare.Path("."), records=frame)


def _row(frame, point, measure="elapsed_s"):
    return frame[(frame["point"] == point) & (frame["measure"] == measure)].iloc[0]


def test_launch_columns_are_in_the_frame():
    frame = compare.compare(results(records(3, seed=1)), results(records(3, seed=2)))
    for column in ("launches_base", "launches_new", "unit", "mdc", "mdc_double"):
        assert column in frame.columns
    assert list(frame.columns) == list(compare.COLUMNS)


def test_launches_are_compared_at_the_launch_level():
    slow = {POINTS[0]: 3.0}
    frame = compare.compare(results(records(3, seed=1)), results(records(3, slow, seed=2)))
    assert set(frame["unit"]) == {"launches"}
    assert (frame["launches_base"] == 3).all() and (frame["launches_new"] == 3).all()
    assert (frame["mdc"] > 0).all() and (frame["mdc_double"] < frame["mdc"]).all()
    assert _row(frame, POINTS[0]).verdict == "regressed"
    # the other points did not change: no launch-to-launch noise is called a change
    assert not frame[frame["point"] != POINTS[0]]["verdict"].isin(["regressed", "improved"]).any()
    text = compare.resolution(_row(frame, POINTS[1]).to_dict())
    assert text.startswith("resolves changes of >= ") and "with 3 launches; 6 launches would resolve" in text
    lines = compare.summary_lines(frame)
    assert any(line.startswith("shuffle elapsed_s: resolves changes of >= ") for line in lines)


def test_records_without_a_launch_column_compare_as_today():
    base_frame, new_frame = records(1, seed=1, with_launch=False), records(1, {POINTS[0]: 1.5}, seed=2,
                                                                            with_launch=False)
    frame = compare.compare(results(base_frame), results(new_frame))
    assert set(frame["unit"]) == {"repetitions"} and frame["mdc"].isna().all()
    assert (frame["launches_base"] == 1).all()
    row = _row(frame, POINTS[0])
    today = compare_samples(base_frame[base_frame["point"] == POINTS[0]]["elapsed_s"],
                            new_frame[new_frame["point"] == POINTS[0]]["elapsed_s"])
    assert (row.ratio, row.ci_low, row.ci_high, row.p_value) == (today.ratio, today.ci_low, today.ci_high,
                                                                 today.p_value)
    assert row.verdict == "regressed"
    assert compare.resolution(row.to_dict()) == compare.ONE_LAUNCH
    assert any(compare.ONE_LAUNCH in line for line in compare.summary_lines(frame))


def test_nan_launch_is_launch_0_and_an_old_base_compares_on_repetitions():
    new_frame = records(3, seed=2)
    new_frame.loc[new_frame["launch"] == 0, "launch"] = np.nan
    frame = compare.compare(results(records(1, seed=1, with_launch=False)), results(new_frame))
    assert (frame["launches_new"] == 3).all() and set(frame["unit"]) == {"repetitions"}


def test_the_page_shows_launches_and_resolution():
    frame = compare.compare(results(records(3, seed=1)), results(records(3, seed=2)))
    page = compare.render_html(frame, "a", "b")
    assert "resolves changes of &gt;= " in page and "3 / 3" in page
    old = compare.compare(results(records(1, seed=1, with_launch=False)), results(records(1, seed=2)))
    assert compare.ONE_LAUNCH in compare.render_html(old, "a", "b")


@pytest.mark.parametrize("with_launch", [True, False])
def test_results_folders_with_and_without_launch_load_and_compare(tmp_path, with_launch):
    for name, seed in (("a", 1), ("b", 2)):
        (tmp_path / name / "tables").mkdir(parents=True)
        frame = records(3 if with_launch else 1, seed=seed, with_launch=with_launch).drop(columns="family")
        frame.to_parquet(tmp_path / name / "tables" / "shuffle.parquet", index=False)
    frame = compare.compare(tmp_path / "a", tmp_path / "b")
    assert len(frame) == 2 * len(POINTS)
    assert set(frame["unit"]) == {"launches" if with_launch else "repetitions"}


def test_noise_from_runs_with_launches_adds_their_run_variance_not_thresholds(tmp_path, capsys):
    from movebench.cli import main

    rng = np.random.default_rng(40)

    def run(seed):  # each run moves every point by its own 25% effect, beyond its launches
        return records(3, {p: math.exp(rng.normal(0, 0.25)) for p in POINTS}, seed=seed)

    folders = []
    for k in range(4):
        folder = tmp_path / f"a{k}"
        (folder / "tables").mkdir(parents=True)
        run(k).to_parquet(folder / "tables" / "shuffle.parquet", index=False)
        folders.append(folder)
    noise = compare.noise_from(folders[2:])
    assert noise.thresholds == {}  # launch-level rows: no threshold raised
    spread = noise.run_variance["shuffle.elapsed_s"]
    assert (spread.points, spread.runs, spread.df) == (len(POINTS), 2, len(POINTS)) and spread.sd > 0
    plain = compare.compare(folders[0], folders[1])
    judged = compare.compare(folders[0], folders[1], run_variance=noise.run_variance)
    assert (judged["mdc"] > plain["mdc"]).all()  # the run effect is noise the launches cannot average away
    assert main(["compare", str(folders[0]), str(folders[1]), "--noise-from", *map(str, folders[2:]),
                 "--out", str(tmp_path / "out")]) in (0, 1)
    printed = capsys.readouterr().out
    assert "run-to-run spread from the 2 runs" in printed and "shuffle.elapsed_s: " in printed
    assert "thresholds from the A/A pairs" not in printed


def test_between_stacks_judges_each_stack_against_the_first_on_everything_else():
    default = records(3, seed=1).assign(stack="default")
    other = records(3, {POINTS[0]: 3.0}, seed=2).assign(stack="openmpi")
    other["point"] = other["point"] + "/stack~openmpi"
    mpich, ompi = {"mpi_library": "MPICH Version: 5.0.2", "cpu_model": "EPYC"}, {"mpi_library": "Open MPI v5.0.8",
                                                                               "cpu_model": "EPYC"}
    metas = {("shuffle", p): mpich for p in POINTS} | {("shuffle", p + "/stack~openmpi"): ompi for p in POINTS}
    both = compare.Results(path=compare.Path("."), records=pd.concat([other, default]), metas=metas)
    ((family, base, new, frame),) = compare.between_stacks(both)
    assert (family, base, new) == ("shuffle", "default", "openmpi")
    assert set(frame["point"]) == set(POINTS) and set(frame["unit"]) == {"launches"}
    assert _row(frame, POINTS[0]).verdict == "regressed"  # 3x slower on openmpi
    assert not frame[frame["point"] != POINTS[0]]["verdict"].isin(["regressed", "improved", "not comparable"]).any()
    assert "mpi_library" in _row(frame, POINTS[1]).differs  # named, and judged all the same
    assert compare.between_stacks(compare.Results(path=compare.Path("."), records=default)) == []
    # a failed point belongs to its own stack's side
    both.failed = {("shuffle", POINTS[2] + "/stack~openmpi")}
    ((_, _, _, frame),) = compare.between_stacks(both)
    assert "failed in new" in _row(frame, POINTS[2]).note and "failed" not in _row(frame, POINTS[1]).note
    # the campaign's order picks the reference stack
    ((_, base, new, _),) = compare.between_stacks(both, order={"shuffle": ["openmpi", "default"]})
    assert (base, new) == ("openmpi", "default")
