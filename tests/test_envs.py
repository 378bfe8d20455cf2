"""Env plugins: gymnasium ids, LunarLander (Box2D) and Atari preprocessing."""

from __future__ import annotations

import numpy as np
import pytest

from framework import config
from framework.app import compose


def env_plugin(*overrides: str):
    cfg = compose(list(overrides))
    section = config.plugin_section(cfg, "env")
    assert section is not None
    return section.plugin(section.cfg)


def test_cartpole_instances_are_seeded_by_index() -> None:
    plugin = env_plugin("env=cartpole")
    a, b = plugin.make(seed=0, index=0), plugin.make(seed=1, index=1)
    oa, _ = a.reset(seed=0)
    oa2, _ = plugin.make(seed=0, index=0).reset(seed=0)
    ob, _ = b.reset(seed=1)
    assert np.array_equal(oa, oa2) and not np.array_equal(oa, ob)


def test_gym_plugin_rejects_unknown_ids_with_close_matches() -> None:
    with pytest.raises(ValueError, match="Unknown gymnasium env id env.id='CartPole-v9'.*CartPole-v1"):
        env_plugin("env=gym", "env.id=CartPole-v9")


def test_lunarlander_discrete_and_continuous() -> None:
    discrete = env_plugin("env=lunarlander").make(seed=0, index=0)
    continuous = env_plugin("env=lunarlander", "env.continuous=true").make(seed=0, index=0)
    assert discrete.action_space.n == 4
    assert continuous.action_space.shape == (2,)
    obs, _ = continuous.reset(seed=0)
    assert obs.shape == (8,)


def test_atari_preprocessing_gives_stacked_84x84_grayscale_frames() -> None:
    plugin = env_plugin("env=atari", "env.game=Breakout")
    env = plugin.make(seed=0, index=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    rewards = []
    for _ in range(300):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        rewards.append(reward)
        if terminated or truncated:
            env.reset()
    assert set(rewards) <= {-1.0, 0.0, 1.0}  # clipped for training


def test_atari_episodic_life_ends_training_episodes_on_a_lost_life() -> None:
    train = env_plugin("env=atari", "env.game=Breakout", "env.frame_stack=1").make(seed=0, index=0)
    train.reset(seed=0)
    lives = train.unwrapped.ale.lives()
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):
        _, _, terminated, truncated, _ = train.step(0)  # NOOP: the ball is lost
        steps += 1
    assert train.unwrapped.ale.lives() == lives - 1, "episode must end on the first lost life"
    train.reset()
    assert train.unwrapped.ale.lives() == lives - 1, "reset after a lost life continues the same game"


def test_atari_training_reports_the_whole_games_score_as_its_last_life_ends() -> None:
    """rollout/ep_rew_mean is a life's clipped reward: the game's score goes as rollout/game_score."""
    train = env_plugin("env=atari", "env.game=Breakout", "env.frame_stack=1").make(seed=0, index=0)
    train.reset(seed=0)
    rng = np.random.default_rng(0)
    episodes, clipped, steps, stats = 0, 0.0, 0, None
    while stats is None:
        _, reward, terminated, truncated, info = train.step(int(rng.integers(train.action_space.n)))
        clipped, steps = clipped + float(reward), steps + 1
        stats = info.get("episode_stats")
        if (terminated or truncated) and stats is None:
            episodes += 1  # a life lost: a training episode ends, the game goes on
            train.reset()  # which steps the game on (a NOOP, FIRE): counted in its length too
    assert episodes >= 1 and stats["game_length"] >= steps, (episodes, stats, steps)
    assert stats["game_score"] >= clipped >= 0  # Breakout's bricks score 1 to 7 each, clipped to 1


def test_atari_eval_env_keeps_raw_rewards_and_lives() -> None:
    plugin = env_plugin("env=atari", "env.game=Pong", "env.frame_stack=1")
    env = plugin.make(seed=0, index=0, evaluation=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84)
    assert "EpisodicLife" not in str(env)


def test_atari_unknown_game_suggests_names() -> None:
    with pytest.raises(ValueError, match="Unknown Atari game env.game='Breakuot'.*Breakout"):
        env_plugin("env=atari", "env.game=Breakuot")
    # A game only spelt otherwise is named as it is spelt, without the list of every game.
    with pytest.raises(
        ValueError, match="^Unknown Atari game env.game='space_invaders': it is spelt env.game=SpaceInvaders$"
    ):
        env_plugin("env=atari", "env.game=space_invaders")


def test_atari_eval_env_restarts_play_after_a_lost_life() -> None:
    """A policy that never presses FIRE must still see a Breakout evaluation episode end."""
    env = env_plugin("env=atari", "env.game=Breakout", "env.frame_stack=1").make(
        seed=0, index=0, evaluation=True
    )
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(0)
        done = terminated or truncated
        steps += 1
    assert terminated and steps < 2000, steps


def test_an_env_kwarg_its_constructor_does_not_take_is_refused_before_the_run() -> None:
    from framework.errors import ConfigError
    from framework_plugins.gym_envs.envs import check_env_kwargs

    with pytest.raises(ConfigError, match=r"Did you mean env.kwargs.sutton_barto_reward\? It takes: "):
        check_env_kwargs("CartPole-v1", {"sutton_barto_rewrd": True})
    with pytest.raises(ConfigError, match="LunarLander-v3 takes no argument 'bogus'"):
        check_env_kwargs("LunarLander-v3", {"bogus": 1})
    check_env_kwargs("LunarLander-v3", {"gravity": -9.0, "continuous": True})  # taken
