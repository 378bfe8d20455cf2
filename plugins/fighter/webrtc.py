"""WebRTCClient: the trainer's side of the game connection, an asyncio loop in its own thread.

The thread runs the page server (signaling.py: the game page, its static files and the offers of
game clients, all behind a per-run token) and the aiortc peer connection of this session.
The synchronous env never touches the loop except through `call_soon_threadsafe` (to send)
and a thread-safe queue (to receive): a `channel.send()` from the training thread would
silently never be delivered. An application-level heartbeat notices a dead or frozen game
within `heartbeat_timeout_s` (aiortc alone notices only after about 30 s).

One game client at a time: a new client (a reloaded page, a second tab) takes over only once
its offer has been checked and its data channel has said hello; the client it replaces is told
so and dropped. A client that sends a malformed message, or floods the trainer with messages it
did not ask for, is dropped, saying why; what happens next is the transport's choice. At the end
of a run the client is told how it ended (`end`) before the connection closes, so that a page
says so instead of trying to reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from typing import Any

from framework.errors import ExplainedError

from .peerjs import PeerJSServer
from .protocol import ProtocolError, decode, encode
from .signaling import Signaling, check_offer_sdp

log = logging.getLogger(__name__)
#: Unsolicited messages (answers to nothing asked) a client may send within a second before it
#: is dropped for flooding: a late reply or two is normal, hundreds a second are not.
FLOOD_LIMIT = 50
#: The trainer's phase turns to "updating" once it has asked for no step for this long.
IDLE_S = 0.5
#: Longest wait for a client told the run has ended to close its side (it then has the message).
ENDED_WAIT_S = 2.0


class PeerGone(ExplainedError):
    """The game client disconnected, stopped answering, closed its data channel or was dropped
    (its message says which; a run that cannot go on without it stops with that message)."""


class WebRTCClient:
    """Serves the game and exchanges protocol messages with one game client."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        heartbeat_interval_s: float = 0.25,
        heartbeat_timeout_s: float = 2.0,
        peerjs: PeerJSServer | None = None,
        signaling_timeout_s: float = 15.0,
    ) -> None:
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.signaling_timeout_s = signaling_timeout_s
        self.signaling = Signaling(
            self._accept, host=host, peerjs=peerjs, timeout_s=signaling_timeout_s, loggers=[log]
        )
        self._loop = self.signaling.server.loop
        self.inbox: queue.Queue[tuple[int, str, Any]] = queue.Queue()
        """(generation, kind, payload): each event says which client's it is."""
        self.connected = threading.Event()
        self.client_kind = ""
        self.lost_reason = ""
        """Why the last client went (empty while none has)."""
        self.takeovers = 0
        """Clients that took the connection over from a live one."""
        self.generation = 0
        """Counts the clients that connected: a transport that sees it change knows its client did."""
        self.status: dict[str, Any] = {"phase": "starting", "steps": 0, "rounds": [0, 0, 0]}
        """What the trainer is doing, for the page: the transport sets phase, steps and rounds."""
        self.last_request = 0.0
        self._pc: Any = None
        self._channel: Any = None
        self._candidates: set[Any] = set()
        self._last_pong = 0.0
        self._ping_id = 0
        self._owed = 0
        self._unsolicited: list[float] = []
        self._rate_mark = (time.monotonic(), 0)
        self._steps_per_s = 0.0
        self._sent_status: tuple[Any, ...] = ()
        self._status_at = 0.0
        self._heartbeat_task: asyncio.Task[None] | None = None
        try:
            self.signaling.start(port)
            self._heartbeat_task = self._call(self._start_heartbeat(), timeout=5)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """The game page, token included: shown to its user once, never logged."""
        return self.signaling.url

    @property
    def public_url(self) -> str:
        """The game page's address without its token, for messages and logs."""
        return self.signaling.public_url

    @property
    def client_args(self) -> list[str]:
        return self.signaling.client_args

    @property
    def offer_url(self) -> str:
        return self.signaling.offer_url

    @property
    def token(self) -> str:
        return self.signaling.server.token

    @property
    def port(self) -> int:
        return self.signaling.server.port

    @property
    def peer_id(self) -> str:
        """This trainer's id at the PeerJS server ('' without one)."""
        return self.signaling.peer_id

    @property
    def signaling_problem(self) -> str:
        """Why no new client can reach this trainer now (the PeerJS server is gone); empty when one can."""
        return self.signaling.problem

    # --- the synchronous side -------------------------------------------------------------

    def send(self, message: dict[str, Any], generation: int) -> None:
        """Send a message to the client of `generation`; a reset, step or ping is owed an answer (see
        the flood check). A client that took over meanwhile is not sent what was meant for the last one."""
        text = encode(message)
        owed = message["type"] in ("reset", "step", "ping")
        if message["type"] in ("reset", "step"):
            self.last_request = time.monotonic()
        self._loop.call_soon_threadsafe(self._send_now, text, owed, generation)

    def receive(self, timeout: float, generation: int) -> tuple[str, Any]:
        """The next event of the client of `generation`: ("result" | "error" | "gone", payload); an
        earlier client's, left in the inbox as another took over, is dropped."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                of, kind, payload = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"No answer from the game client within {timeout:.1f} s") from None
            if of == generation:
                return kind, payload

    def drop(self, reason: str) -> None:
        """Drop the current client (the transport gives up on it), saying why to the log."""
        with contextlib.suppress(Exception):
            self._call(self._drop_connection(reason), timeout=10)

    def end(self, status: str, steps: int, timeout: float = ENDED_WAIT_S) -> bool:
        """Tell the client the run has ended and how (protocol.ENDINGS), then wait at most `timeout`
        for it to close its side; True if it did. From here on its going is no news."""
        # Held to the protocol's schema as a client will hold it (a status outside ENDINGS raises).
        text = encode(decode(encode({"type": "ended", "status": status, "steps": steps}), allowed=("ended",)))
        if not self._loop.is_running():  # closed already
            return False
        try:
            return bool(self._call(self._say_ended(text, timeout), timeout=timeout + 5))
        except Exception:  # the loop is gone or stuck: the connection closes all the same
            return False

    def stop_watching(self) -> None:
        """Stop the heartbeat: the client is being ended on purpose, and its silence is no news."""
        task = self._heartbeat_task
        if task is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(task.cancel)

    def close(self) -> None:
        self.signaling.server.close(self._shutdown)

    def _call(self, coro: Any, *, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # --- the asyncio side: answering an offer -------------------------------------------------

    async def _accept(self, offer_sdp: object) -> Any:
        """Answer a checked offer with a new peer connection, a candidate: the live client keeps
        the connection until the new one's data channel says hello (see `_promote`)."""
        from aiortc import RTCPeerConnection, RTCSessionDescription

        sdp = check_offer_sdp(offer_sdp)
        pc = RTCPeerConnection()
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
            await pc.setLocalDescription(await pc.createAnswer())
        except Exception as e:  # an offer aiortc cannot answer: refused, the live client untouched
            await pc.close()
            raise ProtocolError(f"the offer cannot be answered: {type(e).__name__}: {str(e)[:160]}") from None
        self._candidates.add(pc)
        pc.on("datachannel", lambda channel: self._attach(pc, channel))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                if pc is self._pc:
                    await self._drop_connection(f"the peer connection {pc.connectionState}")
                elif pc in self._candidates:
                    self._candidates.discard(pc)
                    await pc.close()

        self._loop.call_later(self.signaling_timeout_s, self._expire, pc)
        return pc

    def _expire(self, pc: Any) -> None:
        """A candidate that has not said hello in time is closed (the live client never noticed)."""
        if pc in self._candidates:
            self._candidates.discard(pc)
            log.warning("a game client's offer was answered but it never said hello; closed it")
            self._loop.create_task(pc.close())

    # --- the asyncio side: the data channel -----------------------------------------------------

    def _attach(self, pc: Any, channel: Any) -> None:
        @channel.on("message")
        def on_message(raw: str | bytes) -> None:
            if pc is self._pc and channel is self._channel:
                self._on_message(raw)
            elif pc in self._candidates:
                self._on_candidate_message(pc, channel, raw)

        @channel.on("close")
        def on_close() -> None:
            if channel is self._channel:
                self._lost("the data channel closed")

    def _on_candidate_message(self, pc: Any, channel: Any, raw: str | bytes) -> None:
        """A new client's first message must be its hello; anything else closes it."""
        self._candidates.discard(pc)
        try:
            message = decode(raw, allowed=("hello",))
        except ProtocolError as e:
            log.warning("a new game client's first message was not a hello (%s); closed it", e)
            self._loop.create_task(pc.close())
            return
        self._loop.create_task(self._promote(pc, channel, message["client"]))

    async def _promote(self, pc: Any, channel: Any, kind: str) -> None:
        old = self._pc
        if old is not None:
            if self._channel is not None and self._channel.readyState == "open":
                text = "another page took over the connection to the trainer: one game page at a time"
                self._channel.send(encode({"type": "replaced", "message": text}))
            log.warning(
                "a new game client (%s) took over the connection; the previous one was told and dropped", kind
            )
            self._pc = None
            self._lost(f"another game client ({kind}) took over the connection")
            # Closed a moment later, so that the replaced message gets out first.
            self._loop.call_later(0.5, lambda: self._loop.create_task(old.close()))
        self._pc, self._channel, self.client_kind = pc, channel, kind
        self.generation += 1
        self.takeovers += old is not None
        self._last_pong = time.monotonic()
        self._owed, self._unsolicited = 0, []
        self.lost_reason = ""
        self._sent_status = ()
        self.connected.set()
        self._send_status(force=True)

    def _on_message(self, raw: str | bytes) -> None:
        try:
            message = decode(raw, allowed=("hello", "result", "pong", "error"))
        except ProtocolError as e:
            self._loop.create_task(self._drop_connection(f"it sent a malformed message: {e}"))
            return
        self._last_pong = time.monotonic()  # any message shows the client is alive
        kind = message["type"]
        if kind == "hello" or not self._owed:
            self._flooded(kind)
            return
        self._owed -= 1
        if kind == "result":
            self.inbox.put((self.generation, "result", message))
        elif kind == "error":
            reported = f"the game client ({self.client_kind}) reported: {message['message']}"
            self.inbox.put((self.generation, "error", reported))

    def _flooded(self, kind: str) -> None:
        """Count an unsolicited message; too many within a second drop the client."""
        now = time.monotonic()
        self._unsolicited = [t for t in self._unsolicited if now - t < 1.0]
        self._unsolicited.append(now)
        if len(self._unsolicited) > FLOOD_LIMIT:
            self._unsolicited = []
            reason = (
                f"it sent more than {FLOOD_LIMIT} unsolicited messages within a second (the last a {kind})"
            )
            self._loop.create_task(self._drop_connection(reason))

    def _send_now(self, text: str, owed: bool, generation: int) -> None:
        channel = self._channel
        if channel is not None and channel.readyState == "open" and generation == self.generation:
            channel.send(text)
            self._owed += owed

    def _lost(self, reason: str) -> None:
        if self.connected.is_set():
            self.connected.clear()
            self._channel = None
            self.lost_reason = reason
            self.inbox.put((self.generation, "gone", reason))

    async def _drop_connection(self, reason: str) -> None:
        pc, self._pc = self._pc, None
        if pc is None:
            return
        if self.connected.is_set():
            log.warning("dropped the game client (%s): %s", self.client_kind or "unknown", reason)
        self._lost(reason)
        await pc.close()

    # --- the asyncio side: heartbeat and status ---------------------------------------------------

    async def _start_heartbeat(self) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._heartbeat())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            if not self.connected.is_set():
                continue
            silent = time.monotonic() - self._last_pong
            if silent > self.heartbeat_timeout_s:
                await self._drop_connection(f"no heartbeat from the game client for {silent:.1f} s")
                continue
            self._ping_id += 1
            self._send_now(encode({"type": "ping", "id": self._ping_id}), True, self.generation)
            self._send_status()

    def _send_status(self, *, force: bool = False) -> None:
        """Tell the page what the trainer is doing: on a change of phase, else once a second."""
        now = time.monotonic()
        status = dict(self.status)
        if status["phase"] == "training" and status["steps"] > 0 and now - self.last_request > IDLE_S:
            status["phase"] = "updating"  # asking for no steps: learning from what it collected
        t0, s0 = self._rate_mark
        if now - t0 >= 1.0:
            # Steps/s while stepping: a window's idle end (an update, an evaluation) does not count.
            busy = min(now, self.last_request + self.heartbeat_interval_s) - t0
            if status["steps"] > s0 and busy > 0:
                self._steps_per_s = (status["steps"] - s0) / busy
            self._rate_mark = (now, status["steps"])
        status["steps_per_s"] = round(self._steps_per_s, 1)
        key = (status["phase"], tuple(status["rounds"]))
        if force or key != self._sent_status or now - self._status_at >= 1.0:
            self._sent_status, self._status_at = key, now
            self._send_now(encode({"type": "status", **status}), False, self.generation)

    async def _say_ended(self, text: str, timeout: float) -> bool:
        channel, pc = self._channel, self._pc
        if channel is None or pc is None or channel.readyState != "open":
            return False
        self.connected.clear()  # nothing more is asked of it, and its closing is not a loss
        self._channel = None  # no more pings or status
        gone = asyncio.Event()
        channel.on("close", gone.set)

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                gone.set()

        channel.send(text)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gone.wait(), timeout)
        return gone.is_set()

    async def _shutdown(self) -> None:
        await self.signaling.stop_relay()
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        self.connected.clear()
        for pc in [self._pc, *self._candidates]:
            if pc is not None:
                await pc.close()
        self._pc = None
        self._candidates.clear()
