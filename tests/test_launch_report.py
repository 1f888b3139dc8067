"""The report's launch figures: the per-point table's launches and between-launch share, the finding on points
whose spread is mostly between launches, and the mdc in the "Compared with" lines; old summaries still render."""

import numpy as np
import pandas as pd

from movebench.core.stats import launch_summary
from movebench.judging import findings, report

POINTS = ["pattern~alltoall/ranks~4/size~4096", "pattern~alltoall/ranks~4/size~65536"]


def summary(launches: int, spread: float) -> pd.DataFrame:
    rng = np.random.default_rng(launches)
    rows = []
    for point in POINTS:
        for measure, scale in (("elapsed_s", 0.01), ("bandwidth_Bps", 1e8)):
            values = [(scale * np.exp(rng.normal(0, spread) + rng.normal(0, 0.02, 6))).tolist()
                      for _ in range(launches)]
            rows.append({"family": "shuffle", "variant": "alltoall", "point": point, "pattern": "alltoall",
                         "ranks": 4, "message_size": 4096, "measure": measure, **launch_summary(values)})
    return pd.DataFrame(rows)


def _section(frame):
    return {"summary": frame, "failed": [], "missing": [], "limited": []}


def test_the_per_point_table_says_how_many_launches_and_how_much_between():
    table = report.summary_table("shuffle", _section(summary(3, 0.3)))
    columns = table["columns"]
    assert "launches" in columns and "time between launches" in columns and "bandwidth between launches" in columns
    row = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert row["launches"] == "3" and row["time between launches"].endswith("%")
    # where a rerun lands: around the CI, wider (the CI is for the mean, a rerun brings its own launches)
    ci = [float(v) for v in row["bandwidth 95% CI"].split(" – ")]
    rerun = [float(v) for v in row["bandwidth a rerun lands in"].split(" – ")]
    assert rerun[0] < ci[0] < ci[1] < rerun[1]


def test_an_old_summary_says_one_launch():
    old = summary(1, 0.3).drop(columns=["launches", "ci_level", "between_share", "sd_between_log", "sd_within_log"])
    table = report.summary_table("shuffle", _section(old))
    row = dict(zip(table["columns"], table["rows"][0]["cells"], strict=True))
    assert row["launches"] == "1" and row["time between launches"] == "one launch"
    assert row["time a rerun lands in"] == "one launch"


def with_mdc(frame: pd.DataFrame, mdc: float) -> pd.DataFrame:
    return frame.assign(mdc=mdc)


def test_one_precision_line_says_what_each_family_resolves_and_the_between_launch_spread_once():
    sections = {"shuffle": _section(with_mdc(summary(3, 0.3), 0.12)),
                "io": _section(with_mdc(summary(3, 0.0001), 0.4))}
    found = findings._precision(findings.precision(sections))
    assert len(found) == 1  # one line for the campaign, not one per family
    text = found[0]["text"]
    assert "shuffle 12%" in text and "io 40%" in text and "with 3 launches a point" in text
    assert "In 2 of 4 points most of the spread lies between launches" in text
    assert findings._precision(findings.precision({"shuffle": _section(summary(1, 0.3))})) == []


def test_points_above_the_mdc_target_are_counted_with_why():
    frame = with_mdc(summary(4, 0.3), 0.5)
    points = pd.DataFrame({"point": POINTS, "launches.mdc_target": [0.15, 0.15], "launches.max": [4, 4]})
    frame.loc[frame["point"] == POINTS[1], "launches_left_out"] = 1
    section = {**_section(frame), "points_table": points}
    text = findings._precision(findings.precision({"shuffle": section}))[0]["text"]
    assert ("shuffle 50% (2 of 2 points above the 15% target: 1 between-launch spread (all 4 launches ran: the "
            "budget), 1 disturbed launches left out)") in text


def test_the_host_load_line_says_quiet_or_what_was_disturbed():
    def section(disturbed, other, retries):
        table = pd.DataFrame({"source": [f"raw/{i}.jsonl" for i in range(4)], "point": POINTS * 2,
                              "launch": [0, 0, 1, 1], "disturbed": disturbed, "other_cpus": other,
                              "disturbed_retries": retries})
        return {**_section(summary(2, 0.1)), "table": table}

    quiet = findings._host_load(findings.host_load({"shuffle": section([False] * 4, [0.01, 0.02, 0.03, 0.05],
                                                                       [0] * 4)}))
    assert quiet[0]["text"].startswith("The host was quiet: other processes kept a median 0.03 CPUs busy while a "
                                       "launch measured (at most 0.05); none of 4 point-launches was disturbed")
    busy = findings.host_load({"shuffle": section([True, False, False, False], [0.6, 0.02, 0.3, 0.01],
                                                  [1, 0, 1, 0])})
    line = findings._host_load(busy)[0]
    assert line["level"] == "warn" and busy["disturbed"] == 1 and busy["retried"] == 2
    assert "2 of 4 point-launches were measured beside outside load and measured again; 1 stayed disturbed" in \
        line["text"]
    assert findings.host_load({"shuffle": _section(summary(2, 0.1))}) is None  # results from before launches' load
    moment = findings._host_load(findings.host_load({"shuffle": section([False] * 4, [0.01, 0.02, 0.03, 0.05],
                                                                        [1, 0, 0, 0])}))[0]
    assert moment["level"] == "info" and moment["text"].startswith(
        "The host was quiet but for moments: 1 of 4 point-launches met outside load and were measured again, quiet "
        "the second time")


