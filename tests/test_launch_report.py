"""The report's launch figures: the per-point table's launches and between-launch share, the finding on points
whose spread is mostly between launches, and the mdc in the "Compared with" lines; old summaries still render."""

import numpy as np
import pandas as pd

from movebench import findings, report
from movebench.core.stats import launch_summary

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


def test_points_whose_spread_is_between_launches_are_named():
    found = findings._between_launches("shuffle", summary(3, 0.3))
    assert len(found) == 1 and found[0]["level"] == "info"  # the launches already carry it
    assert found[0]["text"].startswith("shuffle: 2 points: most of their spread is between launches: figures from "
                                       "one launch would mislead")
    assert findings._between_launches("shuffle", summary(3, 0.0001)) == []
    assert findings._between_launches("shuffle", summary(1, 0.3)) == []
