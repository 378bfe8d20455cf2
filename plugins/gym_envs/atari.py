"""Atari games through ale-py, with the standard DQN preprocessing."""

from typing import TYPE_CHECKING, Any, ClassVar, Optional, SupportsFloat

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from framework.errors import ConfigError, closest

from .config import AtariConfig
from .envs import spaces_of

gym.register_envs(ale_py)
# The emulator's banner ("A.L.E: Arcade Learning Environment ... [Powered by Stella]") is not news.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)


class Atari:
    """Atari 2600 games (ALE): noop reset, frame skip, 84×84 grayscale, episodic life, clipping."""

    Config: ClassVar[type] = AtariConfig

    def __init__(self, cfg: AtariConfig) -> None:
        self.cfg = cfg
        self.n_envs = int(cfg.n_envs)
        self.env_id = f"ALE/{cfg.game}-v5"
        if self.env_id not in gym.registry:
            games = sorted(k[4:-3] for k in gym.registry if k.startswith("ALE/") and k.endswith("-v5"))
            spelt = {g.lower(): g for g in games}.get(str(cfg.game).lower().replace("_", ""))
            if spelt is not None:  # the list of every game says nothing more
                raise ConfigError(f"Unknown Atari game env.game={cfg.game!r}: it is spelt env.game={spelt}")
            close = closest(cfg.game, games, n=3, always=True)
            raise ConfigError(
                f"Unknown Atari game env.game={cfg.game!r}. Closest: {', '.join(close)}. "
                f"All {len(games)} that ship with ale-py: {', '.join(games)}."
            )

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> gym.Env:
        cfg = self.cfg
        env = gym.make(
            self.env_id,
            frameskip=1,
            repeat_action_probability=cfg.repeat_action_probability,
            render_mode=render_mode,
            max_episode_steps=cfg.max_episode_steps * cfg.frame_skip if cfg.max_episode_steps else None,
        )
        env = AtariPreprocessing(
            env,
            noop_max=cfg.noop_max,
            frame_skip=cfg.frame_skip,
            screen_size=cfg.screen_size,
            grayscale_obs=cfg.grayscale,
        )
        if (cfg.terminal_on_life_loss or cfg.clip_reward) and not evaluation:
            env = GameScore(env)  # inside the lives and the clipping: the game's own score
        if cfg.terminal_on_life_loss and not evaluation:
            env = EpisodicLife(env)
        if "FIRE" in _ale_env(env).get_action_meanings():
            env = FireReset(env)
        if cfg.clip_reward and not evaluation:
            env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(float(r))))
        if cfg.frame_stack > 1:
            env = FrameStackObservation(env, cfg.frame_stack)
        env.action_space.seed(seed)
        return env

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        """The observation and action spaces of the envs it makes (one made and closed)."""
        return spaces_of(self)

    def episode_stat_names(self) -> tuple[str, ...]:
        """None: ALE's envs report no episode stats (a game's score is its return)."""
        return ()


class GameScore(gym.Wrapper):
    """A training env's whole game, reported as its episode ends (`episode_stats`: rollout/game_score
    and rollout/game_length): a lost life ends a training episode and its rewards are clipped, so
    rollout/ep_rew_mean is not the score that eval/return_mean and SB3's Atari curves are."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.score, self.length = 0.0, 0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.length += 1
        if terminated or truncated:
            info = {**info, "episode_stats": {"game_score": self.score, "game_length": float(self.length)}}
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.score, self.length = 0.0, 0
        return self.env.reset(**kwargs)


class EpisodicLife(gym.Wrapper):
    """A lost life ends the training episode; the game itself resets only when it is over."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _ale_env(self.env).ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = _ale_env(self.env).ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE to start, for games that wait for it: after each reset and each lost life."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        self.lives = _ale_env(self.env).ale.lives()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = _ale_env(self.env).ale.lives()
        if lives < self.lives and not (terminated or truncated):
            # Without episodic life (evaluation), the game would wait for FIRE forever.
            obs, extra, terminated, truncated, info = self.env.step(1)
            reward = float(reward) + float(extra)
        self.lives = lives
        return obs, reward, terminated, truncated, info


def _ale_env(env: gym.Env) -> Any:
    """The underlying AtariEnv, whose `ale` interface knows lives and action meanings."""
    return env.unwrapped


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import EnvPlugin

    _atari_contract: type[EnvPlugin] = Atari
