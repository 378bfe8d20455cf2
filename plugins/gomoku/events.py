"""The play page's server-sent events: the game's state pushed to every page that follows it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .http_guard import api_error

#: Pages that may follow one game's events at once (each holds a connection open).
MAX_LISTENERS = 8
#: How often an idle event stream says it is alive (a comment line), in seconds.
KEEP_ALIVE_S = 15.0


class GameEvents:
    """The pages following one game: each gets the state now, then the newest at every change."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]], closing: Callable[[], bool]) -> None:
        self.snapshot, self.closing = snapshot, closing
        self.listeners: set[asyncio.Queue[str]] = set()
        """One queue per page listening: the state to push to it."""

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """The state now, then at every change, as server-sent events; a comment keeps it alive."""
        if len(self.listeners) >= MAX_LISTENERS:
            raise api_error(
                web.HTTPServiceUnavailable, f"{MAX_LISTENERS} pages already follow this game: close one"
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        queue.put_nowait(json.dumps(self.snapshot()))
        self.listeners.add(queue)
        quiet = 0.0
        try:
            while not self.closing():
                transport = request.transport
                if transport is None or transport.is_closing():
                    break  # the page went away: its place is free at once
                try:
                    text = await asyncio.wait_for(queue.get(), 1.0)
                except asyncio.TimeoutError:
                    quiet += 1.0
                    if quiet >= KEEP_ALIVE_S:
                        quiet = 0.0
                        await response.write(b": keep-alive\n\n")
                    continue
                await response.write(f"data: {text}\n\n".encode())
        except ConnectionResetError:
            pass  # the page went away
        finally:
            self.listeners.discard(queue)
        return response

    def changed(self) -> None:
        """Push the state to every listening page (a page that has not taken the last one gets
        this one instead: only the newest state matters)."""
        if not self.listeners:
            return
        text = json.dumps(self.snapshot())
        for queue in self.listeners:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(text)
