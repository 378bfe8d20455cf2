"""A third-party plugin package's mistakes, said where they are: its configs, its imports, its agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_registry import _env, conf_package, fake_distribution, refused_run

#: A package of plugins of its own: an env that draws no rgb_array frames, and two agents.
PLUGINS = '''
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import gymnasium as gym
import numpy as np


class Still(gym.Env):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, render_mode: Optional[str] = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode={render_mode!r} is not supported; choose one of ansi")
        self.render_mode = render_mode
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(1, dtype=np.float32), 1.0, True, False, {}


@dataclass
class StillConfig:
    n_envs: int = 1


class StillEnv:
    """An env of one step that draws only text."""

    Config: ClassVar[type] = StillConfig

    def __init__(self, cfg: Any) -> None:
        self.n_envs = 1

    def make(self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None):
        return Still(render_mode)


@dataclass
class AgentConfig:
    steps: int = 1


class Forgetful:
    """Trains at once; its checkpoints cannot be loaded."""

    Config: ClassVar[type] = AgentConfig

    def __init__(self, cfg: Any) -> None: ...

    def learn(self, ctx: Any) -> None:
        logging.getLogger("third_party_plugins.agents").info("forgetful learns from step %d", ctx.start_step)
        ctx.after_step(ctx.total_steps, self)

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        return 0

    def save(self, path: Any) -> None:
        (path / "table.txt").write_text("0")

    def load(self, path: Any) -> None:
        raise KeyError("q_table")


class Backwards(Forgetful):
    """Reports steps that go back."""

    def learn(self, ctx: Any) -> None:
        ctx.after_step(10, self)
        ctx.after_step(5, self)
'''

ENTRY_POINTS = (
    "[framework.envs]\nstill = third_party_plugins:StillEnv\nboom = boom_plugin:Env\n"
    "ghost = third_party_plugins:Nowhere\n"
    "[framework.agents]\nforgetful = third_party_plugins:Forgetful\n"
    "backwards = third_party_plugins:Backwards\n"
    "[framework.conf]\nthird_party = third_party_conf\nbroken = broken_conf\nnamed = named_conf\n"
)

NAMED_CONF = """
from dataclasses import dataclass

from framework.config import store_schema


@dataclass
class NamedConfig:
    name: str = "maze"


store_schema("env", "named", NamedConfig)
"""


def third_party(root: Path) -> Path:
    """A distribution of plugins and three conf packages: one good, one whose import fails, one whose
    schema takes the key that chooses its plugin."""
    fake_distribution(root, "third-party", ENTRY_POINTS, "third_party_plugins", PLUGINS)
    (root / "boom_plugin.py").write_text('raise RuntimeError("boom at import")\n')
    for group, option in (("env", "still"), ("env", "boom"), ("agent", "forgetful"), ("agent", "backwards")):
        if not (root / "third_party_conf" / group).exists():
            conf_package(root, "third_party_conf", group, option)
        (root / "third_party_conf" / group / f"{option}.yaml").write_text(f"name: {option}\n")
    (root / "broken_conf").mkdir()
    (root / "broken_conf" / "__init__.py").write_text("import some_missing_dependency_xyz\n")
    (root / "named_conf").mkdir()
    (root / "named_conf" / "__init__.py").write_text(NAMED_CONF)
    return root


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framework", *args],
        env=_env(root), cwd=root, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_a_conf_package_that_cannot_be_imported_is_left_out_and_said_once(tmp_path: Path) -> None:
    """Its ModuleNotFoundError, or a schema taking `name`, was a traceback of every command, --help too."""
    root = third_party(tmp_path)
    listing = cli(root, "plugins")
    assert listing.returncode == 0, listing.stderr
    shown = " ".join(listing.stdout.split())
    missing = "No module named 'some_missing_dependency_xyz'"
    assert f"(broken: importing it raised ModuleNotFoundError: {missing})" in shown, shown
    assert "(broken: third_party_plugins has no Nowhere)" in shown, shown
    warnings = [line for line in listing.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2, listing.stderr
    assert all(len(line) <= 100 for line in listing.stderr.splitlines()), listing.stderr  # wrapped
    assert "the configs of third-party 1.2.3 (broken_conf) are left out" in listing.stderr
    assert (
        "The schema NamedConfig of env plugin 'named' has a field `name`, the key that chooses the plugin "
        "(env=named)" in " ".join(listing.stderr.split())
    ), listing.stderr
    assert "Traceback" not in listing.stderr

    # The rest stay usable: a run of the package's own plugins, with the env's video it cannot draw.
    run = cli(root, "env=still", "agent=forgetful", "total_steps=5", "eval.video=true", "tracking=none")
    assert run.returncode == 0, run.stderr[-3000:]
    said = " ".join((run.stdout + run.stderr).split())
    assert "forgetful learns from step 0" in said, said  # a plugin's own INFO lines are shown
    assert "eval.video=true: env=still cannot draw rgb_array frames (ValueError: render_mode='rgb_array'" in (
        said
    )
    assert "evaluated without a video" in said and "Run FINISHED at step 5 of 5" in said, said

    # Its checkpoint cannot be loaded: the agent's error, by its type.
    run_dir = next(root.glob("outputs/*/*"))
    said = refused_run(root, f"resume={run_dir}", "total_steps=10")
    assert "cannot be loaded: agent=forgetful's load raised KeyError: 'q_table'" in said, said


def test_plugins_that_break_at_import_or_go_back_in_steps_are_said_in_one_message(tmp_path: Path) -> None:
    root = third_party(tmp_path)
    said = refused_run(root, "env=boom", "total_steps=5")
    assert said.startswith("Warning: the configs of third-party 1.2.3 (broken_conf) are left out"), (
        said
    )  # the warnings come first; then the one error
    assert (
        "Error: env 'boom' (boom_plugin:Env, from third-party 1.2.3) cannot be loaded: RuntimeError: boom at "
        "import" in said
    ), said
    said = refused_run(root, "env=still", "agent=backwards", "total_steps=20", "eval.at_start=false")
    assert (
        "Error: agent=backwards: ctx.after_step(5) after ctx.after_step(10); the step is the run's total so "
        "far, which never goes back" in said
    ), said


def test_a_config_file_two_packages_give_is_refused_naming_both(tmp_path: Path) -> None:
    """Its env/cartpole.yaml silently replaced the built-in one, the default experiment's env with it."""
    fake_distribution(tmp_path, "rival-conf", "[framework.conf]\nrival = rival_conf\n")
    conf_package(tmp_path, "rival_conf", "env", "cartpole")
    said = refused_run(tmp_path, "total_steps=100")
    assert said.startswith(
        "Error: The config file env/cartpole.yaml is in more than one config package: framework "
    ), said
    described = cli(tmp_path, "plugins", "--config", "cartpole")  # the same one line, not a traceback
    assert described.returncode == 1 and "Traceback" not in described.stderr, described.stderr
    assert "Error: The config file env/cartpole.yaml is in more than one" in described.stderr
    assert "(framework_conf) and rival-conf 1.2.3 (rival_conf); which one a run would compose is chance" in (
        said
    )
