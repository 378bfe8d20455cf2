"""The training envs, stepped together with same-step autoreset, and their episode statistics."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from framework.contracts import EnvPlugin, VectorEnvPlugin

#: Episodes the rollout/* means are taken over (as Stable-Baselines3's stats_window_size).
STATS_WINDOW = 100


class EnvRunner:
    """n env instances behind one step(actions).

    An episode that ends restarts in the same step: `step` returns the observations to act on
    next (a reset observation where an episode ended) and, by env index, the real last
    observation of each episode that ended, which is what its transition stores. An env
    plugin with `make_vector` (same-step autoreset) runs as one vector env; otherwise the
    plugin's single envs are stepped in a loop, which costs less than gymnasium's
    SyncVectorEnv for the cheap envs DQN is often run on.
    """

    def __init__(self, env_plugin: EnvPlugin, n: int, *, seed: int) -> None:
        self.n = n
        self.seed = seed
        self.vector: Any = None
        self.envs: list[gym.Env] = []
        if isinstance(env_plugin, VectorEnvPlugin):
            self.vector = env_plugin.make_vector(seed=seed, n=n)
            mode = self.vector.metadata.get("autoreset_mode")
            if mode != gym.vector.AutoresetMode.SAME_STEP:
                raise ValueError(
                    f"{type(self.vector).__name__} autoresets in mode {mode}; DQN needs SAME_STEP"
                )
            self.observation_space = self.vector.single_observation_space
            self.action_space = self.vector.single_action_space
        else:
            self.envs = [env_plugin.make(seed=seed + i, index=i) for i in range(n)]
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self.episode_returns: deque[float] = deque(maxlen=STATS_WINDOW)
        self.episode_lengths: deque[int] = deque(maxlen=STATS_WINDOW)
        self.episode_stats: dict[str, deque[float]] = {}

    def reset(self) -> np.ndarray:
        """First observations, shaped (n, *observation shape)."""
        if self.vector is not None:
            obs, _ = self.vector.reset(seed=self.seed)
            return np.asarray(obs)
        return np.stack([env.reset(seed=self.seed + i)[0] for i, env in enumerate(self.envs)])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """(observations to act on, rewards, terminated, {env index: last observation of its episode})."""
        if self.vector is not None:
            return self._step_vector(actions)
        if self.n == 1:  # the common case, without per-env lists
            obs, reward, terminated, final = self._step_one(0, actions[0])
            return obs[None], np.array([reward]), np.array([terminated]), {} if final is None else {0: final}
        steps = [self._step_one(i, a) for i, a in enumerate(actions)]
        finals = {i: s[3] for i, s in enumerate(steps) if s[3] is not None}
        rewards = np.array([s[1] for s in steps])
        return np.stack([s[0] for s in steps]), rewards, np.array([s[2] for s in steps]), finals

    def _step_one(self, i: int, action: Any) -> tuple[np.ndarray, float, bool, np.ndarray | None]:
        """Env i's (observation to act on, reward, terminated, last observation if its episode ended)."""
        env = self.envs[i]
        obs, reward, terminated, truncated, info = env.step(action)
        self._returns[i] += float(reward)
        self._lengths[i] += 1
        if not (terminated or truncated):
            return obs, float(reward), bool(terminated), None
        self._record(i, info.get("episode_stats"))
        first, _ = env.reset()
        return first, float(reward), bool(terminated), obs

    def _step_vector(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, Any]]:
        obs, rewards, terminated, truncated, infos = self.vector.step(actions)
        rewards = np.asarray(rewards, dtype=np.float64)
        self._returns += rewards
        self._lengths += 1
        finals = {}
        stats, ended = infos.get("episode_stats", {}), np.logical_or(terminated, truncated)
        for i in np.flatnonzero(ended):
            finals[int(i)] = infos["final_obs"][i]
            # Gymnasium's `_key` arrays say which arenas have `key` (a truncated round may have none).
            self._record(
                int(i), {k: v[i] for k, v in stats.items() if k[0] != "_" and stats.get(f"_{k}", ended)[i]}
            )
        return np.asarray(obs), rewards, np.asarray(terminated, dtype=bool), finals

    def _record(self, i: int, stats: dict[str, Any] | None) -> None:
        self.episode_returns.append(float(self._returns[i]))
        self.episode_lengths.append(int(self._lengths[i]))
        for key, value in (stats or {}).items():
            self.episode_stats.setdefault(key, deque(maxlen=STATS_WINDOW)).append(float(value))
        self._returns[i] = 0.0
        self._lengths[i] = 0

    def metrics(self) -> dict[str, float]:
        """rollout/* means over the last episodes, under Stable-Baselines3's names."""
        if not self.episode_returns:
            return {}
        out = {
            "rollout/ep_rew_mean": float(np.mean(self.episode_returns)),
            "rollout/ep_len_mean": float(np.mean(self.episode_lengths)),
        }
        out.update({f"rollout/{key}": float(np.mean(values)) for key, values in self.episode_stats.items()})
        return out

    def window(self) -> dict[str, Any]:
        """The last episodes' returns, lengths and stats (the rollout/* means' window), for a checkpoint."""
        return {
            "returns": list(self.episode_returns),
            "lengths": list(self.episode_lengths),
            "stats": {key: list(values) for key, values in self.episode_stats.items()},
        }

    def restore(self, window: dict[str, Any]) -> None:
        """Go on from a checkpoint's `window()`: a resumed run's rollout/* curves do not start over."""
        self.episode_returns.extend(float(v) for v in window.get("returns", []))
        self.episode_lengths.extend(int(v) for v in window.get("lengths", []))
        for key, values in window.get("stats", {}).items():
            self.episode_stats.setdefault(key, deque(maxlen=STATS_WINDOW)).extend(float(v) for v in values)

    def close(self) -> None:
        if self.vector is not None:
            self.vector.close()
        for env in self.envs:
            env.close()
