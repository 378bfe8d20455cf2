"""A page and its API served from a thread of its own that runs an asyncio loop: what the fighter's
game page and the Gomoku play page share.

The server binds the host it is given (127.0.0.1 unless configured) and makes a per-run token,
which `token_logs` keeps out of every log line from the moment it exists until the server is
gone; the page itself (`/`) answers only with the token in its query string, its static files
only by name. No access log: a request's line would hold the token. What a plugin adds (its API,
its signaling endpoint) it routes itself, checking `token_matches`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .token_logs import guard_token, release_token

T = TypeVar("T")
#: The files of a page that are served by name (nothing else in its folder is reachable).
PAGE_SUFFIXES = frozenset({".js", ".json", ".html", ".css", ".svg"})
#: The answer to a page asked for without its token.
NO_TOKEN = "wrong or missing token: open the address the server printed"


class PageServer:
    """The page `static/<page>` and its files, served on `host:port` (0: a free port); the token is
    kept out of `loggers` and `request_log` (where aiohttp logs the requests that fail)."""

    def __init__(
        self,
        static: Path,
        page: str,
        *,
        host: str = "127.0.0.1",
        name: str,
        loggers: Sequence[logging.Logger],
        request_log: logging.Logger,
    ) -> None:
        self.static, self.page, self.host = static, page, host
        self.port = 0
        self.files = frozenset(p.name for p in static.iterdir() if p.suffix in PAGE_SUFFIXES)
        self.token = secrets.token_urlsafe(16)
        self.request_log = request_log
        guard_token(self.token, *loggers, request_log)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name=name)
        self._runner: web.AppRunner | None = None
        self._shutdown_timeout = 0.5

    @property
    def address(self) -> str:
        """http://host:port/, without the token: what messages and logs name. Served on every interface
        (`--host 0.0.0.0`), the address other machines open it at, not 0.0.0.0."""
        host = _reachable() if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host  # an IPv6 address
        return f"http://{host}:{self.port}/"

    @property
    def url(self) -> str:
        """The page's address, token included: shown to its user once, never logged."""
        return f"{self.address}?token={self.token}"

    def token_matches(self, given: object) -> bool:
        """Whether `given` is this server's token (compared in constant time)."""
        if not isinstance(given, str):
            return False
        return secrets.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def start(
        self,
        routes: Callable[[web.Application], None],
        port: int = 0,
        *,
        client_max_size: int,
        middlewares: Iterable[Any] = (),
        on_response_prepare: Iterable[Callable[[web.Request, web.StreamResponse], Awaitable[None]]] = (),
        shutdown_timeout: float = 0.5,
        timeout: float = 30.0,
    ) -> int:
        """Start the loop's thread and listen; `routes(app)` adds the plugin's own routes beside the
        page's. Returns the port."""
        self._thread.start()
        self._shutdown_timeout = shutdown_timeout
        listening = self._listen(routes, port, client_max_size, list(middlewares), on_response_prepare)
        self.port = self.call(listening, timeout=timeout)
        return self.port

    def call(self, coro: Coroutine[Any, Any, T], *, timeout: float) -> T:
        """Run `coro` on the server's loop and wait at most `timeout` for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(
        self, before: Callable[[], Coroutine[Any, Any, None]] | None = None, *, timeout: float = 10
    ) -> None:
        """Stop serving: `before()` (the plugin's own shutdown) then the server, on the loop; the
        loop's thread ends and the token is released once nothing logs this server's requests."""
        if self.loop.is_running():
            with contextlib.suppress(Exception):
                self.call(self._shutdown(before), timeout=timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=timeout)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()
        if self.loop.is_closed():
            release_token(self.token)

    @property
    def running(self) -> bool:
        return self.loop.is_running()

    async def _listen(
        self,
        routes: Callable[[web.Application], None],
        port: int,
        client_max_size: int,
        middlewares: list[Any],
        on_response_prepare: Iterable[Callable[[web.Request, web.StreamResponse], Awaitable[None]]],
    ) -> int:
        app = web.Application(client_max_size=client_max_size, middlewares=middlewares)
        for hook in on_response_prepare:
            app.on_response_prepare.append(hook)
        app.router.add_get("/", self._page)
        app.router.add_get("/static/{name}", self._static)
        routes(app)
        # No access log (it would hold the token); failed requests go to the plugin's request log,
        # which never writes what a client sent. A request still answering when the server stops
        # gets `shutdown_timeout`.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            logger=self.request_log,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port)
        await site.start()
        server = site._server
        assert server is not None
        return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    async def _shutdown(self, before: Callable[[], Coroutine[Any, Any, None]] | None) -> None:
        if before is not None:
            await before()
        if self._runner is not None:
            await self._runner.cleanup()
        # What is still pending (a peer connection's own tasks, an offer being answered) is cancelled
        # and awaited, as asyncio.run does: no task is destroyed pending when the loop closes.
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            done, _ = await asyncio.wait(pending, timeout=self._shutdown_timeout + 1)
            for task in done:
                if not task.cancelled():
                    task.exception()  # retrieved: a failure on the way out is no news

    async def _page(self, request: web.Request) -> web.StreamResponse:
        if not self.token_matches(request.query.get("token", "")):
            raise web.HTTPForbidden(text=NO_TOKEN)
        return web.FileResponse(self.static / self.page)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in self.files:
            raise web.HTTPNotFound()
        return web.FileResponse(self.static / name)


def _reachable() -> str:
    """This machine's address on the network its default route leads to (no packet is sent), else its
    host name."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))
        return str(probe.getsockname()[0])
    return socket.gethostname()
