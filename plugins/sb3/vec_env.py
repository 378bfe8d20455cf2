"""Vectorised envs for SB3, built from the env plugin alone (the RunContext holds live clients)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from framework.contracts import EnvPlugin, VectorEnvPlugin


def _monitored(env_plugin: EnvPlugin, seed: int, index: int, in_worker: bool) -> Any:
    if in_worker:
        import torch

        torch.set_num_threads(1)
    return Monitor(env_plugin.make(seed=seed + index, index=index))


def make_vec_env(env_plugin: EnvPlugin, n_envs: int, *, seed: int, kind: str) -> VecEnv:
    """`n_envs` monitored instances; SB3 seeds their resets with seed + i.

    An env plugin that vectorises itself (`make_vector`, e.g. many game arenas behind one
    connection) is used as one VecEnv instead.
    """
    if isinstance(env_plugin, VectorEnvPlugin):
        from .gymnasium_vec_env import GymnasiumVecEnv

        return GymnasiumVecEnv(env_plugin.make_vector(seed=seed, n=n_envs))
    subproc = kind == "subproc" and n_envs > 1
    fns: list[Callable[[], gym.Env]] = [
        partial(_monitored, env_plugin, seed, i, subproc) for i in range(n_envs)
    ]
    venv: VecEnv = SubprocVecEnv(fns, start_method="forkserver") if subproc else DummyVecEnv(fns)
    return venv
