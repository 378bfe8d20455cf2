"""Tests of the example Corridor env and its plugin class."""

import pytest
from framework_example.commands import corridor
from framework_example.corridor import RIGHT, Corridor, CorridorConfig, CorridorEnv
from gymnasium.utils.env_checker import check_env

# Built directly rather than through gymnasium.make, the env has no spec to re-render from.
NO_SPEC = pytest.mark.filterwarnings("ignore:.*not having a spec")


@NO_SPEC
def test_env_passes_gymnasium_checker():
    check_env(CorridorEnv(length=5, max_steps=20), skip_render_check=False)


@NO_SPEC
def test_plugin_env_passes_gymnasium_checker():
    check_env(Corridor(CorridorConfig()).make(seed=0, index=0))


def test_walking_right_reaches_the_goal():
    length = 6
    env = Corridor(CorridorConfig(length=length)).make(seed=0, index=0)
    env.reset(seed=0)
    for _ in range(length - 2):
        _, reward, terminated, truncated, _ = env.step(RIGHT)
        assert not terminated and not truncated
        assert reward < 0
    obs, reward, terminated, truncated, _ = env.step(RIGHT)
    assert terminated and not truncated
    assert reward > 0
    assert obs[0] == pytest.approx(1.0)


def test_episode_truncates_after_max_steps():
    env = CorridorEnv(length=4, max_steps=3)
    env.reset(seed=0)
    for _ in range(3):
        _, _, terminated, truncated, _ = env.step(0)
    assert truncated and not terminated


def test_config_rejects_too_short_corridor():
    with pytest.raises(ValueError, match=r"length=1\b"):
        Corridor(CorridorConfig(length=1))


def test_the_corridor_command_walks_to_the_goal(capsys):
    assert corridor(["--length", "4"]) == 0
    assert capsys.readouterr().out.splitlines() == ["A..G", ".A.G", "..AG", "...A", "goal reached in 3 steps"]
