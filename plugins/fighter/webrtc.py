"""WebRTCClient: the trainer's side of the game connection, an asyncio loop in its own thread.

The thread runs an aiohttp server on 127.0.0.1 (the game page, its static files and the
offer/answer signaling endpoint, all behind a per-run token) and the aiortc peer connection.
With a PeerJS server (`peerjs=`), offers arrive through it instead (see peerjs.py); the page
and the data channel are the same.
The synchronous env never touches the loop except through `call_soon_threadsafe` (to send)
and a thread-safe queue (to receive): a `channel.send()` from the training thread would
silently never be delivered. An application-level heartbeat notices a dead or frozen game
within `heartbeat_timeout_s` (aiortc alone notices only after about 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import queue
import secrets
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from .peerjs import PeerJSError, PeerJSServer, PeerJSSocket, answer_offers, new_peer_id
from .protocol import MAX_MESSAGE_BYTES, ProtocolError, decode, encode

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
#: The page's files, served by name (nothing else under static/ is reachable).
PAGE_FILES = frozenset(p.name for p in STATIC.iterdir() if p.suffix in {".js", ".json", ".html", ".css", ".svg"})


class PeerGone(ConnectionError):
    """The game client disconnected, stopped answering, or closed its data channel."""


def restrict_ice_to_loopback() -> None:
    """Gather only 127.0.0.1 candidates, so WebRTC traffic never leaves this machine's loopback.

    aioice offers every interface address but loopback; both peers of a local game run here.
    """
    import aioice.ice

    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


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
        self.host = host
        self.peerjs = peerjs
        self.peer_id = new_peer_id("trainer") if peerjs is not None else ""
        self.token = secrets.token_urlsafe(16)
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        if ipaddress.ip_address(host).is_loopback and (peerjs is None or peerjs.is_loopback):
            restrict_ice_to_loopback()
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.connected = threading.Event()
        self.client_kind = ""
        self._pc: Any = None
        self._channel: Any = None
        self._last_pong = 0.0
        self._ping_id = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="webrtc")
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self._signaling: asyncio.Task[None] | None = None
        try:
            self.port = self._call(self._serve(port), timeout=15)
            self._heartbeat_task = self._call(self._start_heartbeat(), timeout=5)
            if peerjs is not None:
                self._signaling = self._call(self._register(peerjs, signaling_timeout_s), timeout=30)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """The game page, token included (what a user opens to watch, or a browser is pointed at)."""
        page = f"http://{self.host}:{self.port}/?token={self.token}"
        if self.peerjs is None:
            return page
        query = urlencode({"peerjs": self.peerjs.url, "key": self.peerjs.key, "peer": self.peer_id})
        return f"{page}&{query}"

    @property
    def client_args(self) -> list[str]:
        """How the Python game peer reaches this trainer (its command-line arguments)."""
        if self.peerjs is None:
            return [self.offer_url]
        return ["--peerjs", self.peerjs.url, "--key", self.peerjs.key, "--peer", self.peer_id]

    @property
    def offer_url(self) -> str:
        return f"http://{self.host}:{self.port}/offer"

    # --- the synchronous side -------------------------------------------------------------

    def wait_connected(self, timeout: float) -> None:
        if not self.connected.wait(timeout):
            raise TimeoutError(f"No game client connected to {self.url} within {timeout:.0f} s")

    def send(self, message: dict[str, Any]) -> None:
        text = encode(message)
        self._loop.call_soon_threadsafe(self._send_now, text)

    def receive(self, timeout: float) -> tuple[str, Any]:
        """The next event: ("result" | "error" | "gone", payload)."""
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"No answer from the game client within {timeout:.1f} s") from None

    def close(self) -> None:
        if not self._loop.is_running():
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown(), timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def _call(self, coro: Any, *, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # --- the asyncio side -----------------------------------------------------------------

    async def _serve(self, port: int) -> int:
        app = web.Application(client_max_size=MAX_MESSAGE_BYTES)
        app.router.add_get("/", self._page)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_post("/offer", self._offer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port)
        await site.start()
        server = site._server
        assert server is not None
        return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    def _authorised(self, request: web.Request, token: str | None = None) -> bool:
        given = token if token is not None else request.query.get("token", "")
        return secrets.compare_digest(given, self.token)

    async def _page(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            raise web.HTTPForbidden(text="wrong or missing token")
        return web.FileResponse(STATIC / "index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in PAGE_FILES:
            raise web.HTTPNotFound()
        return web.FileResponse(STATIC / name)

    async def _offer(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise web.HTTPBadRequest(text="the offer must be JSON {sdp, type, token}") from None
        if not isinstance(body, dict) or not self._authorised(request, str(body.get("token", ""))):
            raise web.HTTPForbidden(text="wrong or missing token")
        if body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
            raise web.HTTPBadRequest(text="the offer must be JSON {sdp, type: 'offer', token}")
        pc = await self._accept(body["sdp"])
        return web.json_response({"sdp": pc.localDescription.sdp, "type": pc.localDescription.type})

    async def _accept(self, offer_sdp: str) -> Any:
        """Answer a game client's offer: the new peer connection, its answer set as local description."""
        from aiortc import RTCPeerConnection, RTCSessionDescription

        if self._pc is not None:  # a reloaded page replaces the previous connection
            await self._drop_connection("the game client reconnected")
        pc = RTCPeerConnection()
        self._pc = pc
        pc.on("datachannel", lambda channel: self._attach(pc, channel))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed") and pc is self._pc:
                await self._drop_connection(f"peer connection {pc.connectionState}")

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        return pc

    async def _register(self, server: PeerJSServer, timeout: float) -> asyncio.Task[None]:
        socket = PeerJSSocket(server, self.peer_id)
        await socket.open(timeout)
        return asyncio.get_running_loop().create_task(self._answer_through(socket, timeout))

    async def _answer_through(self, socket: PeerJSSocket, timeout: float) -> None:
        """Answer offers relayed by the PeerJS server; re-register if the server connection drops."""
        while True:
            try:
                await answer_offers(socket, self.token, self._accept, on_error=self._signaling_error)
            finally:
                await socket.close()
            log.warning("lost the PeerJS server %s; registering again", socket.server.url)
            while True:
                await asyncio.sleep(1.0)
                socket = PeerJSSocket(socket.server, self.peer_id)
                try:
                    await socket.open(timeout)
                    break
                except PeerJSError as e:
                    log.warning("%s", e)

    def _signaling_error(self, reason: str) -> None:
        log.warning("ignored a signaling message: %s", reason)

    def _attach(self, pc: Any, channel: Any) -> None:
        if pc is not self._pc:
            return
        self._channel = channel
        self._last_pong = time.monotonic()

        @channel.on("message")
        def on_message(raw: str | bytes) -> None:
            self._on_message(raw)

        @channel.on("close")
        def on_close() -> None:
            if channel is self._channel:
                self._lost("the data channel closed")

    def _on_message(self, raw: str | bytes) -> None:
        try:
            message = decode(raw, allowed=("hello", "result", "pong", "error"))
        except ProtocolError as e:
            self.inbox.put(("error", f"malformed message from the game client: {e}"))
            return
        self._last_pong = time.monotonic()  # any message shows the client is alive
        kind = message["type"]
        if kind == "hello":
            self.client_kind = message["client"]
            self.connected.set()
        elif kind == "result":
            self.inbox.put(("result", message))
        elif kind == "error":
            self.inbox.put(("error", f"the game client reported: {message['message']}"))

    def _send_now(self, text: str) -> None:
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            channel.send(text)

    def _lost(self, reason: str) -> None:
        if self.connected.is_set():
            self.connected.clear()
            self._channel = None
            self.inbox.put(("gone", reason))

    async def _drop_connection(self, reason: str) -> None:
        pc, self._pc = self._pc, None
        self._lost(reason)
        if pc is not None:
            await pc.close()

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
            self._send_now(encode({"type": "ping", "id": self._ping_id}))

    async def _shutdown(self) -> None:
        if self._signaling is not None:
            self._signaling.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._signaling
        if hasattr(self, "_heartbeat_task"):
            self._heartbeat_task.cancel()
        self.connected.clear()
        if self._pc is not None:
            await self._pc.close()
            self._pc = None
        if self._runner is not None:
            await self._runner.cleanup()
