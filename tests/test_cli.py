"""The command line: lazy imports, Hydra's own flags, and config errors that name the bad key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "ray", "stable_baselines3", "mlflow")


def imported_modules(*args: str, cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level modules imported by `python -m framework ARGS`, from -X importtime."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "framework", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    names = set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names, p


@pytest.mark.parametrize("args", [("plugins",), ("--help",), ("--cfg", "job", "env=atari", "agent=dqn")])
def test_listing_help_and_composition_import_neither_torch_nor_ray(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    modules, p = imported_modules(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "framework" in modules
    assert not modules & set(HEAVY), modules & set(HEAVY)


def test_plugins_lists_kind_name_distribution_version_and_description(cli) -> None:
    r = cli("plugins")
    assert r.returncode == 0, r.output
    header, *rows = r.stdout.splitlines()
    assert header.split()[:5] == ["KIND", "NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION"]
    sb3 = next(row for row in rows if row.split()[:2] == ["agent", "sb3"])
    assert sb3.split()[2:4] == ["framework", "0.1.0"]
    assert "Stable-Baselines3" in sb3


def test_help_lists_config_groups(cli) -> None:
    r = cli("--help")
    assert r.returncode == 0
    assert "env: atari, cartpole, fighter, gym, lunarlander" in r.stdout
    # dqn is our own DQN (plugins/dqn); sb3_dqn is Stable-Baselines3's.
    assert "agent: a2c, dqn, ppo, qrdqn, sac, sb3_dqn, td3" in r.stdout


def test_cfg_job_shows_tuned_hyperparameters_for_the_chosen_pair(cli) -> None:
    r = cli("--cfg", "job", "env=cartpole", "agent=ppo")
    assert r.returncode == 0, r.output
    assert "n_steps: 32" in r.stdout and "learning_rate: lin_0.001" in r.stdout
    other = cli("--cfg", "job", "env=lunarlander", "agent=ppo")
    assert "n_steps: 1024" in other.stdout
    assert "total_steps: 1000000" in other.stdout  # a preset's budget wins over the root default
    overridden = cli("--cfg", "job", "env=lunarlander", "agent=ppo", "total_steps=5")
    assert "total_steps: 5" in overridden.stdout  # and the command line wins over the preset


def test_misspelled_override_key_fails_naming_the_key(cli) -> None:
    r = cli("env.n_env=2", "tracking=none")
    assert r.returncode == 1
    assert "env.n_env" in r.stderr and "not in struct" in r.stderr


def test_added_key_unknown_to_the_plugin_schema_fails_with_a_suggestion(cli) -> None:
    r = cli("+env.n_env=2", "tracking=none")
    assert r.returncode == 1
    assert "Unknown config key env.n_env for env plugin 'cartpole'. Did you mean env.n_envs?" in r.stderr


def test_wrong_type_at_root_fails_naming_the_key(cli) -> None:
    r = cli("total_steps=lots")
    assert r.returncode == 1
    assert "total_steps" in r.stderr and "Integer" in r.stderr


def test_wrong_type_in_plugin_section_fails_naming_the_key(cli, tmp_path: Path) -> None:
    r = cli("env.n_envs=two")
    assert r.returncode == 1
    assert "Invalid value for env.n_envs ('cartpole')" in r.stderr
    assert not (tmp_path / "mlflow.db").exists(), "nothing may start before the config is valid"


def test_unknown_plugin_name_lists_the_known_ones(cli) -> None:
    r = cli("env.name=cartpol", "tracking=none")
    assert r.returncode == 1
    assert "Unknown env plugin 'cartpol'. Did you mean 'cartpole'?" in r.stderr


def test_unknown_config_group_option_lists_the_available_ones(cli) -> None:
    r = cli("env=cartpol")
    assert r.returncode == 1
    assert "cartpol" in r.stderr and "cartpole" in r.stderr


def test_runs_from_any_directory(cli, tmp_path: Path) -> None:
    from tests.conftest import FAST

    r = cli(*FAST, "tracking=none", "progress=log")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 1024" in r.output
    assert "steps/s" in r.output  # plain progress lines when not on a terminal
    assert list(tmp_path.glob("outputs/*/*/checkpoints/step_*"))


def test_tab_completion_of_the_framework_command_offers_group_options(tmp_path: Path) -> None:
    env = {**__import__("os").environ, "COMP_LINE": "framework env=c", "COMP_POINT": "15"}
    p = subprocess.run(
        [sys.executable, "-m", "framework", "-sc", "query=bash"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.stdout.split() == ["env=cartpole"], p.stderr[-2000:]
