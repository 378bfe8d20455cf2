"""A regular (non-editable) install carries the core, the built-in plugins and the configs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("src") / "framework"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            "outputs",
            "multirun",
            "build",
            "*.egg-info",
            "__pycache__",
            "mlruns",
            # A virtual environment in the checkout (the README's), the PeerJS server's npm packages.
            ".venv",
            "node_modules",
        ),
    )
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    shutil.rmtree(source)  # nothing may depend on the source tree
    return target


def test_installed_distribution_holds_plugins_and_configs(wheel_install: Path) -> None:
    assert (wheel_install / "framework" / "run.py").is_file()
    assert (wheel_install / "framework" / "contracts" / "check.py").is_file()
    assert (wheel_install / "framework_plugins" / "sb3" / "agent.py").is_file()
    assert (wheel_install / "framework_conf" / "config.yaml").is_file()
    assert (wheel_install / "framework_conf" / "tuned" / "ppo_cartpole.yaml").is_file()
    assert (wheel_install / "framework_plugins" / "gomoku" / "static" / "play.html").is_file()
    assert (wheel_install / "framework_conf" / "experiment" / "gomoku_9x9.yaml").is_file()


def test_installed_cli_runs_from_any_directory(wheel_install: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(wheel_install)}
    where = subprocess.run(
        [sys.executable, "-c", "import framework, framework_conf; print(framework.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env}, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(wheel_install))
    r = run_cli(
        "agent=ppo", "total_steps=256", "agent.hyperparams.n_steps=32", "eval.episodes=1", "tracking=none",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 256" in r.output


def test_installed_cli_trains_our_dqn_on_atari(wheel_install: Path, tmp_path: Path) -> None:
    """The README's Atari command on a regular install: frame preprocessing needs OpenCV, a dependency."""
    r = run_cli(
        "env=atari", "env.game=Pong", "agent=dqn", "total_steps=600", "agent.learning_starts=200",
        "eval.episodes=1", "env.max_episode_steps=300", "tracking=none",
        cwd=tmp_path, env={"PYTHONPATH": str(wheel_install)}, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "Run FINISHED at step 600 of 600." in r.output
    assert "Powered by Stella" not in r.output
