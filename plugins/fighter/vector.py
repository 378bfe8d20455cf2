"""n fighter arenas behind one connection, as a gymnasium VectorEnv (same-step autoreset)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space

from . import rules
from .env import FightingEnv, Observer, round_info, score
from .protocol import GAME_WIRE_LENGTH, unpack_game
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
        self._totals = np.zeros((n, 2), dtype=np.int64)
        self.observe = Observer(self.C)
        self.packed = np.zeros((n, GAME_WIRE_LENGTH), dtype=np.int64)

    @property
    def games(self) -> list[rules.Game]:
        """Every arena's current game state as a dict (copies: the env keeps them packed)."""
        return [unpack_game(row, self.opponent) for row in self.packed.tolist()]

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        seeds = [self._game_seed(i) for i in range(self.num_envs)]
        try:
            self.packed = self.transport.reset(seeds, self.opponent)
        except PeerGone:  # a page took over (or was reloaded) before the first step
            if self.reconnect_timeout_s <= 0:
                raise
            self.transport.reconnect(self.reconnect_timeout_s)
            self.packed = self.transport.reset(seeds, self.opponent)
        self._totals[:] = 0
        return self.observe(self.packed), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        try:
            self.packed = self.transport.step([int(a) for a in np.asarray(actions).reshape(-1)])
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            return self._after_reconnect()
        n = self.num_envs
        obs = self.observe(self.packed)
        rewards, terminated = score(self.C, self.packed, self._totals, self.damage_reward, self.win_reward)
        infos: dict[str, Any] = {}
        finished = np.flatnonzero(terminated).tolist()
        if finished:
            for i in finished:
                infos = self._add_info(infos, round_info(self.packed[i], self._totals[i]), i)
            final_obs = np.empty(n, dtype=object)  # one array per arena, None where none ended
            for i in finished:
                final_obs[i] = obs[i].copy()
            infos["final_obs"] = final_obs
            infos["_final_obs"] = terminated.copy()
            seeds = [self._game_seed(i) for i in finished]
            try:
                self.packed = self.transport.reset(seeds, self.opponent, arenas=finished)
            except PeerGone:  # lost as the ended rounds restart: every round starts anew
                if self.reconnect_timeout_s <= 0:
                    raise
                self.transport.reconnect(self.reconnect_timeout_s)
                truncated = ~terminated
                for arena in np.flatnonzero(truncated).tolist():
                    final_obs[arena] = obs[arena].copy()
                infos["_final_obs"] = np.ones(n, dtype=bool)
                infos["reconnected"] = np.ones(n, dtype=bool)
                obs, _ = self.reset()
                return obs, rewards, terminated, truncated, infos
            self._totals[finished] = 0
            obs[finished] = self.observe(self.packed[finished])
        return obs, rewards, terminated, np.zeros(n, dtype=bool), infos

    def _after_reconnect(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """A reloaded page: every round in progress ends truncated, and all arenas start anew."""
        n = self.num_envs
        final_obs = np.empty(n, dtype=object)
        for i, row in enumerate(self.observe(self.packed)):
            final_obs[i] = row
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
