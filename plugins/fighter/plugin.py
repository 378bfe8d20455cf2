"""The `fighter` env plugin: config schema and env factory."""

from typing import TYPE_CHECKING, Any, ClassVar, Optional

import gymnasium as gym

from framework.errors import ConfigError, check_choice

from .config import SIGNALING, TRANSPORTS, FighterConfig
from .env import FightingEnv
from .peerjs import PeerJSServer
from .rules import load_constants
from .transports import InProcessTransport, Transport, WebRTCTransport
from .vector import FighterVectorEnv


class Fighter:
    """Fighter: a two-fighter fighting game; JavaScript rules with an identical Python twin."""

    Config: ClassVar[type] = FighterConfig

    def __init__(self, cfg: FighterConfig) -> None:
        self.cfg = cfg
        check_choice("env.opponent", cfg.opponent, load_constants()["opponents"])
        check_choice("env.transport", cfg.transport, TRANSPORTS)
        check_choice("env.signaling", cfg.signaling, SIGNALING)
        try:
            self.peerjs = PeerJSServer(cfg.peerjs_url, cfg.peerjs_key) if cfg.signaling == "peerjs" else None
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if cfg.n_envs < 1:
            raise ConfigError(f"env.n_envs={cfg.n_envs} must be at least 1")
        self.n_envs = cfg.n_envs

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> gym.Env:
        cfg = self.cfg
        env = FightingEnv(
            opponent=cfg.opponent,
            damage_reward=cfg.damage_reward,
            win_reward=cfg.win_reward,
            render_mode=render_mode,
            transport=self._transport(first=index == 0 and not evaluation, evaluation=evaluation),
            reconnect_timeout_s=cfg.connect_timeout_s if cfg.reconnect else 0.0,
        )
        env.action_space.seed(seed)
        return env

    def make_vector(self, *, seed: int, n: int) -> FighterVectorEnv:
        """All `n` training arenas behind one connection (one page showing a grid of arenas)."""
        cfg = self.cfg
        return FighterVectorEnv(
            n,
            transport=self._transport(first=True),
            opponent=cfg.opponent,
            damage_reward=cfg.damage_reward,
            win_reward=cfg.win_reward,
            reconnect_timeout_s=cfg.connect_timeout_s if cfg.reconnect else 0.0,
        )

    def _transport(self, *, first: bool, evaluation: bool = False) -> Transport:
        cfg = self.cfg
        watched = cfg.transport == "browser" and not cfg.headless
        if cfg.transport == "inprocess" or (evaluation and watched):
            return InProcessTransport()
        return WebRTCTransport(
            cfg.transport,
            headless=cfg.headless,
            host=cfg.host,
            port=cfg.port if first else 0,
            connect_timeout_s=cfg.connect_timeout_s,
            step_timeout_s=cfg.step_timeout_s,
            heartbeat_timeout_s=cfg.heartbeat_timeout_s,
            peerjs=self.peerjs,
            open_browser=cfg.open_browser,
        )


def describe(env: Any) -> str:
    """The observation layout, one field per line (for the README and debugging)."""
    return "\n".join(f"{i:2d} {name}" for i, name in enumerate(env.observation_fields))


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import VectorEnvPlugin

    _fighter_contract: type[VectorEnvPlugin] = Fighter
