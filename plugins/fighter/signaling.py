"""How a game client reaches the trainer: the game page and its files, and the offers a client
sends, straight to the page server (`POST /offer`) or relayed by a PeerJS server (`peerjs=`, see
peerjs.py), all behind the per-run token. An offer is checked here (`check_offer_sdp`) before the
session (`webrtc.WebRTCClient`) answers it."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from framework_plugins.web.page_server import PageServer

from .peerjs import PeerJSError, PeerJSServer, PeerJSSocket, answer_offers, new_peer_id
from .protocol import MAX_MESSAGE_BYTES, ProtocolError

log = logging.getLogger(__name__)
#: Where aiohttp logs the page server's requests that fail (token_logs.py: never what a client sent).
request_log = logging.getLogger(f"{__name__}.requests")
STATIC = Path(__file__).parent / "static"
#: Longest SDP offer accepted (a browser's data-channel offer takes about 1 KB).
MAX_SDP_BYTES = 16 * 1024
#: Libraries whose INFO lines (every ICE check, every request) would drown the run's own output.
CHATTY_LOGGERS = ("aioice", "aiortc", "aiohttp.access")


class Signaling:
    """The game page and the offers of game clients, each answered by `accept(sdp)` (the session's:
    a peer connection, or a ProtocolError saying why not)."""

    def __init__(
        self,
        accept: Callable[[object], Awaitable[Any]],
        *,
        host: str = "127.0.0.1",
        peerjs: PeerJSServer | None = None,
        timeout_s: float = 15.0,
        loggers: Sequence[logging.Logger] = (),
    ) -> None:
        self.accept, self.peerjs, self.timeout_s = accept, peerjs, timeout_s
        self.peer_id = new_peer_id("trainer") if peerjs is not None else ""
        if ipaddress.ip_address(host).is_loopback and (peerjs is None or peerjs.is_loopback):
            restrict_ice_to_loopback()
        quiet_libraries()
        self.server = PageServer(
            STATIC, "index.html", host=host, name="webrtc", loggers=[log, *loggers], request_log=request_log
        )
        self.problem = ""
        """Why no new client can reach this trainer now (the PeerJS server is gone); empty when one can."""
        self._relay: asyncio.Task[None] | None = None

    def start(self, port: int = 0) -> None:
        """Serve the page, and register at the PeerJS server if there is one."""
        self.server.start(
            self._routes, port, client_max_size=MAX_MESSAGE_BYTES, shutdown_timeout=60.0, timeout=15
        )
        if self.peerjs is not None:
            self._relay = self.server.call(self._register(self.peerjs, self.timeout_s), timeout=30)

    @property
    def url(self) -> str:
        """The game page, token included (what a user opens to watch, or a browser is pointed at).

        Shown to the user once, never logged: messages name `public_url`."""
        if self.peerjs is None:
            return self.server.url
        query = urlencode({"peerjs": self.peerjs.url, "key": self.peerjs.key, "peer": self.peer_id})
        return f"{self.server.url}&{query}"

    @property
    def public_url(self) -> str:
        """The game page's address without its token, for messages and logs."""
        return self.server.address

    @property
    def client_args(self) -> list[str]:
        """How the Python game peer reaches this trainer (its command-line arguments)."""
        if self.peerjs is None:
            return [self.offer_url]
        return ["--peerjs", self.peerjs.url, "--key", self.peerjs.key, "--peer", self.peer_id]

    @property
    def offer_url(self) -> str:
        return f"{self.server.address}offer"

    async def stop_relay(self) -> None:
        """Stop answering offers relayed by the PeerJS server (on the server's loop)."""
        if self._relay is not None:
            self._relay.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._relay

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/offer", self._offer)

    async def _offer(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise web.HTTPBadRequest(text="the offer must be JSON {sdp, type, token}") from None
        if not isinstance(body, dict) or not self.server.token_matches(body.get("token", "")):
            raise web.HTTPForbidden(text="wrong or missing token")
        if body.get("type") != "offer":
            raise web.HTTPBadRequest(text="the offer must be JSON {sdp, type: 'offer', token}")
        try:
            pc = await self.accept(body.get("sdp"))
        except ProtocolError as e:
            raise web.HTTPBadRequest(text=f"refused: {e}") from None
        return web.json_response({"sdp": pc.localDescription.sdp, "type": pc.localDescription.type})

    async def _register(self, server: PeerJSServer, timeout: float) -> asyncio.Task[None]:
        socket = PeerJSSocket(server, self.peer_id)
        await socket.open(timeout)
        return asyncio.get_running_loop().create_task(self._answer_through(socket, timeout))

    async def _answer_through(self, socket: PeerJSSocket, timeout: float) -> None:
        """Answer offers relayed by the PeerJS server; re-register if the server connection drops."""
        while True:
            try:
                await answer_offers(socket, self.server.token, self.accept, on_error=self._signaling_error)
            finally:
                await socket.close()
            self.problem = f"lost the PeerJS server {socket.server.url}"
            log.warning("%s; registering again every second", self.problem)
            socket = await self._register_again(socket.server, timeout)

    async def _register_again(self, server: PeerJSServer, timeout: float) -> PeerJSSocket:
        """Register at `server` once a second until it takes us, saying each new reason once."""
        said = ""
        while True:
            await asyncio.sleep(1.0)
            socket = PeerJSSocket(server, self.peer_id)
            try:
                await socket.open(timeout)
            except PeerJSError as e:
                self.problem = str(e)
                if self.problem != said:
                    said = self.problem
                    log.warning("%s; trying again every second", said)
                continue
            self.problem = ""
            log.warning("registered at the PeerJS server %s again", server.url)
            return socket

    def _signaling_error(self, reason: str) -> None:
        log.warning("ignored a signaling message: %s", reason)


def restrict_ice_to_loopback() -> None:
    """Gather only 127.0.0.1 candidates, so WebRTC traffic never leaves this machine's loopback.

    aioice offers every interface address but loopback; both peers of a local game run here.
    """
    import aioice.ice

    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


def quiet_libraries() -> None:
    """Only warnings from aioice and aiortc; no line from the page server's request log for a page
    that went away mid-request (a fast reload), while any other error in a handler is still logged."""
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if not any(isinstance(f, _PageWentAway) for f in request_log.filters):
        request_log.addFilter(_PageWentAway())  # before the token's redaction, which drops tracebacks


class _PageWentAway(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, ConnectionError | asyncio.CancelledError)


def check_offer_sdp(sdp: object) -> str:
    """The offer's SDP if it can be answered (a data channel, ICE credentials, a DTLS
    fingerprint), else a ProtocolError saying what is wrong; nothing is touched before this."""
    from aiortc.sdp import SessionDescription

    if not isinstance(sdp, str) or not sdp.strip():
        raise ProtocolError("the offer has no SDP text")
    if len(sdp.encode()) > MAX_SDP_BYTES:
        raise ProtocolError(f"the offer's SDP of {len(sdp.encode())} bytes exceeds {MAX_SDP_BYTES}")
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception as e:  # aiortc's parser raises whatever the malformed line provokes
        raise ProtocolError(f"the offer's SDP does not parse: {type(e).__name__}: {str(e)[:120]}") from None
    media = [m for m in parsed.media if m.kind == "application"]
    if not media:
        raise ProtocolError("the offer's SDP has no data channel (m=application)")
    m = media[0]
    if m.ice is None or not m.ice.usernameFragment or not m.ice.password:
        raise ProtocolError("the offer's SDP has no ICE credentials (a=ice-ufrag, a=ice-pwd)")
    if m.dtls is None or not m.dtls.fingerprints:
        raise ProtocolError("the offer's SDP has no DTLS fingerprint (a=fingerprint)")
    if m.sctpCapabilities is None and m.sctp_port is None:
        raise ProtocolError("the offer's SDP has no SCTP association (a=sctp-port)")
    return sdp
