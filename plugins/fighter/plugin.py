"""The `fighter` env plugin: config schema and env factory."""

import errno
import ipaddress
import socket
import threading
import weakref
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import gymnasium as gym

from framework.errors import ConfigError, check_choice
from framework_plugins.web.ports import browser_blocked

from .browser import NO_CHROMIUM, find_chromium
from .config import SIGNALING, TRANSPORTS, FighterConfig
from .env import EPISODE_STATS, BestRoundReplay, FightingEnv
from .peerjs import PeerJSServer, check_server
from .protocol import MAX_ARENAS
from .rules import load_constants
from .transports import InProcessTransport, Transport, WebRTCTransport
from .vector import FighterVectorEnv

#: Longest wait for the PeerJS server's answer when a run checks it before it starts.
PEERJS_CHECK_S = 10.0


def _check_address(host: str, port: int) -> None:
    """A ConfigError where the page cannot be served at `host`:`port` (not an address of this machine's,
    a port taken; port 0 is any free one)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        raise ConfigError(
            f"env.host={host!r} is not an IP address: give one of this machine's (127.0.0.1, the "
            "default, or 0.0.0.0 for all of them)"
        ) from None
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the page's server binds
            probe.bind((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"env.port={port}: {host}:{port} is in use (another run's?): give another port, or "
                "env.port=0 for any free one"
            ) from None
        raise ConfigError(
            f"env.host={host}: {host}:{port} cannot be served here ({e.strerror or e}): give an address "
            "of this machine (127.0.0.1, the default, or 0.0.0.0 for all of them)"
        ) from None


class Fighter:
    """Fighter: a two-fighter fighting game; JavaScript rules with an identical Python twin."""

    Config: ClassVar[type] = FighterConfig

    def __init__(self, cfg: FighterConfig) -> None:
        self.cfg = cfg
        opponents = load_constants()["opponents"]
        check_choice("env.opponent", cfg.opponent, opponents)
        for name in cfg.eval_opponents:
            check_choice("env.eval_opponents", name, opponents)
        if len(set(cfg.eval_opponents)) != len(cfg.eval_opponents):
            raise ConfigError(f"env.eval_opponents={list(cfg.eval_opponents)} names an opponent twice")
        check_choice("env.transport", cfg.transport, TRANSPORTS)
        check_choice("env.signaling", cfg.signaling, SIGNALING)
        try:
            self.peerjs = PeerJSServer(cfg.peerjs_url, cfg.peerjs_key) if cfg.signaling == "peerjs" else None
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if cfg.n_envs < 1:
            raise ConfigError(f"env.n_envs={cfg.n_envs} must be at least 1")
        if cfg.transport != "inprocess":  # what the game's client needs, said before the run starts
            if cfg.n_envs > MAX_ARENAS:
                raise ConfigError(
                    f"env.n_envs={cfg.n_envs}: a game client plays at most {MAX_ARENAS} arenas "
                    f"(env.transport={cfg.transport}); give at most {MAX_ARENAS}, or env.transport=inprocess"
                )
            if blocked := browser_blocked("env.port", cfg.port):
                raise ConfigError(blocked.replace("env.port ", "env.port=", 1))
            _check_address(cfg.host, cfg.port)
            if cfg.transport == "browser" and cfg.headless and find_chromium() is None:
                raise ConfigError(NO_CHROMIUM)
            if self.peerjs is not None:
                check_server(self.peerjs, timeout=min(float(cfg.connect_timeout_s), PEERJS_CHECK_S))
        self.n_envs = cfg.n_envs
        self._training: weakref.WeakSet[WebRTCTransport] = weakref.WeakSet()
        self._stop: threading.Event | None = None
        self._start_step = 0

    def watch_run(self, stop: threading.Event, *, start_step: int) -> None:
        """The run's stop flag (the first Ctrl-C, SIGTERM, a pruner set it): with it, a game page
        told that training is over can say whether the run finished or was stopped; and the step the
        run starts at, from which the page counts (a resumed run's steps go on from its last)."""
        self._stop, self._start_step = stop, start_step
        for transport in self._training:
            transport.stop_flag = stop

    @property
    def eval_variants(self) -> tuple[str, ...]:
        """One evaluation per opponent in `eval_opponents`."""
        return tuple(self.cfg.eval_opponents)

    def episode_stat_names(self) -> tuple[str, ...]:
        """What each round reports as it ends (`env.round_info`)."""
        return EPISODE_STATS

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
        if not evaluation:
            return env
        self._evaluating()
        return BestRoundReplay(env)

    def make_variant(self, variant: str, *, seed: int) -> BestRoundReplay:
        """An evaluation env against the opponent `variant`, on the in-process twin (evaluation
        measures the policy, not the wire, and the twin plays identically, only faster)."""
        cfg = self.cfg
        env = FightingEnv(
            opponent=variant,
            damage_reward=cfg.damage_reward,
            win_reward=cfg.win_reward,
            transport=InProcessTransport(),
        )
        env.action_space.seed(seed)
        self._evaluating()
        return BestRoundReplay(env)

    def _evaluating(self) -> None:
        """The pages of the training transports say the trainer evaluates (its next step says
        training again), so that a game standing still for it is explained."""
        for transport in self._training:
            transport.set_phase("evaluating")

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
        if cfg.transport == "inprocess" or evaluation:  # evaluation measures the policy, not the wire
            return InProcessTransport()
        transport = WebRTCTransport(
            cfg.transport,
            headless=cfg.headless,
            host=cfg.host,
            port=cfg.port if first else 0,
            connect_timeout_s=cfg.connect_timeout_s,
            step_timeout_s=cfg.step_timeout_s,
            heartbeat_timeout_s=cfg.heartbeat_timeout_s,
            peerjs=self.peerjs,
            open_browser=cfg.open_browser,
            pin_chromium=cfg.pin_chromium,
            stop_flag=self._stop,
        )
        transport.connection.status["steps"] = self._start_step
        self._training.add(transport)
        return transport


def describe(env: Any) -> str:
    """The observation layout, one field per line (for the README and debugging)."""
    return "\n".join(f"{i:2d} {name}" for i, name in enumerate(env.observation_fields))


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import BestEpisodeReplay, RunWatchingEnvPlugin, VariantEnvPlugin, VectorEnvPlugin

    _fighter_contract: type[VectorEnvPlugin] = Fighter
    _stop_contract: type[RunWatchingEnvPlugin] = Fighter
    _variant_contract: type[VariantEnvPlugin] = Fighter
    _replay_contract: type[BestEpisodeReplay] = BestRoundReplay
