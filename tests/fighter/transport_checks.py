"""Checks every game transport must pass, shared by the python and browser transport tests."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

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


def assert_a_lost_peer_is_started_anew(transport: WebRTCTransport) -> None:
    """The Python peer dies mid-round: the transport notices at once, starts a new one, the round
    ends truncated and play goes on."""
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    env.step(0)
    assert transport.process is not None
    first = transport.process.pid
    transport.process.kill()
    t0 = time.monotonic()
    _, reward, terminated, truncated, info = env.step(0)
    assert truncated and not terminated and info["reconnected"] and reward == 0.0
    assert time.monotonic() - t0 < 15
    assert transport.restarts == 1 and transport.process is not None and transport.process.pid != first
    env.reset(seed=1)
    _, _, _, truncated, _ = env.step(0)
    assert not truncated


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `condition()` holds; an AssertionError naming `what` past `timeout`."""
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - t0
