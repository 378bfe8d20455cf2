"""The page where a person plays a trained agent (`python -m framework play RUN`): an aiohttp server.

One game per server. The page (static/play.html) talks to a small JSON API, every call behind
a per-server token in the query string (`?token=...`):

    GET  /api/state                                 the game as the page draws it
    GET  /api/events                                the same, pushed at every change (server-sent events)
    POST /api/new   {"colour": "black" | "white"}   a new game; as white, the agent opens
    POST /api/move  {"x": int, "y": int}            the person's move (x column, y row from the top),
                                                    then the agent's
    POST /api/undo  {}                              take back the person's last move and the agent's answer

`new` and `move` may carry "simulations": int, the agent's simulations per move from then on.

A POST answers once the agent has moved, with the state; every page listening to /api/events gets
each change as it happens (the person's move, the agent thinking, its move) without asking. The
agent searches with one engine, one search at a time, in a worker thread, so the server answers
meanwhile: a move sent while it searches is refused (409); a new game or an undo stops the search
(its move is not played) and goes first. Bad input is a 400 that says what was wrong and what is
valid; a wrong or missing token a 403; a body over MAX_BODY_BYTES a 413.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

from framework_plugins.boardgames import SearchRequest
from framework_plugins.web.page_server import NO_TOKEN, PageServer

from .events import GameEvents
from .http_guard import MAX_BODY_BYTES, add_security_headers, api_error, no_such_call, read_body

log = logging.getLogger(__name__)
#: Where aiohttp logs this server's requests that fail (token_logs.py: never what the client sent).
request_log = logging.getLogger(f"{__name__}.requests")
STATIC = Path(__file__).parent / "static"
#: The most simulations a page may ask per move: an array tree's memory grows with them
#: (about 8 bytes per board cell per simulation: 15x15 at 20,000 is ~36 MB).
MAX_SIMULATIONS = 20_000
COLOURS = {"black": 1, "white": -1}
#: How long a new game or an undo waits for the search it stopped to end, in seconds.
STOP_WAIT_S = 30.0


@dataclass
class Analysis:
    """What the agent's search saw before one of its moves."""

    ply: int
    """How many moves were on the board when it searched (its move is moves[ply])."""
    visits: list[int]
    value: float
    """The searched root's value from the agent's view, in [-1, 1]."""
    simulations: int
    seconds: float


class PlayServer:
    """Serves the play page and its API from a background thread with its own asyncio loop."""

    def __init__(self, player: Any, host: str = "127.0.0.1", port: int = 0, *, warm_up: bool = False) -> None:
        self.player = player
        self.warm_up = warm_up
        """Search once in the worker thread as the server starts, so that the person's first move is
        not the one that waits for compiled kernels (a move sent before then waits for it)."""
        self.game = player.game
        self.server = PageServer(
            STATIC, "play.html", host=host, name="play-page", loggers=[log], request_log=request_log
        )
        self._port = port
        self.state = self.game.new_state()
        self.human = COLOURS["black"]
        self.analyses: list[Analysis] = []
        self.thinking = False
        self.closing = False
        self.events = GameEvents(self.snapshot, lambda: self.closing)
        self._engine: Any = None
        self.simulations = 0
        self._search_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="play-search")
        self._busy: asyncio.Lock | None = None
        self._stopped = False
        """A new game or an undo stopped the search under way: its move is not played."""

    @property
    def token(self) -> str:
        return self.server.token

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return self.server.url

    def start(self) -> str:
        """Listen in a background thread; returns `url`."""
        self._engine = self.player.engine()
        self.simulations = int(self._engine.num_simulations)
        if self.warm_up:
            self._search_thread.submit(self._engine.warm_up, self.game.new_state())
        try:
            self.server.start(
                self._routes,
                self._port,
                client_max_size=MAX_BODY_BYTES,
                middlewares=[self._require_token],
                on_response_prepare=[add_security_headers],
            )
        except BaseException:
            self.close()
            raise
        return self.url

    def close(self) -> None:
        """Stop serving: a search under way ends at once (its move is not played), then the engine
        is closed."""
        self.closing = True
        engine = self._engine
        if engine is not None:
            engine.interrupt()
        self.server.close()
        if self._engine is not None:
            self._search_thread.submit(self._engine.close)
            self._engine = None
        self._search_thread.shutdown(wait=False)

    # --- serving --------------------------------------------------------------------------

    def _routes(self, app: web.Application) -> None:
        self._busy = asyncio.Lock()
        app.router.add_get("/api/state", self._get_state)
        app.router.add_get("/api/events", self.events.stream)
        app.router.add_post("/api/new", self._new)
        app.router.add_post("/api/move", self._move)
        app.router.add_post("/api/undo", self._undo)

    @web.middleware
    async def _require_token(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path.startswith("/static/"):
            return await handler(request)  # the page's script and style: no state, nothing secret
        if not self.server.token_matches(request.query.get("token", "")):
            if request.path.startswith("/api/"):
                raise api_error(web.HTTPForbidden, NO_TOKEN)
            raise web.HTTPForbidden(text=NO_TOKEN)
        try:
            return await handler(request)
        except web.HTTPException as e:
            raise no_such_call(request, e) from None

    # --- the API --------------------------------------------------------------------------

    async def _get_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def _new(self, request: web.Request) -> web.Response:
        body = await read_body(request, allowed={"colour", "simulations"})
        colour = body.get("colour")
        if not isinstance(colour, str) or colour not in COLOURS:
            raise api_error(web.HTTPBadRequest, f'colour={colour!r}: choose "black" or "white"')
        simulations = self._simulations_from(body)
        async with self._exclusive(stops_the_search=True):
            self.simulations = simulations
            self.state, self.human, self.analyses = self.game.new_state(), COLOURS[colour], []
            if self.human != self.state.to_play:
                await self._agent_moves(undo_to=self.state.copy())
        return web.json_response(self.snapshot())

    async def _move(self, request: web.Request) -> web.Response:
        body = await read_body(request, allowed={"x", "y", "simulations"})
        size = self.game.board_size
        for key in ("x", "y"):
            value = body.get(key)
            if type(value) is not int or not 0 <= value < size:
                raise api_error(
                    web.HTTPBadRequest,
                    f"{key}={value!r}: give an integer from 0 to {size - 1} (the board is {size}x{size})",
                )
        simulations = self._simulations_from(body)
        async with self._exclusive():
            state = self.state
            if state.done:
                raise api_error(web.HTTPBadRequest, "the game is over: start a new game or undo")
            if state.to_play != self.human:
                raise api_error(web.HTTPConflict, "it is the agent's turn, not yours")
            x, y = body["x"], body["y"]
            action = self.game.from_xy(x, y)
            if not state.legal[action]:
                raise api_error(
                    web.HTTPBadRequest, f"{cell_name(x, y, size)} (x={x}, y={y}) is taken: play an empty cell"
                )
            self.simulations = simulations
            before = state.copy()
            state.play(action)
            if not state.done:
                await self._agent_moves(undo_to=before)
        return web.json_response(self.snapshot())

    async def _undo(self, request: web.Request) -> web.Response:
        await read_body(request, allowed=set())
        async with self._exclusive(stops_the_search=True):
            moves = list(self.state.moves)
            mover = [1 if i % 2 == 0 else -1 for i in range(len(moves))]  # black moves first
            if self.human not in mover:
                raise api_error(web.HTTPBadRequest, "nothing to undo: you have not moved yet")
            keep = len(moves) - 1 - mover[::-1].index(self.human)  # drop the person's last move and after
            self.state = type(self.state).from_moves(self.game, moves[:keep])
            self.analyses = [a for a in self.analyses if a.ply < keep]
        return web.json_response(self.snapshot())

    def _simulations_from(self, body: dict[str, Any]) -> int:
        value = body.get("simulations", self.simulations)
        if type(value) is not int or not 1 <= value <= MAX_SIMULATIONS:
            raise api_error(
                web.HTTPBadRequest, f"simulations={value!r}: give an integer from 1 to {MAX_SIMULATIONS}"
            )
        return int(value)

    @contextlib.asynccontextmanager
    async def _exclusive(self, *, stops_the_search: bool = False) -> AsyncIterator[None]:
        """One change to the game at a time: a move while the agent thinks is refused, not queued; a
        new game or an undo ends the search (from its worker thread's start on: polled) and goes first."""
        assert self._busy is not None
        if self._busy.locked() and not (stops_the_search and self.thinking):
            raise api_error(web.HTTPConflict, "the agent is thinking: wait for its move")
        until = time.monotonic() + STOP_WAIT_S
        while self._busy.locked() and time.monotonic() < until:
            self._stopped = True
            self._engine.interrupt()
            await asyncio.sleep(0.02)
        if self._busy.locked():
            raise api_error(web.HTTPConflict, f"the agent's search did not stop within {STOP_WAIT_S:g} s")
        async with self._busy:
            self._stopped = False
            try:
                yield
            finally:
                self.events.changed()

    async def _agent_moves(self, *, undo_to: Any) -> None:
        """Search the position in the worker thread and play the most visited move.

        If the search fails, the game goes back to `undo_to` (the page's move is not kept unanswered).
        """
        root = self.state.copy()
        self.thinking = True
        self.events.changed()
        try:
            loop = asyncio.get_running_loop()
            visits, value, seconds, chosen = await loop.run_in_executor(
                self._search_thread, self._search, root
            )
        except Exception as e:
            log.exception("the agent's search failed")
            self.state = undo_to
            raise api_error(web.HTTPInternalServerError, f"the agent's search failed: {e}") from e
        finally:
            self.thinking = False
        if self.closing:  # an interrupted search's move is not played: the page's move is taken back
            self.state = undo_to
            raise api_error(web.HTTPServiceUnavailable, "the server is stopping: the move was not played")
        if self._stopped:  # the new game or undo that stopped it changes the game next
            return
        action = chosen if chosen >= 0 else int(np.where(root.legal, visits, -1.0).argmax())
        self.analyses.append(
            Analysis(len(root.moves), [int(v) for v in visits], value, self.simulations, seconds)
        )
        self.state.play(action)

    def _search(self, root: Any) -> tuple[np.ndarray, float, float, int]:
        """(visit counts, root value from the agent's view, seconds, the search's own choice or -1):
        runs in the worker thread."""
        engine = self._engine
        if self.closing:
            raise RuntimeError("the server is stopping")
        began = time.perf_counter()
        found = engine.search([root], SearchRequest(simulations=self.simulations))
        visits, value = np.asarray(found.visits[0]), float(found.values[0])
        if not np.isfinite(value):  # JSON has no NaN; the page would fail to read the whole state
            log.warning("the search's root value is %s; the page shows 0", value)
            value = 0.0
        value = float(np.clip(value, -1.0, 1.0))
        chosen = int(found.chosen_moves[0])
        return np.rint(visits).astype(np.int64), value, time.perf_counter() - began, chosen

    # --- what the page draws --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        state, game = self.state, self.game
        last = self.analyses[-1] if self.analyses else None
        return {
            "board_size": game.board_size,
            "n_in_row": game.n_in_row,
            "rule": game.rule,
            "label": str(self.player.label),
            "step": int(self.player.step),
            "board": [int(c) for c in state.board],
            "moves": [list(game.to_xy(int(a))) for a in state.moves],
            "human": self.human,
            "to_play": int(state.to_play),
            "thinking": self.thinking,
            "result": self._result(),
            "analysis": None if last is None else asdict(last),
            "analyses": [asdict(a) for a in self.analyses],
            "simulations": self.simulations,
            "max_simulations": MAX_SIMULATIONS,
            "can_undo": (self.human == 1 and len(state.moves) >= 1) or len(state.moves) >= 2,
        }

    def _result(self) -> dict[str, Any] | None:
        state = self.state
        if not state.done:
            return None
        winner = {0: "draw", self.human: "human", -self.human: "agent"}[int(state.winner)]
        line = state.winning_line() if winner != "draw" else []
        return {"winner": winner, "line": [list(self.game.to_xy(a)) for a in line]}


def cell_name(x: int, y: int, size: int) -> str:
    """A cell as the page labels it: column letter, row number counted from the bottom (H8)."""
    column = chr(ord("A") + x) if x < 26 else "A" + chr(ord("A") + x - 26)
    return f"{column}{size - y}"


def serve(
    player: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    open_browser: bool = False,
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    warm_up: bool = False,
) -> None:
    """Serve the play page until Ctrl-C (KeyboardInterrupt) or `stop` is set; `ready(url)` is called
    with the page address (token included) once it listens."""
    server = PlayServer(player, host, port, warm_up=warm_up)
    url = server.start()
    try:
        if ready is not None:
            ready(url)
        if open_browser and not webbrowser.open(url):
            print("No browser could be opened here (--browser): open the address above in one.", flush=True)
        stop = stop or threading.Event()
        while not stop.is_set():
            stop.wait(0.5)  # a short wait keeps Ctrl-C prompt
    except KeyboardInterrupt:
        return
    finally:
        server.close()
