"""agent=dqn's configs: the buffer it selects, the command line winning, presets, one capacity."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from framework import config
from framework.app import compose


def test_agent_dqn_selects_a_replay_buffer_whose_capacity_the_agent_follows() -> None:
    cfg = compose(["agent=dqn", "env=gym"])
    assert cfg.buffer.name == "replay"
    assert cfg.agent.buffer_size == cfg.buffer.capacity == 1_000_000
    resized = compose(["agent=dqn", "env=gym", "buffer.capacity=5000"])
    assert resized.agent.buffer_size == 5000


def test_buffer_on_the_command_line_wins_and_tilde_buffer_leaves_it_to_the_agent() -> None:
    assert compose(["agent=dqn", "buffer=memory_efficient"]).buffer.name == "memory_efficient"
    none = compose(["agent=dqn", "env=gym", "~buffer"])
    assert none.buffer is None and none.agent.buffer_size == 1_000_000
    assert compose(["agent=dqn", "env=gym", "~buffer", "agent.buffer_size=77"]).agent.buffer_size == 77


def test_other_agents_still_run_without_a_buffer() -> None:
    assert compose(["agent=ppo"]).buffer is None
    assert compose(["agent=sb3_dqn"]).buffer is None


def test_cartpole_preset_has_rl_zoo3_values() -> None:
    cfg = compose(["agent=dqn", "env=cartpole"])
    agent = OmegaConf.to_container(cfg.agent, resolve=True)
    assert isinstance(agent, dict)
    assert cfg.buffer.capacity == agent["buffer_size"] == 100_000 and cfg.total_steps == 50_000
    expected = {
        "batch_size",
        "learning_starts",
        "gamma",
        "train_freq",
        "gradient_steps",
        "target_update_interval",
    }
    sb3 = compose(["agent=sb3_dqn", "env=cartpole"]).agent.hyperparams
    assert {key: agent[key] for key in expected} == {key: sb3[key] for key in expected}
    assert agent["learning_rate"]["start"] == sb3.learning_rate == 2.3e-3
    assert agent["exploration"]["fraction"] == sb3.exploration_fraction == 0.16


def test_atari_preset_stores_each_frame_once_with_the_env_frame_stack() -> None:
    cfg = compose(["agent=dqn", "env=atari"])
    assert cfg.buffer.name == "memory_efficient"
    assert cfg.buffer.frame_history_len == cfg.env.frame_stack == 4
    assert cfg.env.n_envs == 1 and cfg.agent.network == "cnn" and cfg.total_steps == 10_000_000
    assert cfg.agent.buffer_size == cfg.buffer.capacity
    assert compose(["agent=dqn", "env=atari", "env.frame_stack=3"]).buffer.frame_history_len == 3


@pytest.mark.parametrize("env", ["cartpole", "lunarlander", "atari"])
def test_every_preset_validates_against_the_schemas(env: str) -> None:
    cfg = compose(["agent=dqn", f"env={env}"])
    for section in ("env", "agent", "buffer"):
        assert config.plugin_section(cfg, section) is not None
