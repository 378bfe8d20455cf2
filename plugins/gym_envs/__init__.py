"""Gymnasium environments: any env id, CartPole, LunarLander and Atari games."""

# Optional[...] and Dict[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
import difflib
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import gymnasium as gym


@dataclass
class GymConfig:
    id: str = "CartPole-v1"
    """A registered gymnasium env id."""
    n_envs: int = 1
    """Parallel env instances an agent trains on."""
    max_episode_steps: Optional[int] = None
    """Truncate episodes after this many steps (None: the env's own limit)."""
    kwargs: Dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make."""


class GymEnv:
    """Any registered gymnasium environment, by id (env=gym env.id=Acrobot-v1)."""

    Config: Any = GymConfig

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.n_envs = int(cfg.n_envs)
        if self.n_envs < 1:
            raise ValueError(f"env.n_envs={self.n_envs} must be at least 1")
        check_env_id(cfg.id)

    def make_kwargs(self) -> dict[str, Any]:
        return dict(self.cfg.kwargs)

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> gym.Env:
        kwargs = self.make_kwargs()
        if self.cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.cfg.max_episode_steps
        env = gym.make(self.cfg.id, render_mode=render_mode, **kwargs)
        env.action_space.seed(seed)
        return env


@dataclass
class CartPoleConfig(GymConfig):
    id: str = "CartPole-v1"


class CartPole(GymEnv):
    """CartPole-v1: balance a pole on a moving cart (classic control)."""

    Config = CartPoleConfig


@dataclass
class LunarLanderConfig(GymConfig):
    id: str = "LunarLander-v3"
    continuous: bool = False
    """Continuous engine throttles (Box actions, for SAC/TD3) instead of 4 discrete actions."""


class LunarLander(GymEnv):
    """LunarLander-v3: land a Box2D module on the pad; discrete or continuous actions."""

    Config = LunarLanderConfig

    def make_kwargs(self) -> dict[str, Any]:
        return {**self.cfg.kwargs, "continuous": bool(self.cfg.continuous)}


def check_env_id(env_id: str) -> None:
    """Fail early, with the closest registered ids, on an env id gymnasium does not know."""
    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f" Closest: {', '.join(close)}." if close else ""
    raise ValueError(f"Unknown gymnasium env id {env_id!r}.{hint}")
