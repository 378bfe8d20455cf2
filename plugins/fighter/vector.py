"""n fighter arenas behind one connection, as a gymnasium VectorEnv (same-step autoreset)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space

from . import rules
from .env import FightingEnv, observe, score
from .transports import Transport
from .webrtc import PeerGone


class FighterVectorEnv(gym.vector.VectorEnv):
    """One message carries every arena's action and one reply every arena's state.

    Arena i plays exactly as a single FightingEnv reset with seed + i would: same game seeds,
    same trajectory. A finished arena restarts in the same step (its last observation is in
    `infos["final_obs"]`), while the others play on.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        n: int,
        *,
        transport: Transport,
        opponent: str = "aggressive",
        damage_reward: float = 1.0,
        win_reward: float = 1.0,
        reconnect_timeout_s: float = 0.0,
    ) -> None:
        template = FightingEnv(opponent=opponent)  # validates, and defines the spaces
        self.C = template.C
        self.num_envs = n
        self.transport = transport
        self.opponent = opponent
        self.damage_reward = damage_reward
        self.win_reward = win_reward
        self.reconnect_timeout_s = reconnect_timeout_s
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self._rngs = [seeding.np_random(None)[0] for _ in range(n)]
        self._totals = [[0, 0] for _ in range(n)]
        self.games: list[rules.Game] = []

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        self.games = self.transport.reset([self._game_seed(i) for i in range(self.num_envs)], self.opponent)
        self._totals = [[0, 0] for _ in range(self.num_envs)]
        return np.stack([observe(self.C, g) for g in self.games]), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        try:
            self.games = self.transport.step([int(a) for a in np.asarray(actions).reshape(-1)])
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            return self._after_reconnect()
        n = self.num_envs
        obs = np.stack([observe(self.C, g) for g in self.games])
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        infos: dict[str, Any] = {}
        finished: list[int] = []
        for i, game in enumerate(self.games):
            rewards[i], info = score(self.C, game, self._totals[i], self.damage_reward, self.win_reward)
            if game["done"]:
                terminated[i] = True
                finished.append(i)
                infos = self._add_info(infos, info, i)
        if finished:
            final_obs = np.empty(n, dtype=object)  # one array per arena, None where none ended
            for i in finished:
                final_obs[i] = obs[i].copy()
            infos["final_obs"] = final_obs
            infos["_final_obs"] = terminated.copy()
            seeds = [self._game_seed(i) for i in finished]
            self.games = self.transport.reset(seeds, self.opponent, arenas=finished)
            for i in finished:
                self._totals[i] = [0, 0]
                obs[i] = observe(self.C, self.games[i])
        return obs, rewards, terminated, np.zeros(n, dtype=bool), infos

    def _after_reconnect(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """A reloaded page: every round in progress ends truncated, and all arenas start anew."""
        n = self.num_envs
        final_obs = np.empty(n, dtype=object)
        for i, game in enumerate(self.games):
            final_obs[i] = observe(self.C, game)
        self.transport.reconnect(self.reconnect_timeout_s)
        obs, _ = self.reset()
        infos = {
            "final_obs": final_obs,
            "_final_obs": np.ones(n, dtype=bool),
            "reconnected": np.ones(n, dtype=bool),
        }
        return obs, np.zeros(n), np.zeros(n, dtype=bool), np.ones(n, dtype=bool), infos

    def close_extras(self, **kwargs: Any) -> None:
        self.transport.close()

    def _game_seed(self, i: int) -> int:
        return int(self._rngs[i].integers(0, 2**31 - 1))
