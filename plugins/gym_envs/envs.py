"""Any registered gymnasium env by id, and the CartPole and LunarLander presets of it."""

from typing import TYPE_CHECKING, Any, ClassVar, Optional

import gymnasium as gym

from framework.errors import ConfigError, closest

from .config import CartPoleConfig, GymConfig, LunarLanderConfig


class GymEnv:
    """Any registered gymnasium environment, by id (env=gym env.id=Acrobot-v1)."""

    Config: ClassVar[type] = GymConfig

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.n_envs = int(cfg.n_envs)
        if self.n_envs < 1:
            raise ConfigError(f"env.n_envs={self.n_envs} must be at least 1")
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


class CartPole(GymEnv):
    """CartPole-v1: balance a pole on a moving cart (classic control)."""

    Config: ClassVar[type] = CartPoleConfig


class LunarLander(GymEnv):
    """LunarLander-v3: land a Box2D module on the pad; discrete or continuous actions."""

    Config: ClassVar[type] = LunarLanderConfig

    def make_kwargs(self) -> dict[str, Any]:
        return {**self.cfg.kwargs, "continuous": bool(self.cfg.continuous)}


def check_env_id(env_id: str) -> None:
    """Fail early, with the closest registered ids, on an env id gymnasium does not know."""
    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    if env_id in gym.registry:
        return
    close = closest(env_id, list(gym.registry), n=3, always=True)
    hint = f" Closest: {', '.join(close)}." if close else ""
    raise ConfigError(f"Unknown gymnasium env id env.id={env_id!r}.{hint}")


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import EnvPlugin

    _gymenv_contract: type[EnvPlugin] = GymEnv
    _cartpole_contract: type[EnvPlugin] = CartPole
    _lunarlander_contract: type[EnvPlugin] = LunarLander
