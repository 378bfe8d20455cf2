"""A game client in Python: the rules' twin behind an aiortc peer (WebRTC without a browser).

    FRAMEWORK_FIGHTER_TOKEN=... python -m framework_plugins.fighter.python_peer OFFER_URL
    FRAMEWORK_FIGHTER_TOKEN=... python -m framework_plugins.fighter.python_peer \
        --peerjs http://127.0.0.1:9000/ --key peerjs --peer TRAINER_ID

It offers a data channel to the trainer's signaling endpoint, then answers reset/step
messages exactly as the browser page does. It exits when the trainer says the run has ended
(it closes its side, as the page does), when the channel closes, or when its standard input
does (the trainer that started it is gone). The per-run token travels in
the environment, not on the command line, where other users of the machine could read it.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import aiohttp

from .arenas import Arenas
from .peerjs import PeerJSError, PeerJSServer, PeerJSSocket, new_peer_id, offer
from .protocol import ProtocolError, decode, encode
from .signaling import restrict_ice_to_loopback

SIGNALING_TIMEOUT_S = 15.0
Frame = dict[str, Any] | str | bytes
#: What a game client does with each message: a reply (a message, or a raw frame as it is sent),
#: several, or None for none.
Respond = Callable[[str | bytes], Frame | list[Frame] | None]


async def play(
    args: list[str],
    token: str,
    respond: Respond | None = None,
    *,
    watch_stdin: bool = True,
    hello: dict[str, Any] | str | None = None,
) -> None:
    """Connect to the trainer and answer each message with `respond` (default: the twin's arenas).

    `args` say how to reach it (WebRTCClient.client_args): [OFFER_URL] for the trainer's own
    signaling endpoint, or ["--peerjs", SERVER_URL, "--key", KEY, "--peer", TRAINER_ID]. It
    ends when the channel closes, or (`watch_stdin`) when standard input does. `hello` replaces
    the first message (tests play misbehaving clients with it and `respond`).
    """
    from aiortc import RTCPeerConnection, RTCSessionDescription

    target = parse_args(args)
    host = urlparse(target.peerjs or target.offer_url).hostname or ""
    if host == "localhost" or ipaddress.ip_address(host).is_loopback:
        restrict_ice_to_loopback()
    loop = asyncio.get_running_loop()
    finished = asyncio.Event()
    if watch_stdin:
        threading.Thread(target=_watch_stdin, args=(loop, finished), daemon=True).start()
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("game")
    if respond is None:
        arenas = Arenas()

        def respond(raw: str | bytes) -> dict[str, Any] | None:
            return answer(arenas, raw)

    def send(frames: Frame | list[Frame]) -> None:
        for frame in frames if isinstance(frames, list) else [frames]:
            channel.send(encode(frame) if isinstance(frame, dict) else frame)

    @channel.on("open")
    def on_open() -> None:
        send(hello if hello is not None else {"type": "hello", "client": "python"})

    @channel.on("message")
    def on_message(raw: str | bytes) -> None:
        reply = respond(raw)
        if reply is not None:  # status, replaced and ended messages are not answered
            send(reply)
        if is_ended(raw):  # the run has ended: close our side, which tells the trainer we have it
            finished.set()

    channel.on("close", finished.set)

    @pc.on("connectionstatechange")
    def on_state() -> None:
        if pc.connectionState in ("failed", "closed"):
            finished.set()

    await pc.setLocalDescription(await pc.createOffer())
    socket = None
    try:
        if target.peerjs:
            socket = PeerJSSocket(PeerJSServer(target.peerjs, target.key), new_peer_id("game"))
            await socket.open(SIGNALING_TIMEOUT_S)
            reply = await offer(socket, target.peer, token, pc.localDescription.sdp, SIGNALING_TIMEOUT_S)
        else:
            reply = await _post_offer(target.offer_url, token, pc.localDescription.sdp)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=reply, type="answer"))
        await finished.wait()
    except PeerJSError as e:
        raise SystemExit(f"signaling failed: {e}") from None
    finally:
        await pc.close()
        if socket is not None:
            await socket.close()


async def _post_offer(offer_url: str, token: str, sdp: str) -> str:
    timeout = aiohttp.ClientTimeout(total=SIGNALING_TIMEOUT_S)
    path, shown = urlparse(offer_url).path.rstrip("/"), offer_url.split("?")[0]  # the token: never said
    page = (
        ""
        if path.endswith("/offer")
        else " (the trainer's signaling endpoint is its page's address + /offer)"
    )
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            body = {"sdp": sdp, "type": "offer", "token": token}
            async with session.post(offer_url, json=body) as response:
                if response.status != 200:
                    text = " ".join((await response.text()).split())[:200]
                    raise SystemExit(
                        f"{shown}: signaling refused the offer: HTTP {response.status} {text}{page}"
                    )
                reply = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        raise SystemExit(
            f"{shown}: no trainer's signaling answers there ({type(e).__name__}: {e}){page}"
        ) from None
    if not isinstance(reply, dict) or reply.get("type") != "answer" or not isinstance(reply.get("sdp"), str):
        raise SystemExit(f"signaling answered with something other than an SDP answer: {str(reply)[:200]}")
    return str(reply["sdp"])


#: What the trainer sends a game client.
TRAINER_MESSAGES = ("reset", "step", "ping", "status", "replaced", "ended")


def is_ended(raw: str | bytes) -> bool:
    """Whether `raw` is the trainer's checked ended message (a step's message is never parsed twice)."""
    if not isinstance(raw, str) or '"ended"' not in raw[:40]:
        return False
    try:
        return decode(raw, allowed=TRAINER_MESSAGES)["type"] == "ended"
    except ProtocolError:
        return False


def answer(arenas: Arenas, raw: str | bytes) -> dict[str, Any] | None:
    """The reply to one message from the trainer (None: a message that gets none)."""
    try:
        message = decode(raw, allowed=TRAINER_MESSAGES)
        if message["type"] == "ping":
            return {"type": "pong", "id": message["id"]}
        if message["type"] in ("status", "replaced", "ended"):
            return None
        arenas.handle(message)
        return arenas.result()
    except (ProtocolError, ValueError) as e:
        return {"type": "error", "message": str(e)}


def _watch_stdin(loop: asyncio.AbstractEventLoop, finished: asyncio.Event) -> None:
    sys.stdin.read()  # returns at EOF: the trainer closed our stdin or died
    loop.call_soon_threadsafe(finished.set)


TOKEN_VARIABLE = "FRAMEWORK_FIGHTER_TOKEN"


def spawn(args: list[str], token: str, **popen: Any) -> subprocess.Popen[bytes]:
    """Start the peer in a child process; it exits when the returned process's stdin closes."""
    return subprocess.Popen(
        [sys.executable, "-m", __name__, *args],
        stdin=subprocess.PIPE,
        env={**os.environ, TOKEN_VARIABLE: token},
        **popen,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("offer_url", nargs="?", default="", help="the trainer's signaling endpoint")
    parser.add_argument("--peerjs", default="", help="signal through this PeerJS server instead")
    parser.add_argument("--key", default="peerjs", help="the PeerJS server's key")
    parser.add_argument("--peer", default="", help="the trainer's PeerJS id")
    return parser


def parse_args(args: list[str]) -> argparse.Namespace:
    parser = _parser()
    target = parser.parse_args(args)
    if bool(target.offer_url) == bool(target.peerjs):
        parser.error("give either OFFER_URL or --peerjs SERVER_URL --peer TRAINER_ID")
    if target.peerjs and not target.peer:
        parser.error("--peerjs needs --peer TRAINER_ID")
    return target


def main() -> None:
    args = sys.argv[1:]
    parse_args(args)
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        _parser().error(f"set {TOKEN_VARIABLE} to the run's token (the trainer's page URL shows it)")
    asyncio.run(play(args, token))


if __name__ == "__main__":
    main()
