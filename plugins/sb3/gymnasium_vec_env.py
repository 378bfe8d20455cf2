"""SB3's VecEnv over a gymnasium VectorEnv (same-step autoreset), for envs that vectorise themselves."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn


class GymnasiumVecEnv(VecEnv):
    """Adds what SB3 expects of its own VecEnvs: terminal observations and Monitor's episode info."""

    def __init__(self, venv: gym.vector.VectorEnv) -> None:
        mode = venv.metadata.get("autoreset_mode")
        if mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError(f"{type(venv).__name__} autoresets in mode {mode}; SB3 needs SAME_STEP")
        self.venv = venv  # before VecEnv.__init__, which reads the envs' render_mode through get_attr
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: np.ndarray | None = None
        self._seed: int | None = None
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=int)
        self._t0 = time.time()

    def reset(self) -> VecEnvObs:
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        self._returns[:] = 0
        self._lengths[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
        dones = terminated | truncated
        self._returns += rewards
        self._lengths += 1
        out: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            info = out[i]
            info["terminal_observation"] = infos["final_obs"][i]
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            info["episode"] = {
                "r": float(self._returns[i]),
                "l": int(self._lengths[i]),
                "t": time.time() - self._t0,
            }
            # Gymnasium's vector infos: a `_key` array says which arenas have `key` (a round cut short by a
            # reconnect has no stats), and is no stat itself.
            stats = infos.get("episode_stats", {})
            kept = {k: float(v[i]) for k, v in stats.items() if k[0] != "_" and stats.get(f"_{k}", dones)[i]}
            if kept:
                info["episode_stats"] = kept
            self._returns[i] = 0
            self._lengths[i] = 0
        return obs, rewards.astype(np.float32), dones, out

    def close(self) -> None:
        self.venv.close()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        self._seed = seed
        return [None if seed is None else seed + i for i in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.venv, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        return [getattr(self.venv, method_name)(*args, **kwargs)] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        return [indices] if isinstance(indices, int) else list(indices)
