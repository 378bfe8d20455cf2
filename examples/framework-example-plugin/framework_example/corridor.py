"""A tiny deterministic 1-D corridor environment and the framework env plugin that builds it."""

from typing import Any, ClassVar, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from framework.errors import ConfigError

from .config import CorridorConfig

LEFT, RIGHT = 0, 1


class CorridorEnv(gym.Env):
    """Walk a corridor of `length` cells from the left end to the goal at the right end."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, length: int = 8, max_steps: int = 50, render_mode: Optional[str] = None) -> None:
        if length < 2:
            raise ValueError(f"length={length} must be at least 2")
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r} is not supported; choose one of ansi")
        self.length = length
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self._position = 0
        self._steps = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._position / (self.length - 1)], dtype=np.float32)

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._position = 0
        self._steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action={action!r} is not in {self.action_space}")
        move = 1 if int(action) == RIGHT else -1
        self._position = min(max(self._position + move, 0), self.length - 1)
        self._steps += 1
        terminated = self._position == self.length - 1
        reward = 1.0 if terminated else -0.01
        truncated = not terminated and self._steps >= self.max_steps
        return self._obs(), reward, terminated, truncated, {}

    def render(self) -> Optional[str]:
        if self.render_mode != "ansi":
            return None
        cells = ["."] * self.length
        cells[-1] = "G"
        cells[self._position] = "A"
        return "".join(cells)


class Corridor:
    """Corridor: walk right along a 1-D corridor to the goal (example third-party plugin)."""

    Config: ClassVar[type] = CorridorConfig

    def __init__(self, cfg: CorridorConfig) -> None:
        self.cfg = cfg
        self.n_envs = int(cfg.n_envs)
        if int(cfg.length) < 2:
            raise ConfigError(f"env.length={cfg.length} must be at least 2")
        if self.n_envs < 1:
            raise ConfigError(f"env.n_envs={self.n_envs} must be at least 1")
        if int(cfg.max_steps) < 1:
            raise ConfigError(f"env.max_steps={cfg.max_steps} must be at least 1")

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> gym.Env:
        env = CorridorEnv(int(self.cfg.length), int(self.cfg.max_steps), render_mode=render_mode)
        env.action_space.seed(seed)
        return env
