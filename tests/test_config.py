"""Config validation: every bad input stops with one message naming key, value and what is valid."""

import subprocess

import pytest

from conftest import PYTHON, ROOT
from movebench.engine import config as cc
from movebench.engine import plan
from movebench.families import point_path


def base(**shuffle):
    return {"campaign": {"name": "t"}, "shuffle": {"patterns": ["uni", "bidi"], "ranks": [2], **shuffle}}


@pytest.mark.parametrize(
    "config, path, value, hint",
    [
        ({"campaign": {}, "shufle": {}}, "shufle", "{}", "unknown key 'shufle'; valid keys:"),
        (base(paterns=["uni"]), "shuffle.paterns", "[uni]",
         "valid keys: enabled, env, iterations, launch_groups, launches, memory_modes, message_sizes"),
        (base(mpi_thread_levels=["many"]), "shuffle.mpi_thread_levels[0]", "'many'",
         "must be one of single, funneled, serialized, multiple"),
        (base(memory_modes=["2m"]), "shuffle.memory_modes[0]", "'2m'", "must be one of 4k, thp"),
        (base(mpi_thread_level="single"), "shuffle.mpi_thread_level", "'single'", "the key is plural"),
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
        ({"campaign": {"repetitions": 0}}, "campaign.repetitions", "0",
         "must be a count >= 1 or {min, max, ci_target, max_seconds}"),
        ({"campaign": {}, "kv": {"iterations": 0}}, "kv.iterations", "0", "must be a whole number >= 1 or 'benchit'"),
        ({"campaign": {}, "kv": {"iterations": "auto"}}, "kv.iterations", "'auto'",
         "must be a whole number >= 1 or 'benchit'"),
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
    points = plan.grid(config)["shuffle"]
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
    pairs = {(p["nodes"], p["ranks"]) for p in plan.grid(config)["shuffle"]}
    assert pairs == {(1, 2), (1, 4), (4, 4)}


def test_repetitions_and_warmups_per_family_default_to_the_campaigns():
    config = cc.validate({"campaign": {"repetitions": 7, "warmups": 1}, "shuffle": {"warmups": 3}})
    assert (config["shuffle"]["repetitions"], config["shuffle"]["warmups"]) == (7, 3)
    task = next(iter(plan.tasks(config, plan.grid(config))["shuffle"].values()))
    assert (task.repetitions, task.warmups) == (7, 3)


def test_disabled_family_has_no_points():
    config = cc.validate({"campaign": {}, "shuffle": {"enabled": False}, "bcast": {"shapes": [[8, 8]]}})
    assert list(plan.grid(config)) == ["bcast"]


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


# --- hardening: every class of bad input, several members each (issue 11) ---

NAN, INF = float("nan"), float("inf")
STREAM = {"patterns": ["uni"], "ranks": [2], "message_sizes": ["4KiB"], "windows": [4]}


def one_problem(config) -> str:
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(config, warn=lambda line: None)
    return err.value.message()


@pytest.mark.parametrize(
    "config, line",
    [
        ({"campaign": {"timeout": NAN}, "shuffle": STREAM}, "campaign.timeout = .nan: must be a finite number"),
        ({"campaign": {"memory_fraction": INF}, "shuffle": STREAM}, "campaign.memory_fraction = .inf: must be"),
        ({"campaign": {}, "shuffle": {**STREAM, "patterns": ["shuffle"], "skew": [0, NAN]}},
         "shuffle.skew[1] = .nan: must be a finite number"),
        ({"campaign": {}, "shuffle": {**STREAM, "repetition_time": INF}}, "shuffle.repetition_time = .inf"),
        ({"campaign": {}, "shuffle": {**STREAM, "message_sizes": {"from": 1, "to": 8, "factor": INF}}},
         "shuffle.message_sizes.factor = .inf"),
        ({"campaign": {}, "bcast": {"kinds": ["sparse"], "densities": [NAN]}}, "bcast.densities[0] = .nan"),
        ({"campaign": {}, "io": {"retry": {"initial_backoff_s": -INF}}}, "io.retry.initial_backoff_s = -.inf"),
        ({"campaign": {}, "kv": {"mem_frac": NAN}}, "kv.mem_frac = .nan"),
    ],
)
def test_non_finite_numbers_are_refused_with_their_key(config, line):
    assert line in one_problem(config)


@pytest.mark.parametrize(
    "config, line",
    [
        ({"campaign": {}, "shuffle": {**STREAM, "patterns": ["shuffle"], "seed": -1}}, "shuffle.seed = -1: must be >="),
        ({"campaign": {}, "bcast": {"seed": -5}}, "bcast.seed = -5: must be >= 0"),
        ({"campaign": {}, "io": {"backends": ["posix"], "block_size": 0}}, "io.block_size = 0: must be at least 1"),
        ({"campaign": {}, "io": {"backends": ["posix"], "range_size": "0B"}}, "io.range_size = '0B': must be at least"),
        ({"campaign": {}, "shuffle": {**STREAM, "message_sizes": {"from": 0, "to": "4KiB"}}},
         "range from 0 to '4KiB' is empty"),
        ({"campaign": {"name": ""}, "shuffle": STREAM}, "campaign.name = '': must not be empty"),
        ({"campaign": {"results_dir": ""}, "shuffle": STREAM}, "campaign.results_dir = '': must name a folder"),
        ({"campaign": {"results_dir": "  "}, "shuffle": STREAM}, "campaign.results_dir = '  ': must name a folder"),
        ({"campaign": {"results_dir": "/"}, "shuffle": STREAM}, "must not be the filesystem root"),
        ({"campaign": {"results_dir": "/.."}, "shuffle": STREAM}, "must not be the filesystem root"),
        ({"campaign": {"results_dir": "r{un}"}, "shuffle": STREAM}, "must not contain { or }"),
        ({"campaign": {"results_dir": " results"}, "shuffle": STREAM}, "must not start or end with spaces"),
    ],
)
def test_values_valid_to_the_schema_but_impossible_are_refused(config, line):
    assert line in one_problem(config)


def test_a_results_dir_that_is_a_file_or_under_one_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    for value in (str(tmp_path / "taken"), str(tmp_path / "taken" / "results")):
        message = one_problem({"campaign": {"results_dir": value}, "shuffle": STREAM})
        assert "campaign.results_dir" in message and "an existing file, not a folder" in message


@pytest.mark.parametrize("section", [None, [1, 2], "yes", 3])
def test_a_family_section_that_is_not_a_mapping_is_one_line(section):
    message = one_problem({"campaign": {}, "shuffle": section})
    assert "shuffle = " in message and "must be a mapping of shuffle's keys" in message
    assert "`shuffle: {}` runs it with its defaults" in message


@pytest.mark.parametrize(
    "config",
    [{"campaign": {}}, {"campaign": {}, "shuffle": {"enabled": False}},
     {"campaign": {}, "shuffle": {"enabled": False}, "bcast": {"enabled": False}}],
)
def test_a_campaign_without_points_is_refused_not_a_silent_success(config):
    message = one_problem(config)
    assert "families = none" in message and "the campaign has no point to run" in message


@pytest.mark.timeout(120)  # a hang guard: before the bound, the first two took minutes to hours
@pytest.mark.parametrize(
    "section, words",
    [
        ({"message_sizes": {"from": 1, "to": "1GiB", "factor": 1.0001}}, "gives more than 5000 sizes"),
        ({"message_sizes": {"from": 1, "to": "1TiB", "factor": 1.0000001}}, "gives more than 5000 sizes"),
        ({"message_sizes": [f"{i}KiB" for i in range(1, 51)], "windows": list(range(1, 201))},
         "shuffle points = more than 5000: patterns 1 x nodes 1 x ranks 1 x message_sizes 50 x windows 200"),
        ({"patterns": ["uni", "shuffle"], "message_sizes": [f"{i}KiB" for i in range(1, 101)],
          "windows": list(range(1, 11)), "skew": [0, 0.5, 1, 1.5, 2]},
         "windows 10 x skew 5 (some points only)"),
    ],
)
def test_a_grid_too_large_is_refused_before_it_is_built(section, words):
    assert words in one_problem({"campaign": {}, "shuffle": {**STREAM, **section}})


def test_max_points_counts_every_family_and_can_be_raised():
    config = {"campaign": {"max_points": 3}, "shuffle": {**STREAM, "message_sizes": ["1KiB", "2KiB"]},
              "bcast": {"kinds": ["dense"], "methods": ["buffer", "p2p"], "shapes": [[8, 8]]}}
    message = one_problem(config)
    assert "campaign.max_points = 3: the campaign has 4 points (bcast 2, shuffle 2)" in message
    config["campaign"]["max_points"] = 4
    assert sum(len(p) for p in plan.grid(cc.validate(config)).values()) == 4


@pytest.mark.parametrize(
    "key, values, shown",
    [
        ("ranks", [2, 2], "shuffle.ranks: 2 is given 2 times (2, 2)"),
        ("message_sizes", ["4KiB", 4096, "4 KiB"], "message_sizes: 4096 is given 3 times ('4KiB', 4096, '4 KiB')"),
        ("patterns", ["uni", "bidi", "uni"], "shuffle.patterns: 'uni' is given 2 times"),
        ("windows", [1, 8, 8], "shuffle.windows: 8 is given 2 times"),
    ],
)
def test_a_value_given_twice_is_warned_about_and_runs_once(key, values, shown):
    lines = []
    config = cc.validate({"campaign": {}, "shuffle": {**STREAM, key: values}}, warn=lines.append)
    assert any(shown in line for line in lines), lines
    points = plan.grid(config)["shuffle"]
    tasks = plan.tasks(config, plan.grid(config))["shuffle"]
    assert len(points) == len({point_path(p) for p in points}) == len(tasks) / config["shuffle"]["launches"]


def test_duplicate_shapes_run_once():
    lines = []
    config = cc.validate({"campaign": {}, "bcast": {"kinds": ["dense"], "methods": ["buffer"],
                                                    "shapes": [[8, 8], [8, 8]]}}, warn=lines.append)
    assert len(plan.grid(config)["bcast"]) == 1 and "bcast.shapes: '8x8' is given 2 times" in lines[0]


FILES = {
    "syntax": ("campaign:\n  name: x\n  results_dir: [unclosed\nshuffle: {}\n",
               "line 4, column 8: not valid YAML: expected ',' or ']', but got ':' (parsing a flow sequence "
               "that starts on line 3)"),
    "tab": ("campaign:\n  name: x\n\tresults_dir: r\n", "line 3, column 1: not valid YAML: found character '\\t'"),
    "quote": ('campaign: {name: "x}\n', "not valid YAML: found unexpected end of stream"),
    "empty": ("", "is empty: a campaign is a mapping with a `campaign:` section"),
    "comment": ("# nothing yet\n", "is empty: a campaign is a mapping"),
    "list": ("- campaign\n- shuffle\n", "the top level is a list, not a mapping"),
    "scalar": ("hello\n", "the top level is the text 'hello', not a mapping"),
    "twice": ("campaign: {}\nshuffle: {patterns: [uni]}\nshuffle: {patterns: [bidi]}\n",
              "line 3: key 'shuffle' is given twice (first on line 2); YAML would silently keep only the last one"),
    "twice-nested": ("campaign:\n  name: a\n  name: b\n", "line 3: key 'name' is given twice (first on line 2)"),
}


@pytest.mark.parametrize("name", FILES)
def test_a_file_that_is_not_a_campaign_is_one_line_naming_the_file(tmp_path, name):
    text, words = FILES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(cc.ConfigFileError) as err:
        cc.load(path)
    assert str(err.value).startswith(f"config file {path}") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_or_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(cc.ConfigFileError, match=r"config file .*nowhere.yaml not found"):
        cc.load(tmp_path / "nowhere.yaml")
    with pytest.raises(cc.ConfigFileError, match="cannot be read"):
        cc.load(tmp_path)  # a folder


@pytest.mark.parametrize("name", ["syntax", "empty", "list", "twice"])
@pytest.mark.parametrize("command", [["run", "-n"], ["plan"]])
def test_the_wrapper_prints_the_file_problem_in_one_line(tmp_path, name, command):
    text, words = FILES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    proc = subprocess.run([PYTHON, "-m", "movebench", "--configfile", str(path), *command], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"movebench: config file {path}") and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "snakemake" not in proc.stdout


def test_snakemake_refuses_a_key_given_twice_and_a_null_section_in_one_line(tmp_path):
    for name, text, words in (
        ("twice", FILES["twice"][0], FILES["twice"][1]),
        ("null", "campaign: {}\nshuffle:\n", "shuffle = None: must be a mapping of shuffle's keys"),
        ("nan", "campaign: {timeout: .nan}\nshuffle: {}\n", "campaign.timeout = .nan: must be a finite number"),
    ):
        (tmp_path / f"{name}.yaml").write_text(text)
        proc = subprocess.run([PYTHON, "-m", "snakemake", "-n", "--snakefile", str(ROOT / "Snakefile"), "--directory",
                               str(tmp_path), "--configfile", str(tmp_path / f"{name}.yaml"), "-c1"],
                              capture_output=True, text=True, timeout=120)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and words in out and "Traceback" not in out, out


def test_adaptive_repetitions_take_the_rules_defaults_and_reach_the_task():
    config = cc.validate({"campaign": {"repetitions": {"max": 20}}, "shuffle": STREAM,
                          "bcast": {"repetitions": 4}}, warn=lambda line: None)
    rule = {"min": 6, "max": 20, "ci_target": 0.05}
    assert config["campaign"]["repetitions"] == rule and config["shuffle"]["repetitions"] == rule
    assert config["bcast"]["repetitions"] == 4
    task = next(iter(plan.tasks(config, plan.grid(config))["shuffle"].values()))
    assert task.repetitions == rule


@pytest.mark.parametrize(
    "config, line",
    [
        ({"campaign": {"repetitions": {"min": 0}}, "shuffle": STREAM}, "campaign.repetitions.min = 0: must be >= 1"),
        ({"campaign": {}, "shuffle": {**STREAM, "repetitions": {"max": 10, "ci_target": 1.5}}},
         "shuffle.repetitions.ci_target = 1.5: must be < 1"),
        ({"campaign": {}, "shuffle": {**STREAM, "repetitions": {"mx": 10}}},
         "shuffle.repetitions.mx = 10: unknown key 'mx'; valid keys: ci_target, max, max_seconds, min"),
        ({"campaign": {"repetitions": "lots"}, "shuffle": STREAM},
         "campaign.repetitions = 'lots': must be a count >= 1 or {min, max, ci_target, max_seconds}"),
        ({"campaign": {}, "shuffle": {**STREAM, "repetitions": {"min": 10, "max": 8}}},
         "shuffle.repetitions = {min: 10, max: 8, ci_target: 0.05}: min 10 is above max 8: need min <= max"),
        ({"campaign": {"timeout": 60, "repetitions": {"max_seconds": 90}}, "shuffle": STREAM},
         "campaign.repetitions.max_seconds = 90: must be below campaign.timeout = 60 s, which kills the point first"),
    ],
)
def test_a_bad_adaptive_rule_is_one_line_naming_the_key(config, line):
    message = one_problem(config)
    assert line in message and len(message.splitlines()) == 2, message
