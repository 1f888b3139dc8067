"""Config surprises (issue "Hardening, round two"): inputs YAML or Snakemake take one way and movebench took
another, or let through to fail later. Each class is tried with several members, on both entry points where
the file is read (`python -m movebench` and plain snakemake)."""

import subprocess

import pytest

from conftest import PYTHON, ROOT
from movebench.engine import config as cc

STREAM = "{patterns: [uni], ranks: [2], message_sizes: [4KiB], windows: [4]}"


def snakemake_dry_run(tmp_path, text, name="config.yaml"):
    (tmp_path / name).write_text(text)
    proc = subprocess.run([PYTHON, "-m", "snakemake", "-n", "--snakefile", str(ROOT / "Snakefile"), "--directory",
                           str(tmp_path), "--configfile", str(tmp_path / name), "-c1"],
                          capture_output=True, text=True, timeout=120)
    return proc, proc.stdout + proc.stderr


def movebench(*args, cwd=ROOT):
    proc = subprocess.run([PYTHON, "-m", "movebench", *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=cwd)
    return proc, proc.stdout + proc.stderr


def loaded(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return cc.load(path)


def refused(tmp_path, text) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(cc.ConfigFileError) as err:
        cc.load(path)
    message = str(err.value)
    assert message.startswith(f"config file {path}") and "\n" not in message
    return message


# --- 1. YAML merge keys are YAML's and Snakemake's: accepted, and an explicit key overrides a merged one ---

MERGES = {
    "block": ("campaign: {}\nshuffle:\n  repetitions: &reps\n    min: 6\n    max: 20\n  windows: [4]\n"
              "bcast:\n  repetitions:\n    <<: *reps\n    max: 30\n",
              {"bcast": {"repetitions": {"min": 6, "max": 30}}}),
    "flow": ("campaign: {}\nshuffle: {repetitions: &reps {min: 6, max: 20}, windows: [4]}\n"
             "bcast: {repetitions: {<<: *reps}}\n",
             {"bcast": {"repetitions": {"min": 6, "max": 20}}}),
    "list": ("campaign: {}\nshuffle:\n  repetitions: &a {min: 6, max: 20}\n"
             "bcast:\n  repetitions: &b {ci_target: 0.1}\n"
             "kv:\n  repetitions: {<<: [*a, *b], max: 30}\n",
             # which of two merged mappings wins a key both have is PyYAML's (and so Snakemake's) to say
             {"kv": {"repetitions": {"min": 6, "max": 30, "ci_target": 0.1}}}),
    "chained": ("campaign: {}\nshuffle:\n  repetitions: &a {min: 6, max: 20}\n"
                "bcast:\n  repetitions: &b {<<: *a, max: 30}\n"
                "kv:\n  repetitions: {<<: *b, max: 40}\n",
                {"bcast": {"repetitions": {"min": 6, "max": 30}}, "kv": {"repetitions": {"min": 6, "max": 40}}}),
}


@pytest.mark.parametrize("name", MERGES)
def test_merge_keys_are_accepted_and_an_explicit_key_overrides_a_merged_one(tmp_path, name):
    text, expected = MERGES[name]
    data = loaded(tmp_path, text)
    for family, section in expected.items():
        for key, value in section.items():
            assert data[family][key] == value, data
    cc.validate(data, warn=lambda line: None)


@pytest.mark.parametrize(
    "text, words",
    [
        ("campaign: {}\nshuffle:\n  repetitions: &a {min: 6, max: 20}\nbcast:\n  repetitions:\n    <<: *a\n"
         "    max: 30\n    max: 40\n", "line 8: key 'max' is given twice (first on line 7)"),
        ("campaign: {}\nshuffle:\n  repetitions: &a {min: 6, max: 20}\nbcast:\n  repetitions: {<<: *a, max: 30, "
         "max: 40}\n", "line 5, column 34: key 'max' is given twice (first at column 25 of the same line)"),
        ("campaign: &c {name: a}\nshuffle:\n  <<: *c\n  windows: [4]\n  windows: [8]\n",
         "line 5: key 'windows' is given twice (first on line 4)"),
    ],
)
def test_two_explicit_keys_beside_a_merge_are_still_given_twice(tmp_path, text, words):
    assert words in refused(tmp_path, text)


def test_a_merge_of_something_not_a_mapping_is_one_line(tmp_path):
    message = refused(tmp_path, "campaign: {}\nshuffle:\n  windows: &w [4]\nbcast:\n  <<: *w\n")
    assert "not valid YAML: expected a mapping for merging, but found scalar" in message


def test_both_entry_points_take_a_merge_key(tmp_path):
    text = f"campaign: {{}}\nshuffle: &s {STREAM}\nbcast:\n  <<: *s\n  enabled: false\n"
    # bcast has none of shuffle's keys: the merged keys count as given and are checked like written ones
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode != 0 and "bcast.message_sizes = [4KiB]: unknown key 'message_sizes'" in out, out
    assert "not valid YAML" not in out and "Traceback" not in out
    text = f"campaign: {{}}\nshuffle: &s {STREAM}\nkv:\n  repetitions: &r {{min: 6, max: 9}}\n" \
           "bcast:\n  repetitions: {<<: *r, max: 12}\n  enabled: false\n"
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode == 0 and "shuffle_point" in out, out
    proc, out = movebench("--configfile", tmp_path / "config.yaml", "plan", "--profile", "local")
    assert proc.returncode == 0 and "Traceback" not in out, out


# --- 2. a key repeated inside one flow mapping on one line: refused with line and column ---

@pytest.mark.parametrize(
    "text, words",
    [
        ("campaign: {}\nshuffle: {ranks: [2], message_sizes: [4KiB], ranks: [4]}\n",
         "line 2, column 46: key 'ranks' is given twice (first at column 11 of the same line)"),
        ("campaign: {name: a, name: b}\nshuffle: {}\n",
         "line 1, column 21: key 'name' is given twice (first at column 12 of the same line)"),
        ("{campaign: {}, shuffle: {}, campaign: {name: x}}\n",
         "line 1, column 29: key 'campaign' is given twice (first at column 2 of the same line)"),
        ("campaign: {}\nshuffle:\n  repetitions: {min: 6, max: 9, min: 7}\n",
         "line 3, column 33: key 'min' is given twice (first at column 17 of the same line)"),
        ("campaign: {}\nshuffle: {ranks: [2],\n  windows: [4], ranks: [4]}\n",
         "line 3: key 'ranks' is given twice (first on line 2)"),
    ],
)
def test_a_key_given_twice_on_one_line_is_refused_with_its_column(tmp_path, text, words):
    message = refused(tmp_path, text)
    assert words in message and "YAML would silently keep only the last one" in message, message


def test_both_entry_points_refuse_a_key_given_twice_on_one_line(tmp_path):
    text = "campaign: {}\nshuffle: {ranks: [2], message_sizes: [4KiB], ranks: [4]}\n"
    words = "line 2, column 46: key 'ranks' is given twice (first at column 11 of the same line)"
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out
    for command in (["run", "-n"], ["plan"]):
        proc, out = movebench("--configfile", tmp_path / "config.yaml", *command)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1 and words in lines[0], out


# --- 3. a look-alike letter that is not ASCII: the line says which character, and the key it resembles ---

def validated(config) -> str:
    with pytest.raises(cc.ConfigError) as err:
        cc.validate(config, warn=lambda line: None)
    return err.value.message()


@pytest.mark.parametrize(
    "config, words",
    [
        ({"campaign": {}, "shuffle": {"message_siz\u0435s": ["4KiB"]}},
         "unknown key 'message_siz\u0435s' (character 12 is U+0435 CYRILLIC SMALL LETTER IE, not ASCII; "
         "did you mean message_sizes?); valid keys: "),
        ({"campaign": {}, "shuffl\u0435": {}},
         "shuffl\u0435 = {}: unknown key 'shuffl\u0435' (character 7 is U+0435 CYRILLIC SMALL LETTER IE, not ASCII; "
         "did you mean shuffle?)"),
        ({"campaign": {"results_dir\u00a0": "r"}, "shuffle": {}},
         "(character 12 is U+00A0 NO-BREAK SPACE, not ASCII; did you mean results_dir?)"),
        ({"campaign": {"n\u0430me": "x"}, "shuffle": {}},
         "(character 2 is U+0430 CYRILLIC SMALL LETTER A, not ASCII; did you mean name?)"),
        ({"campaign": {}, "kv": {"w\u200bindows": 1}}, "(character 2 is U+200B ZERO WIDTH SPACE, not ASCII)"),
    ],
)
def test_an_unknown_key_with_a_letter_that_is_not_ascii_names_the_letter(config, words):
    assert words in validated(config)


@pytest.mark.parametrize(
    "config, words",
    [
        ({"campaign": {}, "shuffle": {"patterns": ["un\u0456"]}},
         "shuffle.patterns[0] = 'un\u0456': must be one of uni, bidi, alltoall, shuffle (character 3 is U+0456 "
         "CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I, not ASCII; did you mean uni?)"),
        ({"campaign": {}, "bcast": {"kinds": ["d\u0435ns\u0435"]}},
         "character 2 is U+0435 CYRILLIC SMALL LETTER IE, character 5 is U+0435 CYRILLIC SMALL LETTER IE, not ASCII; "
         "did you mean dense?"),
        ({"campaign": {}, "io": {"backends": ["p\u043esix"]}},
         "(character 2 is U+043E CYRILLIC SMALL LETTER O, not ASCII; did you mean posix?)"),
        ({"campaign": {}, "shuffle": {"mpi_thread_levels": ["singl\u0435"]}}, "did you mean single?"),
    ],
)
def test_an_enum_value_with_a_letter_that_is_not_ascii_names_the_letter(config, words):
    assert words in validated(config)


def test_ascii_mistakes_keep_their_line():
    message = validated({"campaign": {}, "shuffle": {"mesage_sizes": ["4KiB"], "patterns": ["unii"]}})
    assert "unknown key 'mesage_sizes'; valid keys:" in message and "not ASCII" not in message
    assert "shuffle.patterns[0] = 'unii': must be one of uni, bidi, alltoall, shuffle\n" in message + "\n"


def test_both_entry_points_name_a_letter_that_is_not_ascii(tmp_path):
    text = "campaign: {}\nshuffle: {patterns: [uni], message_siz\u0435s: [4KiB]}\n"
    words = "(character 12 is U+0435 CYRILLIC SMALL LETTER IE, not ASCII; did you mean message_sizes?)"
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out
    proc, out = movebench("--configfile", tmp_path / "config.yaml", "plan")
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out


# --- 4. an absurd size is refused at validation, with the largest valid size ---

LARGEST = "is more than the largest size, 1PiB (1125899906842624 bytes)"


@pytest.mark.parametrize(
    "config, words",
    [
        ({"campaign": {}, "shuffle": {"message_sizes": [10**23]}},
         f"shuffle.message_sizes = [100000000000000000000000]: 100000000000000000000000 {LARGEST}"),
        ({"campaign": {}, "shuffle": {"message_sizes": [1e23]}}, f"shuffle.message_sizes = [1.0e+23]: 1e+23 {LARGEST}"),
        ({"campaign": {}, "shuffle": {"message_sizes": ["4KiB", "2PiB"]}},
         f"shuffle.message_sizes = [4KiB, 2PiB]: '2PiB' {LARGEST}"),
        ({"campaign": {}, "shuffle": {"message_sizes": {"from": 1, "to": "1025TiB"}}}, f"'1025TiB' {LARGEST}"),
        ({"campaign": {}, "kv": {"value_sizes": ["100000000000000000000000"]}}, "kv.value_sizes = "),
        ({"campaign": {}, "kv": {"total_mem": "100000000TB"}},
         f"kv.total_mem = '100000000TB': '100000000TB' {LARGEST}"),
        ({"campaign": {}, "io": {"backends": ["posix"], "size_per_proc": [2**60]}}, f"1152921504606846976 {LARGEST}"),
        ({"campaign": {}, "io": {"backends": ["posix"], "posix": {"transfer_size": "2 PiB"}}},
         f"io.posix.transfer_size = '2 PiB': '2 PiB' {LARGEST}"),
        ({"campaign": {}, "calibration": {"memcpy_sizes": [10**16]}}, "calibration.memcpy_sizes = [10000000000000000]"),
    ],
)
def test_an_absurd_size_is_refused_at_validation_with_the_largest_valid_size(config, words):
    message = validated(config)
    assert words in message and LARGEST in message, message
    assert "GiB" not in message  # not the admission's plan in GiB


def test_the_largest_size_itself_is_valid():
    config = cc.validate({"campaign": {}, "shuffle": {"message_sizes": ["1PiB", 1024**5, "1024TiB"]}},
                         warn=lambda line: None)
    assert config["shuffle"]["message_sizes"] == ["1PiB", 1024**5, "1024TiB"]


def test_both_entry_points_refuse_an_absurd_size(tmp_path):
    text = "campaign: {}\nshuffle: {patterns: [uni], message_sizes: [100000000000000000000000]}\n"
    words = f"shuffle.message_sizes = [100000000000000000000000]: 100000000000000000000000 {LARGEST}"
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out
    proc, out = movebench("--configfile", tmp_path / "config.yaml", "plan")
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out


# --- 5. a results_dir no file can be made in: refused before anything starts, dry run included ---

def mounted(folder, options):
    """A tmpfs at folder with options, unmounted by the caller; skips the test where mounting is not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        # the tests run as root, for whom no permission bit makes a folder unwritable: only a mount does
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}); needs root")


def unmount(folder):
    subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.fixture
def read_only(tmp_path):
    folder = tmp_path / "ro"
    mounted(folder, "ro,size=1m")
    try:
        yield folder
    finally:
        unmount(folder)


@pytest.mark.parametrize(
    "under, words",
    [
        ("", "cannot be written: it is on a read-only filesystem; name a folder this user can write"),
        ("results", "cannot be written: {ro}, the nearest folder of it that exists, is on a read-only filesystem"),
        ("a/b/results", "cannot be written: {ro}, the nearest folder of it that exists, is on a read-only filesystem"),
    ],
)
def test_a_results_dir_on_a_read_only_filesystem_is_refused(read_only, under, words):
    value = str(read_only / under) if under else str(read_only)
    message = validated({"campaign": {"results_dir": value}, "shuffle": {}})
    assert f"campaign.results_dir = '{value}': " + words.format(ro=read_only) in message, message


def test_a_results_dir_on_a_full_filesystem_is_refused(tmp_path):
    folder = tmp_path / "full"
    mounted(folder, "size=1m,nr_inodes=1")  # the root folder takes the only inode: no file can be made
    try:
        message = validated({"campaign": {"results_dir": str(folder / "results")}, "shuffle": {}})
        assert "the nearest folder of it that exists, is on a full filesystem" in message, message
    finally:
        unmount(folder)


def test_a_results_dir_this_user_cannot_write_is_refused(tmp_path, monkeypatch):
    import errno
    import tempfile

    def refuse(**kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    message = validated({"campaign": {"results_dir": str(tmp_path / "results")}, "shuffle": {}})
    assert f"{tmp_path}, the nearest folder of it that exists, is not writable by this user" in message, message


def test_a_writable_results_dir_is_left_as_it_was(tmp_path):
    for value in (str(tmp_path), str(tmp_path / "new" / "results")):
        cc.validate({"campaign": {"results_dir": value}, "shuffle": {}}, warn=lambda line: None)
    assert list(tmp_path.iterdir()) == []  # the check's file is gone, and nothing was made


@pytest.mark.timeout(300)
def test_every_entry_point_refuses_a_read_only_results_dir_before_anything_starts(read_only, tmp_path):
    text = f"campaign: {{results_dir: {read_only}/results}}\nshuffle: {STREAM}\n"
    words = f"campaign.results_dir = '{read_only}/results': cannot be written: {read_only}, the nearest folder"
    proc, out = snakemake_dry_run(tmp_path, text)
    assert proc.returncode != 0 and words in out and "Traceback" not in out, out
    for command in (["plan"], ["plan", "--profile", "local"], ["run", "-n"], ["run", "--cores", "1"]):
        proc, out = movebench("--configfile", tmp_path / "config.yaml", *command)
        assert proc.returncode != 0 and words in out and "Traceback" not in out, (command, out)
        assert "shuffle_point" not in out, (command, out)
