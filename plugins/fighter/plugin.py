"""The `fighter` env plugin: config schema and env factory."""

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym

from .env import FightingEnv
from .rules import load_constants

TRANSPORTS = ("inprocess",)


@dataclass
class FighterConfig:
    opponent: str = "aggressive"
    """Scripted opponent: idle, random, aggressive or defensive."""
    transport: str = "inprocess"
    """Where the game runs: inprocess (the Python twin of the rules, no network)."""
    n_envs: int = 1
    """Parallel game instances an agent trains on."""
    damage_reward: float = 1.0
    """Reward per full health bar of damage dealt (and penalty per bar taken)."""
    win_reward: float = 1.0
    """Bonus for winning the round (its negative for losing; 0 for a draw)."""


class Fighter:
    """Fighter: a two-fighter fighting game; JavaScript rules with an identical Python twin."""

    Config = FighterConfig

    def __init__(self, cfg: FighterConfig) -> None:
        self.cfg = cfg
        opponents = load_constants()["opponents"]
        if cfg.opponent not in opponents:
            raise ValueError(
                f"env.opponent={cfg.opponent!r} is not valid; choose one of {', '.join(opponents)}"
            )
        if cfg.transport not in TRANSPORTS:
            raise ValueError(
                f"env.transport={cfg.transport!r} is not valid; choose one of {', '.join(TRANSPORTS)}"
            )
        if cfg.n_envs < 1:
            raise ValueError(f"env.n_envs={cfg.n_envs} must be at least 1")
        self.n_envs = cfg.n_envs

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> gym.Env:
        env = FightingEnv(
            opponent=self.cfg.opponent,
            damage_reward=self.cfg.damage_reward,
            win_reward=self.cfg.win_reward,
            render_mode=render_mode,
        )
        env.action_space.seed(seed)
        return env


def describe(env: Any) -> str:
    """The observation layout, one field per line (for the README and debugging)."""
    return "\n".join(f"{i:2d} {name}" for i, name in enumerate(env.observation_fields))
