"""Checks every game transport must pass, shared by the python and browser transport tests."""

from __future__ import annotations

import numpy as np

from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.transports import Transport


def assert_passes_env_checkers(transport: Transport) -> None:
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    env = FightingEnv(transport=transport)
    gym_check(env)
    sb3_check(env, warn=True)


def assert_plays_like_the_twin(
    transport: Transport, *, opponent: str, seed: int, actions: np.ndarray
) -> None:
    """Observations and rewards over `transport` equal those of the in-process twin."""

    def play(env: FightingEnv) -> list[float]:
        obs, _ = env.reset(seed=seed)
        out = list(obs)
        for a in actions:
            obs, reward, terminated, _, _ = env.step(int(a))
            out += [*obs, reward]
            if terminated:
                break
        return out

    assert play(FightingEnv(transport=transport, opponent=opponent)) == play(FightingEnv(opponent=opponent))
