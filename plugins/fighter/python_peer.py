"""A game client in Python: the rules' twin behind an aiortc peer (WebRTC without a browser).

    FRAMEWORK_FIGHTER_TOKEN=... python -m framework_plugins.fighter.python_peer OFFER_URL

It offers a data channel to the trainer's signaling endpoint, then answers reset/step
messages exactly as the browser page does. It exits when the channel closes or when its
standard input does (the trainer that started it is gone). The per-run token travels in
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
from .protocol import ProtocolError, decode, encode
from .webrtc import restrict_ice_to_loopback

Respond = Callable[[str | bytes], dict[str, Any]]


async def play(offer_url: str, token: str, respond: Respond | None = None) -> None:
    """Connect to the trainer and answer each message with `respond` (default: the twin's arenas)."""
    from aiortc import RTCPeerConnection, RTCSessionDescription

    host = urlparse(offer_url).hostname or ""
    if host == "localhost" or ipaddress.ip_address(host).is_loopback:
        restrict_ice_to_loopback()
    loop = asyncio.get_running_loop()
    finished = asyncio.Event()
    threading.Thread(target=_watch_stdin, args=(loop, finished), daemon=True).start()
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("game")
    if respond is None:
        arenas = Arenas()

        def respond(raw: str | bytes) -> dict[str, Any]:
            return answer(arenas, raw)

    @channel.on("open")
    def on_open() -> None:
        channel.send(encode({"type": "hello", "client": "python"}))

    @channel.on("message")
    def on_message(raw: str | bytes) -> None:
        channel.send(encode(respond(raw)))

    channel.on("close", finished.set)

    @pc.on("connectionstatechange")
    def on_state() -> None:
        if pc.connectionState in ("failed", "closed"):
            finished.set()

    await pc.setLocalDescription(await pc.createOffer())
    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        offer = {"sdp": pc.localDescription.sdp, "type": "offer", "token": token}
        async with session.post(offer_url, json=offer) as response:
            if response.status != 200:
                await pc.close()
                raise SystemExit(
                    f"signaling refused the offer: HTTP {response.status} {await response.text()}"
                )
            reply = await response.json()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=reply["sdp"], type=reply["type"]))
    await finished.wait()
    await pc.close()


def answer(arenas: Arenas, raw: str | bytes) -> dict[str, Any]:
    try:
        message = decode(raw, allowed=("reset", "step", "ping"))
        if message["type"] == "ping":
            return {"type": "pong", "id": message["id"]}
        arenas.handle(message)
        return arenas.result()
    except (ProtocolError, ValueError) as e:
        return {"type": "error", "message": str(e)}


def _watch_stdin(loop: asyncio.AbstractEventLoop, finished: asyncio.Event) -> None:
    sys.stdin.read()  # returns at EOF: the trainer closed our stdin or died
    loop.call_soon_threadsafe(finished.set)


TOKEN_VARIABLE = "FRAMEWORK_FIGHTER_TOKEN"


def spawn(offer_url: str, token: str, **popen: Any) -> subprocess.Popen[bytes]:
    """Start the peer in a child process; it exits when the returned process's stdin closes."""
    return subprocess.Popen(
        [sys.executable, "-m", __name__, offer_url],
        stdin=subprocess.PIPE,
        env={**os.environ, TOKEN_VARIABLE: token},
        **popen,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("offer_url")
    args = parser.parse_args()
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        parser.error(f"set {TOKEN_VARIABLE} to the run's token (the trainer's page URL shows it)")
    asyncio.run(play(args.offer_url, token))


if __name__ == "__main__":
    main()
