"""The `fighter` env plugin: config schema and env factory."""

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym

from .env import FightingEnv
from .peerjs import PeerJSServer
from .rules import load_constants
from .transports import InProcessTransport, Transport, WebRTCTransport
from .vector import FighterVectorEnv

TRANSPORTS = ("inprocess", "python", "browser")
SIGNALING = ("builtin", "peerjs")


@dataclass
class FighterConfig:
    opponent: str = "aggressive"
    """Scripted opponent: idle, random, aggressive or defensive."""
    transport: str = "browser"
    """Where the game runs: browser (the JavaScript game page over WebRTC), python (the twin behind
    an aiortc peer: WebRTC without a browser) or inprocess (the Python twin, no network)."""
    headless: bool = False
    """browser transport: false prints the page's URL and opens your browser (evaluation then plays
    on the in-process twin, so only one page is yours to watch); true launches a headless Chromium."""
    host: str = "127.0.0.1"
    """Address the game page and its signaling endpoint are served on."""
    port: int = 0
    """Port of the first training env's page (0: any free port); others take free ports."""
    signaling: str = "builtin"
    """How the game client reaches the trainer: builtin (the page server's offer/answer endpoint) or
    peerjs (through the PeerJS server at peerjs_url, with PeerJS ids, as PeerJS pages do)."""
    peerjs_url: str = "http://127.0.0.1:9000/"
    """signaling=peerjs: the PeerJS server (`npx peer --port 9000`), http://HOST:PORT/PATH."""
    peerjs_key: str = "peerjs"
    """signaling=peerjs: the PeerJS server's --key."""
    connect_timeout_s: float = 120.0
    """Longest wait for the game client to connect (and to reconnect after a page reload)."""
    step_timeout_s: float = 10.0
    """Longest wait for the game's answer to one step."""
    heartbeat_timeout_s: float = 2.0
    """A game client silent for this long is declared gone."""
    reconnect: bool = True
    """After a disconnect (a reloaded page), truncate the round and wait for the client to return."""
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
        if cfg.signaling not in SIGNALING:
            raise ValueError(
                f"env.signaling={cfg.signaling!r} is not valid; choose one of {', '.join(SIGNALING)}"
            )
        self.peerjs = PeerJSServer(cfg.peerjs_url, cfg.peerjs_key) if cfg.signaling == "peerjs" else None
        if cfg.n_envs < 1:
            raise ValueError(f"env.n_envs={cfg.n_envs} must be at least 1")
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
        )


def describe(env: Any) -> str:
    """The observation layout, one field per line (for the README and debugging)."""
    return "\n".join(f"{i:2d} {name}" for i, name in enumerate(env.observation_fields))
