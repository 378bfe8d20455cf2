"""Any registered gymnasium env by id, and the CartPole and LunarLander presets of it."""

import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import gymnasium as gym

from framework.errors import ConfigError, closest, did_you_mean

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
        check_env_kwargs(cfg.id, self.make_kwargs())

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

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        """The observation and action spaces of the envs it makes (one made and closed)."""
        return spaces_of(self)


class CartPole(GymEnv):
    """CartPole-v1: balance a pole on a moving cart (classic control)."""

    Config: ClassVar[type] = CartPoleConfig

    def episode_stat_names(self) -> tuple[str, ...]:
        """None: gymnasium's CartPole reports no episode stats (an episode's return is its length).
        (A gymnasium env by id, env=gym, may report its own: those are not known before it runs.)"""
        return ()


class LunarLander(GymEnv):
    """LunarLander-v3: land a Box2D module on the pad; discrete or continuous actions."""

    Config: ClassVar[type] = LunarLanderConfig

    def make_kwargs(self) -> dict[str, Any]:
        return {**self.cfg.kwargs, "continuous": bool(self.cfg.continuous)}

    def episode_stat_names(self) -> tuple[str, ...]:
        """None: gymnasium's LunarLander reports no episode stats."""
        return ()


def spaces_of(plugin: Any) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """An env plugin's spaces, from one env made and closed (a run's check, before it starts); an
    env its settings cannot make (gymnasium's own checks of its kwargs) is refused here, in one line."""
    try:
        env = plugin.make(seed=0, index=0)
    except Exception as e:  # gymnasium's envs check their arguments with assert or raise anything
        env_id = getattr(plugin, "env_id", None) or plugin.cfg.id
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"env {env_id} cannot be made with these settings: {reason}") from None
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


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


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse, before the run starts, an `env.kwargs` key the env's constructor does not take (it
    would fail the run when the first env is made)."""
    from gymnasium.envs.registration import load_env_creator

    entry = gym.spec(env_id).entry_point
    try:
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        parameters = inspect.signature(creator).parameters  # type: ignore[arg-type]
    except (ImportError, AttributeError, TypeError, ValueError):  # not ours to judge: gym.make will
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    valid = [name for name in parameters if name not in ("self", "render_mode")]
    for key in kwargs:
        if key not in valid:
            hint = did_you_mean(key, valid, prefix="env.kwargs.")
            raise ConfigError(
                f"env.kwargs.{key}: {env_id} takes no argument {key!r}.{hint} It takes: "
                f"{', '.join(valid) or 'none'}"
            )


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import EnvPlugin

    _gymenv_contract: type[EnvPlugin] = GymEnv
    _cartpole_contract: type[EnvPlugin] = CartPole
    _lunarlander_contract: type[EnvPlugin] = LunarLander
