"""Config schemas of the gymnasium env plugins: every key, its default and its description."""

# Optional[...] and Dict[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from framework.values import bounds


@dataclass
class GymConfig:
    id: str = "CartPole-v1"
    """A registered gymnasium env id."""
    n_envs: int = field(default=1, metadata=bounds(ge=1))
    """Parallel env instances an agent trains on."""
    max_episode_steps: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """Truncate episodes after this many steps (None: the env's own limit)."""
    kwargs: Dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gymnasium.make."""


@dataclass
class CartPoleConfig(GymConfig):
    id: str = "CartPole-v1"
    """The gymnasium env id (CartPole-v1)."""


@dataclass
class LunarLanderConfig(GymConfig):
    id: str = "LunarLander-v3"
    """The gymnasium env id (LunarLander-v3)."""
    continuous: bool = False
    """Continuous engine throttles (Box actions, for SAC/TD3) instead of 4 discrete actions."""


@dataclass
class AtariConfig:
    game: str = "Pong"
    """ALE game name, as in ALE/<game>-v5 (Pong, Breakout, SpaceInvaders, ...)."""
    n_envs: int = field(default=8, metadata=bounds(ge=1))
    """Parallel env instances an agent trains on."""
    frame_skip: int = field(default=4, metadata=bounds(ge=1))
    """Agent steps every k-th frame, repeating its action (max-pooled over the last two)."""
    noop_max: int = field(default=30, metadata=bounds(ge=0))
    """Up to this many no-op actions after each reset."""
    screen_size: int = field(default=84, metadata=bounds(ge=1))
    """Frames are resized to screen_size × screen_size."""
    grayscale: bool = True
    """Grayscale frames."""
    terminal_on_life_loss: bool = True
    """Training episodes end on a life lost (the game resets only at game over)."""
    clip_reward: bool = True
    """Training rewards are clipped to their sign."""
    frame_stack: int = field(default=4, metadata=bounds(ge=1))
    """Stack the last k frames in the observation (1: no stacking; buffer=memory_efficient stores each
    frame once, but needs the frames stacked here: its frame_history_len follows this)."""
    repeat_action_probability: float = field(default=0.25, metadata=bounds(ge=0, le=1))
    """Sticky actions (ALE v5 default 0.25)."""
    max_episode_steps: Optional[int] = field(default=27_000, metadata=bounds(ge=1))
    """Truncate after this many agent steps (108k frames at frame skip 4)."""
