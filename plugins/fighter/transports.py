"""Where the game runs: in this process (the twin), or in a game client over WebRTC."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import threading
import time
from typing import Any, Protocol

import numpy as np

from . import python_peer, rules
from .arenas import Arenas
from .browser import HeadlessChromium, open_in_users_browser
from .ending import run_ending
from .peerjs import PeerJSServer
from .protocol import GAME_KEYS, ProtocolError, pack_game
from .webrtc import PeerGone, WebRTCClient

log = logging.getLogger(__name__)
DONE, WINNER = GAME_KEYS.index("done"), GAME_KEYS.index("winner")


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
    """A game client (the Python peer, or the browser page) over an RTCDataChannel.

    When the client is lost: a client this transport started (the Python peer, a headless
    Chromium) is started anew at once, since nothing else would ever come back; the user's own
    page is waited for, saying so, for `reconnect`'s timeout, after which the run stops with one
    message (`ClientLost`). Closing tells the client how the run ended (`ending.run_ending`).
    """

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
        open_browser: bool = True,
        pin_chromium: bool = True,
        stop_flag: threading.Event | None = None,
    ) -> None:
        self.step_timeout_s = step_timeout_s
        self.connect_timeout_s = connect_timeout_s
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
        self.restarts = 0
        """Times the client this transport owns was started anew after it was lost."""
        self.lost_reasons: list[str] = []
        """Why each client was lost, in order."""
        self.process: subprocess.Popen[bytes] | None = None
        self.browser: HeadlessChromium | None = None
        self._client, self._headless, self._open_browser = client, headless, open_browser
        self._pin_chromium = pin_chromium
        self._rounds = [0, 0, 0]
        self.stop_flag = stop_flag
        """The run's stop flag, where the plugin was given it: a close without an error after it
        was set is a stopped run, before it a finished one; a wait for the client ends once it is set."""
        try:
            self._start_client()
            self._wait_connected(connect_timeout_s)
        except (RuntimeError, TimeoutError) as e:  # the client did not come: the run says so in a line
            self.close()
            raise ClientLost(str(e)) from None
        except BaseException:
            self.close()
            raise
        self._generation = self.connection.generation
        self.connection.status["phase"] = "starting"  # "training" from the first step on

    @property
    def owns_client(self) -> bool:
        """Whether the game client is this transport's own (the Python peer, a headless Chromium)."""
        return self._client == "python" or self._headless

    def _start_client(self) -> None:
        if self._client == "browser" and self._headless:
            self.browser = HeadlessChromium(self.connection.url, pin=self._pin_chromium)
        elif self._client == "browser":
            open_in_users_browser(
                self.connection.url, self.connection.public_url, open_browser=self._open_browser
            )
        elif self._client == "python":
            self.process = python_peer.spawn(
                self.connection.client_args,
                self.connection.token,
                start_new_session=True,  # Ctrl-C stops the trainer, which then ends the game
            )
        else:
            raise ValueError(f"Unknown game client {self._client!r}; choose python or browser")

    def _stop_client(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                assert self.process.stdin is not None
                with contextlib.suppress(OSError):
                    self.process.stdin.close()  # the peer exits when its stdin closes
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=5)
            self.process = None
        if self.browser is not None:
            self.browser.close()
            self.browser = None

    def _client_died(self) -> str:
        """Why the client this transport started is gone ('' while it runs)."""
        if self.process is not None and self.process.poll() is not None:
            return f"the Python game peer exited with code {self.process.returncode}"
        if self.browser is not None and not self.browser.alive():
            return f"the headless Chromium exited with code {self.browser.returncode}"
        return ""

    def _wait_connected(self, timeout: float) -> None:
        """Wait for the client's hello, failing early if the process meant to send it dies."""
        deadline = time.monotonic() + timeout
        while not self.connection.connected.wait(0.2):
            self._stop_if_asked()
            problem = self.connection.signaling_problem  # e.g. the PeerJS server is gone
            why = f" ({problem})" if problem else ""
            if self.browser is not None:
                self.browser.check_alive()
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"The Python game peer exited with code {self.process.returncode}{why}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"No game client connected to {self.connection.public_url} within {timeout:.0f} s{why}"
                )

    @property
    def url(self) -> str:
        return self.connection.url

    def set_phase(self, phase: str) -> None:
        """What the page shows the trainer doing (protocol.PHASES); a step sets "training" again."""
        self.connection.status["phase"] = phase

    def reset(self, seeds: list[int], opponent: str, arenas: list[int] | None = None) -> np.ndarray:
        self.episode += 1
        self.step_id = 0
        self.arena_count = len(seeds) if arenas is None else self.arena_count
        return self._request(reset_message(self.episode, seeds, opponent, arenas), self.arena_count)

    def step(self, actions: list[int]) -> np.ndarray:
        self.step_id += 1
        message = {"type": "step", "episode": self.episode, "step": self.step_id, "actions": actions}
        games = self._request(message, len(actions))
        self._count(games)
        return games

    def _count(self, games: np.ndarray) -> None:
        """The page's figures: env steps as the trainer counts them, and the rounds that ended."""
        status = self.connection.status
        status["phase"] = "training"
        status["steps"] += len(games)
        ended = games[:, DONE] != 0
        if ended.any():
            winners = games[ended, WINNER]
            self._rounds = [
                self._rounds[0] + int((winners == 0).sum()),
                self._rounds[1] + int((winners == 1).sum()),
                self._rounds[2] + int((winners == -1).sum()),
            ]
            status["rounds"] = list(self._rounds)

    def reconnect(self, timeout: float) -> None:
        """After the client was lost: go on with a client that took over, start our own client
        anew, or wait for the user's page to come back (at most `timeout`, saying so)."""
        reason = self.connection.lost_reason or "it disconnected"
        self.lost_reasons.append(reason)
        if self.connection.connected.is_set():  # another client took over: ours was told to go
            self._stop_client()
        elif self.owns_client:
            self._restart_client(reason)
        else:
            self._wait_for_page(reason, timeout)
        self._generation = self.connection.generation  # what earlier clients left in the inbox is dropped

    def _restart_client(self, reason: str) -> None:
        what = "the Python game peer" if self._client == "python" else "the headless Chromium page"
        died = self._client_died()
        log.warning("lost %s (%s); starting a new one", what, died or reason)
        self.connection.status["phase"] = "waiting"
        self._stop_client()
        self.restarts += 1
        self._start_client()
        try:
            self._wait_connected(self.connect_timeout_s)
        except (RuntimeError, TimeoutError) as e:
            raise ClientLost(
                f"{what} was lost ({died or reason}) and a new one did not connect: {e}"
            ) from None
        log.warning("%s is back (restart %d); the round in progress ended truncated", what, self.restarts)

    def _wait_for_page(self, reason: str, timeout: float) -> None:
        self.connection.status["phase"] = "waiting"
        if timeout <= 0:
            raise ClientLost(f"the game page at {self.connection.public_url} disconnected ({reason})")
        log.warning(
            "the game page disconnected (%s); waiting up to %.0f s (env.connect_timeout_s) for it to come "
            "back at %s: it reconnects by itself, or reload it",
            reason,
            timeout,
            self.connection.public_url,
        )
        deadline = time.monotonic() + timeout
        while not self.connection.connected.wait(min(0.2, max(deadline - time.monotonic(), 0.0))):
            self._stop_if_asked()
            if time.monotonic() < deadline:
                continue
            raise ClientLost(
                f"the game page at {self.connection.public_url} disconnected ({reason}) and did not come "
                f"back within {timeout:.0f} s (env.connect_timeout_s); training stopped"
            )
        log.warning("the game page is back; the round in progress ended truncated")

    def _stop_if_asked(self) -> None:
        """A run stopped (Ctrl-C, SIGTERM) while it waits for its client stops there: no step is
        coming for the stop to land after."""
        if self.stop_flag is not None and self.stop_flag.is_set():
            raise KeyboardInterrupt

    def close(self) -> None:
        ending = run_ending(self.stop_flag)  # first: the exception closing the env is still at hand
        self.connection.stop_watching()  # a client that takes a while to end is not "lost"
        self.connection.end(ending, int(self.connection.status["steps"]))
        self._stop_client()
        self.connection.close()

    def _request(self, message: dict[str, Any], arenas: int) -> np.ndarray:
        if not self.connection.connected.is_set():
            raise PeerGone(f"the game client is not connected ({self.connection.lost_reason or 'not yet'})")
        if self.connection.generation != self._generation:  # nothing for a new client before reconnect()
            raise PeerGone("another game client took over the connection")
        self.connection.send(message, self._generation)
        deadline = time.monotonic() + self.step_timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                # Short waits, so that a client process of ours that died is noticed at once.
                kind, payload = self.connection.receive(min(0.5, max(0.0, left)), self._generation)
            except TimeoutError:
                died = self._client_died()
                if died:
                    self.connection.drop(died)
                    raise PeerGone(died) from None
                if left <= 0:  # alive but not answering: as good as gone
                    reason = (
                        f"it did not answer a {message['type']} within {self.step_timeout_s:g} s "
                        "(env.step_timeout_s)"
                    )
                    self.connection.drop(reason)
                    raise PeerGone(
                        f"the game client ({self.connection.client_kind}) was dropped: {reason}"
                    ) from None
                continue
            if kind == "gone":
                raise PeerGone(f"the game client disconnected: {payload}")
            if kind == "error":
                raise ProtocolError(payload)
            if (payload["episode"], payload["step"]) != (self.episode, self.step_id):
                continue  # a late reply to an earlier request (before a reset): dropped
            packed = payload["games"]
            if len(packed) != arenas:
                raise ProtocolError(f"the game client answered for {len(packed)} arenas, not {arenas}")
            return np.array(packed, dtype=np.int64)  # decode() checked every field's range


class ClientLost(PeerGone):
    """The game client is gone for good: the run stops, saying why in one message."""


def packed(games: list[rules.Game]) -> np.ndarray:
    return np.array([pack_game(g) for g in games], dtype=np.int64)


def reset_message(episode: int, seeds: list[int], opponent: str, arenas: list[int] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "reset", "episode": episode, "seeds": seeds, "opponent": opponent}
    if arenas is not None:
        message["arenas"] = arenas
    return message
