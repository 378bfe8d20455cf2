"""Checks every game transport must pass, shared by the python and browser transport tests."""

from __future__ import annotations

import time

import numpy as np

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.transports import Transport, WebRTCTransport


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


def assert_a_new_python_peer_takes_over(transport: WebRTCTransport) -> None:
    """The Python peer dies mid-round; a new one connects: the round ends truncated, play goes on."""
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    env.step(0)
    assert transport.process is not None
    transport.process.kill()  # the page goes away ...
    transport.process.wait()
    time.sleep(2.5)  # ... the heartbeat notices ...
    transport.process = python_peer.spawn(  # ... and a reloaded page connects again
        transport.connection.client_args, transport.connection.token
    )
    _, reward, terminated, truncated, info = env.step(0)
    assert truncated and not terminated and info["reconnected"] and reward == 0.0
    env.reset(seed=1)
    _, _, _, truncated, _ = env.step(0)
    assert not truncated
