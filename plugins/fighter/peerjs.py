"""Signaling through a PeerJS server (the `peer` package from npm), as the PeerJS client does it.

A PeerJS server relays JSON messages between peers registered under ids over one WebSocket
each: `{"type": "OFFER" | "ANSWER" | "CANDIDATE" | ..., "src": id, "dst": id, "payload": {...}}`.
The game page connects with the PeerJS browser library (`peer.connect(trainer_id, {serialization:
"raw", metadata: {token}})`); the trainer answers its OFFER with aiortc, so the data channel is
the same as with the built-in signaling. Messages from the server are size-limited and checked
field by field; an offer without the run's token is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlparse

import aiohttp

from .protocol import MAX_MESSAGE_BYTES, ProtocolError, parse_object, token_matches

#: The PeerJS client version this speaks for (sent as `version`, as the browser library does).
PEERJS_VERSION = "1.5.5"
#: How often a registered peer tells the server it is alive (PeerJS's default pingInterval).
HEARTBEAT_S = 5.0
SERVER_TYPES = ("OPEN", "ERROR", "ID-TAKEN", "INVALID-KEY", "LEAVE", "EXPIRE", "OFFER", "ANSWER", "CANDIDATE")


class PeerJSError(ConnectionError):
    """The PeerJS server is unreachable, refused our id or key, or sent a malformed message."""


class PeerJSKeyRefused(PeerJSError):
    """The PeerJS server does not take our key (its --key is another)."""


@dataclass(frozen=True)
class PeerJSServer:
    """Where a PeerJS server listens: `url` like http://127.0.0.1:9000/ (its --path), and its --key."""

    url: str
    key: str = "peerjs"

    def __post_init__(self) -> None:
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.port is None:
            raise ValueError(
                f"env.peerjs_url={self.url!r} is not valid; give http://HOST:PORT/PATH of the PeerJS server"
            )

    @property
    def host(self) -> str:
        return str(urlparse(self.url).hostname)

    @property
    def is_loopback(self) -> bool:
        return self.host == "localhost" or ipaddress.ip_address(self.host).is_loopback

    def socket_url(self, peer_id: str, token: str) -> str:
        parsed = urlparse(self.url)
        path = parsed.path if parsed.path.endswith("/") else parsed.path + "/"
        scheme = "wss" if parsed.scheme == "https" else "ws"
        query = urlencode({"key": self.key, "id": peer_id, "token": token, "version": PEERJS_VERSION})
        return f"{scheme}://{parsed.netloc}{path}peerjs?{query}"


def new_peer_id(role: str) -> str:
    return f"framework-{role}-{secrets.token_hex(8)}"


def check_server_message(raw: str | bytes) -> dict[str, Any]:
    """Parse one message from the PeerJS server and check the fields this side uses."""
    message = parse_object(raw, "PeerJS message")
    if message.get("type") not in SERVER_TYPES:
        expected = ", ".join(SERVER_TYPES)
        raise ProtocolError(
            f"unexpected PeerJS message type {message.get('type')!r}; expected one of {expected}"
        )
    kind, payload = message["type"], message.setdefault("payload", {})
    if not isinstance(payload, dict):
        raise ProtocolError(f"PeerJS {kind} payload must be an object, got {payload!r}")
    relayed = kind in ("OFFER", "ANSWER", "CANDIDATE")
    if relayed and not (isinstance(message.get("src"), str) and isinstance(payload.get("connectionId"), str)):
        raise ProtocolError(f"PeerJS {kind} needs a string src and payload.connectionId")
    sdp = payload.get("sdp")
    if kind in ("OFFER", "ANSWER") and not (
        isinstance(sdp, dict) and isinstance(sdp.get("sdp"), str) and sdp.get("type") == kind.lower()
    ):
        raise ProtocolError(f"PeerJS {kind} needs payload.sdp = {{type: {kind.lower()!r}, sdp: string}}")
    if kind == "OFFER" and not isinstance(payload.get("metadata", {}), dict):
        raise ProtocolError("PeerJS OFFER payload.metadata must be an object")
    ice = payload.get("candidate")
    if kind == "CANDIDATE" and not (isinstance(ice, dict) and isinstance(ice.get("candidate"), str)):
        raise ProtocolError("PeerJS CANDIDATE needs payload.candidate = {candidate: string, ...}")
    return message


class PeerJSSocket:
    """One peer's registration on a PeerJS server: send to other ids, receive what they send us."""

    def __init__(self, server: PeerJSServer, peer_id: str) -> None:
        self.server = server
        self.peer_id = peer_id
        self._token = secrets.token_hex(8)  # PeerJS's own re-registration token, not the run's
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    async def open(self, timeout: float) -> None:
        """Register our id; fails with PeerJSError naming the server when that does not work."""
        url = self.server.socket_url(self.peer_id, self._token)
        self._session = aiohttp.ClientSession()
        try:
            connecting = self._session.ws_connect(url, max_msg_size=MAX_MESSAGE_BYTES)
            self._ws = await asyncio.wait_for(connecting, timeout)
            first = await asyncio.wait_for(self.receive(), timeout)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
            await self.close()
            why = str(e) or type(e).__name__
            raise PeerJSError(f"Cannot register at the PeerJS server {self.server.url}: {why}") from None
        if first is None or first["type"] != "OPEN":
            await self.close()
            why = "it closed the connection" if first is None else f"{first['type']} {first['payload']}"
            key = first is not None and (
                first["type"] == "INVALID-KEY" or "Invalid key" in str(first["payload"])
            )
            raise (PeerJSKeyRefused if key else PeerJSError)(
                f"The PeerJS server {self.server.url} refused id {self.peer_id}: {why}"
            )
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def send(self, kind: str, dst: str, payload: dict[str, Any]) -> None:
        assert self._ws is not None, "open() first"
        await self._ws.send_str(json.dumps({"type": kind, "dst": dst, "payload": payload}))

    async def receive(self) -> dict[str, Any] | None:
        """The next checked message; None once the server connection has closed."""
        assert self._ws is not None, "open() first"
        msg = await self._ws.receive()
        if msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            return check_server_message(msg.data)
        if msg.type == aiohttp.WSMsgType.ERROR:
            raise PeerJSError(f"the PeerJS server connection failed: {self._ws.exception()!r}")
        return None

    async def _beat(self) -> None:
        while self._ws is not None and not self._ws.closed:
            await asyncio.sleep(HEARTBEAT_S)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._ws.send_str('{"type":"HEARTBEAT"}')

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()


def candidate_from_peerjs(candidate: dict[str, Any], *, loopback_only: bool) -> Any:
    """An aiortc RTCIceCandidate from a trickled browser candidate; None when it is filtered out."""
    from aiortc.sdp import candidate_from_sdp

    line = candidate["candidate"]
    try:
        ice = candidate_from_sdp(line.split(":", 1)[1] if line.startswith("candidate:") else line)
    except (ValueError, IndexError) as e:
        raise ProtocolError(f"malformed ICE candidate {line!r}: {e}") from None
    if loopback_only and ice.ip != "127.0.0.1":
        return None
    ice.sdpMid = candidate.get("sdpMid")
    ice.sdpMLineIndex = candidate.get("sdpMLineIndex")
    return ice


Answerer = Callable[[object], Awaitable[Any]]


async def answer_offers(
    socket: PeerJSSocket,
    token: str,
    accept: Answerer,
    on_error: Callable[[str], None],
) -> None:
    """The trainer's side: answer each authorised OFFER with `accept(sdp) -> pc`, add its candidates.

    Runs until the server connection closes. A wrong or missing token gets a LEAVE back (the
    only refusal a PeerJS server relays) and nothing else; a malformed message is reported
    through `on_error` and skipped.
    """
    pcs: dict[str, Any] = {}
    while True:
        try:
            message = await socket.receive()
        except ProtocolError as e:
            on_error(str(e))
            continue
        if message is None:
            return
        payload, src = message["payload"], message.get("src", "")
        if message["type"] == "OFFER":
            metadata = payload.get("metadata")
            given = metadata.get("token") if isinstance(metadata, dict) else None
            if not token_matches(given, token):
                await socket.send("LEAVE", src, {"msg": "wrong or missing token"})
                continue
            if payload.get("serialization", "raw") != "raw":
                await socket.send("LEAVE", src, {"msg": "connect with serialization 'raw'"})
                continue
            sdp = payload.get("sdp")
            try:
                pc = await accept(sdp.get("sdp") if isinstance(sdp, dict) else None)
            except ProtocolError as e:
                on_error(f"refused an offer: {e}")
                await socket.send("LEAVE", src, {"msg": f"refused: {e}"})
                continue
            pcs = {payload["connectionId"]: pc}  # one game client at a time: the newest wins
            answer = {"type": "answer", "sdp": pc.localDescription.sdp}
            await socket.send(
                "ANSWER", src,
                {"sdp": answer, "type": "data", "connectionId": payload["connectionId"], "browser": "aiortc"},
            )  # fmt: skip
        elif message["type"] == "CANDIDATE" and payload["connectionId"] in pcs:
            try:
                ice = candidate_from_peerjs(payload["candidate"], loopback_only=socket.server.is_loopback)
            except ProtocolError as e:
                on_error(str(e))
                continue
            if ice is not None:
                await pcs[payload["connectionId"]].addIceCandidate(ice)
        elif message["type"] in ("ERROR", "ID-TAKEN", "INVALID-KEY"):
            on_error(f"the PeerJS server said {message['type']}: {payload}")


async def offer(socket: PeerJSSocket, trainer_id: str, token: str, sdp: str, timeout: float) -> str:
    """The game client's side: send our OFFER (candidates inside the SDP), return the answer's SDP."""
    connection_id = "dc_" + secrets.token_hex(6)
    await socket.send(
        "OFFER", trainer_id,
        {"sdp": {"type": "offer", "sdp": sdp}, "type": "data", "connectionId": connection_id,
         "label": connection_id, "reliable": True, "serialization": "raw", "metadata": {"token": token}},
    )  # fmt: skip

    async def answered() -> str:
        while True:
            message = await socket.receive()
            if message is None:
                raise PeerJSError(f"the PeerJS server {socket.server.url} closed before the trainer answered")
            payload = message["payload"]
            if message["type"] == "ANSWER" and payload["connectionId"] == connection_id:
                return str(payload["sdp"]["sdp"])
            if message["type"] in ("ERROR", "EXPIRE", "LEAVE"):
                raise PeerJSError(f"the trainer {trainer_id} was not reached: {message['type']} {payload}")

    try:
        return await asyncio.wait_for(answered(), timeout)
    except asyncio.TimeoutError:
        raise PeerJSError(f"the trainer {trainer_id} did not answer within {timeout:.0f} s") from None


def check_server(server: PeerJSServer, timeout: float) -> None:
    """Register at `server` with an id of our own, and leave: a ConfigError naming the setting to
    change where that does not work (no server there, another key), before a run starts."""
    from framework.errors import ConfigError

    async def probe() -> None:
        socket = PeerJSSocket(server, new_peer_id("check"))
        await socket.open(timeout)
        await socket.close()

    try:
        asyncio.run(probe())
    except PeerJSKeyRefused:
        raise ConfigError(
            f"env.peerjs_key={server.key!r} is not the key of the PeerJS server at {server.url} (it "
            "refused it): give the server's --key"
        ) from None
    except PeerJSError as e:
        raise ConfigError(
            f"env.peerjs_url={server.url}: {e}. Start the PeerJS server there (`npx peer --port "
            f"{urlparse(server.url).port} --key {server.key}`), or use env.signaling=builtin"
        ) from None
