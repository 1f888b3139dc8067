"""`make plan` prices the campaign's wall time from an earlier run's launches: a round per family, times the
launches a point always runs and at most runs, and the budget of disturbed launches measured again."""

import json

from movebench.cli import wall_time_budget
from movebench.core.layout import ResultsLayout


def meta(raw, family, path, launch, start, wall, group=None, skipped=None):
    file = raw / family / f"{path}.meta.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    body = {"launch": launch, "launch_start": start, "launch_wall_s": wall}
    if group:
        body["launch_group"] = {"name": group, "size": 2}
    if skipped:
        body = {"launch": launch, "skipped": skipped}
    file.write_text(json.dumps(body))


def test_the_plan_prices_min_and_max_launches_from_the_last_run(tmp_path):
    raw = tmp_path / "results" / "raw"
    # shuffle: a launch group of two points (one wall, counted once) per round; io: two points alone
    for k in range(3):
        suffix = "" if k == 0 else f"/launch~{k}"
        meta(raw, "shuffle", f"a{suffix}", k, 100.0 + k, 20.0, group="g")
        meta(raw, "shuffle", f"b{suffix}", k, 100.0 + k, 20.0, group="g")
        meta(raw, "io", f"x{suffix}", k, 200.0 + k, 4.0)
        meta(raw, "io", f"y{suffix}", k, 300.0 + k, 6.0)
    meta(raw, "io", "x/launch~3", 3, None, None, skipped="launches.mdc_target 0.15 reached")
    config = {"campaign": {"disturbed": {"retry_budget_s": 60}},
              "shuffle": {"launches": {"min": 3, "max": 4, "mdc_target": 0.15}}, "io": {"launches": 3},
              "kv": {"launches": 3}}
    line = wall_time_budget(config, ResultsLayout(raw.parent))
    assert "shuffle 20 s x 3-4" in line and "io 10 s x 3" in line
    assert "90-110 s of launches" in line  # 20 x 3 + 10 x 3 .. 20 x 4 + 10 x 3
    assert "up to 60 s of disturbed launches" in line and "not priced (no earlier launch): kv" in line


def test_without_an_earlier_run_the_plan_says_how_to_price_it(tmp_path):
    line = wall_time_budget({"campaign": {}, "io": {"launches": 3}}, ResultsLayout(tmp_path / "results"))
    assert line.startswith("wall time: no earlier run in") and "up to 120 s" in line
