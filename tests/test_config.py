"""Config validation: every bad input stops with one message naming key, value and what is valid."""

import subprocess

import pytest

from conftest import PYTHON, ROOT
from movebench import config as cc
from movebench.families import point_path


def base(**shuffle):
    return {"campaign": {"name": "t"}, "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], **shuffle}}


@pytest.mark.parametrize(
    "config, path, value, hint",
    [
        ({"campaign": {}, "shufle": {}}, "shufle", "{}", "unknown key 'shufle'; valid keys:"),
        (base(paterns=["uni"]), "shuffle.paterns", "[uni]", "valid keys: enabled, iterations, message_sizes"),
        (base(patterns=["unii"]), "shuffle.patterns[0]", "'unii'", "must be one of uni, bidi, alltoall, shuffle"),
        (base(ranks="2"), "shuffle.ranks", "'2'", "must be of type array"),
        (base(ranks=[]), "shuffle.ranks", "[]", "must not be empty"),
        (base(ranks=[1]), "shuffle.ranks[0]", "1", "must be >= 2"),
        (base(ranks=[3]), "shuffle.ranks[0]", "3", "use an even count such as 2, 4 or 8"),
        (base(windows=[0]), "shuffle.windows[0]", "0", "must be >= 1"),
        (base(message_sizes=["4KB", "lots"]), "shuffle.message_sizes", "[4KB, lots]", "'lots' is not a size"),
        (base(message_sizes={"from": "8KiB", "to": "1KiB"}), "shuffle.message_sizes", "{from: 8KiB, to: 1KiB",
         "range from '8KiB' to '1KiB' is empty"),
        (base(message_sizes=[]), "shuffle.message_sizes", "[]", "must be a list of sizes such as [4KiB, 1MiB]"),
        (base(iterations="many"), "shuffle.iterations", "'many'", "must be a whole number >= 1 or 'auto'"),
        (base(skew=[-1]), "shuffle.skew[0]", "-1", "must be >= 0"),
        (base(tuple_size=60), "shuffle.tuple_size", "60", "must be a multiple of 8"),
        (base(nodes=[4]), "shuffle.nodes", "4", "more nodes than the 2 ranks"),
        ({"campaign": {}, "io": {"iterations": 6}}, "io.iterations", "6", "renamed: use io.repetitions"),
        ({"campaign": {"repetitions": 0}}, "campaign.repetitions", "0", "must be >= 1"),
        ({"campaign": {"timeout": "soon"}}, "campaign.timeout", "'soon'", "must be of type number"),
        ({"campaign": {"warmup": 1}}, "campaign.warmup", "1", "unknown key 'warmup'; valid keys:"),
    ],
)
def test_bad_input_names_key_value_and_valid_values(config, path, value, hint):
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(config)
    message = err.value.message()
    line = next((ln for ln in message.splitlines() if ln.strip().startswith(path + " ")), None)
    assert line is not None, message
    assert f"{path} = {value}" in line, message
    assert hint in line, message


def test_defaults_are_filled_in():
    config = cc.validate({"campaign": {}, "shuffle": {}})
    assert config["campaign"]["repetitions"] == 5 and config["campaign"]["warmups"] == 2
    assert config["shuffle"]["patterns"] == ["uni", "bidi", "alltoall", "shuffle"]
    assert config["shuffle"]["enabled"] is True


def test_several_problems_are_reported_together():
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(base(windows=[0], skew=[-1]))
    assert "2 problems" in err.value.message()


def test_grid_expands_every_combination_and_skew_only_for_shuffle():
    config = cc.validate({"campaign": {}, "shuffle": {
        "patterns": ["uni", "shuffle"], "ranks": [2, 4], "message_sizes": {"from": "1KiB", "to": "4KiB"},
        "windows": [1, 8], "skew": [0, 1.5]}})
    points = cc.grid(config)["shuffle"]
    uni = [p for p in points if p["pattern"] == "uni"]
    shuf = [p for p in points if p["pattern"] == "shuffle"]
    assert len(uni) == 2 * 3 * 2 and len(shuf) == 2 * 3 * 2 * 2
    assert all("skew" not in p for p in uni) and {p["skew"] for p in shuf} == {0.0, 1.5}
    assert len({point_path(p) for p in points}) == len(points)


def test_point_paths_follow_the_axes():
    point = {"pattern": "bidi", "nodes": 1, "ranks": 2, "message_size": 1048576, "window": 64, "skew": 1.0}
    assert point_path(point) == "pattern~bidi/nodes~1/ranks~2/message_size~1048576/window~64/skew~1.0"


def test_nodes_beyond_some_ranks_leave_out_those_points_only():
    config = cc.validate({"campaign": {}, "shuffle": {"patterns": ["uni"], "ranks": [2, 4], "nodes": [1, 4]}})
    pairs = {(p["nodes"], p["ranks"]) for p in cc.grid(config)["shuffle"]}
    assert pairs == {(1, 2), (1, 4), (4, 4)}


def test_repetitions_and_warmups_per_family_default_to_the_campaigns():
    config = cc.validate({"campaign": {"repetitions": 7, "warmups": 1}, "shuffle": {"warmups": 3}})
    assert (config["shuffle"]["repetitions"], config["shuffle"]["warmups"]) == (7, 3)
    task = next(iter(cc.tasks(config, cc.grid(config))["shuffle"].values()))
    assert (task["repetitions"], task["warmups"]) == (7, 3)


def test_disabled_family_has_no_points():
    config = cc.validate({"campaign": {}, "shuffle": {"enabled": False}, "bcast": {"shapes": [[8, 8]]}})
    assert list(cc.grid(config)) == ["bcast"]


def test_snakemake_stops_before_any_job_with_the_message_and_no_traceback(tmp_path):
    (tmp_path / "config.yaml").write_text("campaign: {}\nshuffle: {ranks: [3], windows: [0]}\nbogus: 1\n")
    proc = subprocess.run([PYTHON, "-m", "snakemake", "-n", "--snakefile", str(ROOT / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "-c1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "shuffle.windows[0] = 0: must be >= 1" in out and "bogus = 1: unknown key 'bogus'" in out
    assert "Traceback" not in out
    assert not (tmp_path / "results").exists()
