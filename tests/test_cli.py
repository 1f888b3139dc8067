"""`python -m movebench` as typed: where --configfile may go, $MOVEBENCH_CONFIG, --version, the profiles in --help."""

import os
import subprocess
import tomllib

import pytest
import yaml

from conftest import PYTHON, ROOT


def movebench(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "movebench", *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, **(env or {})})


def campaign_file(folder, name: str):
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"campaign": {"name": name, "results_dir": str(folder / name), "launches": 1},
                                    "bcast": {"kinds": ["dense"], "methods": ["buffer"], "shapes": [[8, 8]]}}))
    return path


def planned_campaign(proc) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = proc.stdout.splitlines()[0]
    assert first.startswith("movebench plan: campaign "), first
    return first.split("'")[1]


def test_configfile_before_or_after_the_subcommand_names_the_same_campaign(tmp_path):
    mine = campaign_file(tmp_path, "mine")
    before = movebench("--configfile", mine, "plan", "--profile", "local", cwd=tmp_path)
    after = movebench("plan", "--configfile", mine, "--profile", "local", cwd=tmp_path)
    assert planned_campaign(before) == planned_campaign(after) == "mine"
    assert after.stdout == before.stdout
    equals = movebench("plan", "--profile", "local", f"--configfile={mine}", cwd=tmp_path)
    assert planned_campaign(equals) == "mine"


def test_movebench_config_names_the_campaign_and_a_configfile_given_wins(tmp_path):
    env = {"MOVEBENCH_CONFIG": str(campaign_file(tmp_path, "from-env"))}
    other = campaign_file(tmp_path, "given")
    assert planned_campaign(movebench("plan", "--profile", "local", env=env, cwd=tmp_path)) == "from-env"
    assert planned_campaign(movebench("plan", "--configfile", other, "--profile", "local", env=env,
                                      cwd=tmp_path)) == "given"
    assert planned_campaign(movebench("--configfile", other, "plan", "--profile", "local", env=env,
                                      cwd=tmp_path)) == "given"
    # one given after the subcommand wins over one before it, as the later of two options does
    first = campaign_file(tmp_path, "first")
    assert planned_campaign(movebench("--configfile", first, "plan", "--configfile", other, "--profile", "local",
                                      cwd=tmp_path)) == "given"


def test_efficiency_takes_the_configfile_after_the_subcommand(tmp_path):
    mine = campaign_file(tmp_path, "mine")
    proc = movebench("efficiency", "--configfile", mine, cwd=tmp_path)
    assert proc.returncode == 1 and f"no finished run in {tmp_path / 'mine'}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["run", "plan", "efficiency", "compare", "check"])
def test_every_subcommand_lists_configfile_and_movebench_config_in_its_help(command):
    proc = movebench(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--configfile CONFIGFILE" in proc.stdout and "$MOVEBENCH_CONFIG" in proc.stdout


def test_the_top_help_says_what_movebench_config_does():
    proc = movebench("--help")
    assert proc.returncode == 0
    assert "MOVEBENCH_CONFIG=path/to/campaign.yaml names the campaign" in " ".join(proc.stdout.split())


def test_version_is_the_packages():
    proc = movebench("--version")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert proc.returncode == 0 and proc.stdout == f"movebench {version}\n", proc.stdout + proc.stderr


def test_run_help_lists_every_profile_with_what_it_is_for():
    proc = movebench("run", "--help")
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0]: " ".join(line.split()[1:]) for line in
              proc.stdout.split("profiles (--profile NAME")[1].splitlines()[1:] if line.strip()}
    shipped = sorted(p.name for p in (ROOT / "profiles").iterdir() if (p / "config.yaml").is_file())
    assert sorted(listed) == shipped and "allocation" in shipped
    assert listed["allocation"] == "Run the whole campaign inside one Slurm allocation you already hold"
    assert listed["local"] == "Run on this machine"


@pytest.mark.pipeline
def test_run_passes_a_configfile_given_after_the_subcommand_to_snakemake(tmp_path):
    mine = campaign_file(tmp_path, "mine")
    proc = movebench("run", "--configfile", mine, "-n", "--quiet", "rules", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"--configfile={mine}" in proc.stdout.splitlines()[0]
    assert "bcast_point" in proc.stdout + proc.stderr
    assert not (tmp_path / "mine").exists()  # a dry run: nothing ran
