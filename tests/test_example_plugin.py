"""The example third-party plugin package, pip-installed and driven through the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "framework-example-plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pip-install the example (a real wheel build) into its own target dir on PYTHONPATH."""
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / EXAMPLE.name  # setuptools builds in the source tree
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return {"PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}


def test_example_plugins_are_listed(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("plugins", cwd=tmp_path, env=installed)
    assert r.returncode == 0, r.output
    rows = [line.split() for line in r.stdout.splitlines()]
    assert ["env", "corridor", "env=corridor", "framework-example-plugin", "0.1.0"] in [
        row[:5] for row in rows
    ]
    assert ["conf", "framework_example", "-", "framework-example-plugin", "0.1.0"] in [
        row[:5] for row in rows
    ]
    assert ["command", "corridor", "-", "framework-example-plugin", "0.1.0"] in [row[:5] for row in rows]
    described = run_cli("plugins", "--config", "corridor", cwd=tmp_path, env=installed)
    assert described.returncode == 0, described.output
    assert "env.length" in described.stdout and "Cells in the corridor" in described.stdout


def test_example_config_group_shows_in_help(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("--help", cwd=tmp_path, env=installed)
    assert "env: atari, cartpole, corridor, fighter, gomoku, gym, lunarlander" in r.stdout


def test_example_command_runs_by_name_and_shows_in_help(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("corridor", "--length", "3", cwd=tmp_path, env=installed)
    assert r.returncode == 0, r.output
    assert r.stdout.splitlines() == ["A.G", ".AG", "..A", "goal reached in 2 steps"]
    listed = run_cli("--help", cwd=tmp_path, env=installed)
    assert "  corridor  Walk the corridor to its goal, printing each step as text." in listed.stdout
    refused = run_cli("corridor", "--length", "1", cwd=tmp_path, env=installed)
    assert refused.returncode == 2
    assert "--length 1: a corridor has at least 2 cells" in refused.stderr


def test_example_env_trains_through_the_cli(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli(
        "env=corridor", "env.length=4", "agent=ppo", "agent.hyperparams.n_steps=128", "total_steps=1024",
        "eval.episodes=2", "tracking=none",
        cwd=tmp_path, env=installed,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "env=corridor agent=sb3" in r.output
    assert "FINISHED at step 1024" in r.output


def test_example_env_validates_its_own_config(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("env=corridor", "env.length=1", "tracking=none", cwd=tmp_path, env=installed)
    assert r.returncode == 1
    assert "env.length=1 must be at least 2" in r.stderr


def test_example_agent_trains_resumes_and_says_its_own_lines(
    installed: dict[str, str], tmp_path: Path
) -> None:
    """The example's tabular agent, on its corridor: trained, its own INFO line shown, resumed from its
    checkpoint with its table (the plugin author's path through the agent contract, end to end)."""
    common = ["env=corridor", "env.length=5", "agent=qtable", "eval.episodes=2", "tracking=none"]
    first = run_cli(*common, "total_steps=1500", "hydra.run.dir=outputs/a", cwd=tmp_path, env=installed)
    assert first.returncode == 0, first.output[-3000:]
    assert "qtable learns from step 0 with 0 states known" in first.output
    assert "Run FINISHED at step 1500 of 1500." in first.stdout
    assert "eval/return_mean  0.97 ± 0" in first.stdout  # the goal, 4 steps right: 1 - 3 x 0.01
    again = run_cli(
        f"resume={tmp_path / 'outputs/a'}",
        "total_steps=2000",
        "hydra.run.dir=outputs/b",
        cwd=tmp_path,
        env=installed,
    )
    assert again.returncode == 0, again.output[-3000:]
    assert "qtable learns from step 1500 with 4 states known" in again.output
    # Untracked, it is named as its first part was, with the budget the resume gave it.
    assert "run               qtable-s0 length=5 steps=2k corridor" in again.stdout, again.stdout
    assert "Run FINISHED at step 2000 of 2000." in again.stdout
