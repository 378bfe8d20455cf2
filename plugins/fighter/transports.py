"""Where the game runs: in this process (the twin), or in a game client over WebRTC."""

from __future__ import annotations

import subprocess
import time
from typing import Any, Protocol

import numpy as np

from . import python_peer, rules
from .arenas import Arenas
from .browser import HeadlessChromium, open_in_users_browser
from .peerjs import PeerJSServer
from .protocol import ProtocolError, pack_game
from .webrtc import PeerGone, WebRTCClient


class Transport(Protocol):
    """n arenas behind one connection: one call carries every arena's action.

    Both calls return every arena's game state packed as protocol.pack_game does: an int64 array
    (arenas, GAME_WIRE_LENGTH), as it comes over the wire, ready for vectorised observations.
    """

    def reset(self, seeds: list[int], opponent: str, arenas: list[int] | None = None) -> np.ndarray: ...
    def step(self, actions: list[int]) -> np.ndarray: ...
    def reconnect(self, timeout: float) -> None: ...
    def close(self) -> None: ...


class InProcessTransport:
    """The Python twin of the rules, called directly: no network, fastest training."""

    def __init__(self) -> None:
        self.arenas = Arenas()
        self.episode = -1

    def reset(self, seeds: list[int], opponent: str, arenas: list[int] | None = None) -> np.ndarray:
        self.episode += 1
        return packed(self.arenas.handle(reset_message(self.episode, seeds, opponent, arenas)))

    def step(self, actions: list[int]) -> np.ndarray:
        message = {
            "type": "step",
            "episode": self.episode,
            "step": self.arenas.step_id + 1,
            "actions": actions,
        }
        return packed(self.arenas.handle(message))

    def reconnect(self, timeout: float) -> None:
        raise PeerGone("the in-process game cannot disconnect")

    def close(self) -> None:
        """Nothing to release."""


class WebRTCTransport:
    """A game client (the Python peer, or the browser page) over an RTCDataChannel."""

    def __init__(
        self,
        client: str,
        *,
        headless: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        connect_timeout_s: float = 30.0,
        step_timeout_s: float = 5.0,
        heartbeat_timeout_s: float = 2.0,
        peerjs: PeerJSServer | None = None,
    ) -> None:
        self.step_timeout_s = step_timeout_s
        self.connection = WebRTCClient(
            host=host,
            port=port,
            heartbeat_timeout_s=heartbeat_timeout_s,
            peerjs=peerjs,
            signaling_timeout_s=min(connect_timeout_s, 15.0),
        )
        self.episode = -1
        self.step_id = 0
        self.arena_count = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.browser: HeadlessChromium | None = None
        try:
            self._client, self._headless = client, headless
            self._start_client()
            self._wait_connected(connect_timeout_s)
        except BaseException:
            self.close()
            raise

    def _start_client(self) -> None:
        if self._client == "browser" and self._headless:
            self.browser = HeadlessChromium(self.connection.url)
        elif self._client == "browser":
            open_in_users_browser(self.connection.url)
        elif self._client == "python":
            self.process = python_peer.spawn(
                self.connection.client_args,
                self.connection.token,
                start_new_session=True,  # Ctrl-C stops the trainer, which then ends the game
            )
        else:
            raise ValueError(f"Unknown game client {self._client!r}; choose python or browser")

    def _wait_connected(self, timeout: float) -> None:
        """Wait for the client's hello, failing early if the process meant to send it dies."""
        deadline = time.monotonic() + timeout
        while not self.connection.connected.wait(0.2):
            if self.browser is not None:
                self.browser.check_alive()
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"The Python game peer exited with code {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"No game client connected to {self.connection.url} within {timeout:.0f} s"
                )

    @property
    def url(self) -> str:
        return self.connection.url

    def reset(self, seeds: list[int], opponent: str, arenas: list[int] | None = None) -> np.ndarray:
        self.episode += 1
        self.step_id = 0
        self.arena_count = len(seeds) if arenas is None else self.arena_count
        return self._request(reset_message(self.episode, seeds, opponent, arenas), self.arena_count)

    def step(self, actions: list[int]) -> np.ndarray:
        self.step_id += 1
        message = {"type": "step", "episode": self.episode, "step": self.step_id, "actions": actions}
        return self._request(message, len(actions))

    def reconnect(self, timeout: float) -> None:
        """Wait for the game client to come back (a reloaded page connects anew)."""
        self.connection.wait_connected(timeout)
        while not self.connection.inbox.empty():  # what the old connection left behind
            self.connection.inbox.get_nowait()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the peer exits when its stdin closes
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.browser is not None:
            self.browser.close()
        self.connection.close()

    def _request(self, message: dict[str, Any], arenas: int) -> np.ndarray:
        if not self.connection.connected.is_set():
            raise PeerGone("the game client is not connected")
        self.connection.send(message)
        deadline = time.monotonic() + self.step_timeout_s
        while True:
            kind, payload = self.connection.receive(timeout=max(0.0, deadline - time.monotonic()))
            if kind == "gone":
                raise PeerGone(f"the game client disconnected: {payload}")
            if kind == "error":
                raise ProtocolError(payload)
            if (payload["episode"], payload["step"]) != (self.episode, self.step_id):
                continue  # a late reply to an earlier request (before a reset): dropped
            packed = payload["games"]
            if len(packed) != arenas:
                raise ProtocolError(f"the game client answered for {len(packed)} arenas, not {arenas}")
            return np.array(packed, dtype=np.int64)  # decode() checked: GAME_WIRE_LENGTH ints each


def packed(games: list[rules.Game]) -> np.ndarray:
    return np.array([pack_game(g) for g in games], dtype=np.int64)


def reset_message(episode: int, seeds: list[int], opponent: str, arenas: list[int] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "reset", "episode": episode, "seeds": seeds, "opponent": opponent}
    if arenas is not None:
        message["arenas"] = arenas
    return message
