"""The play page: its JSON API against a started server (the page in a real Chromium:
test_play_page_browser.py).

The agent is the tree search with a hand-made prior in place of a network (moves near stones and
the centre first): legal, quick and deterministic, and its visit counts vary as a trained agent's do.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from framework_plugins.gomoku.page import PlayServer, serve
from framework_plugins.gomoku.rules import Gomoku
from framework_plugins.mcts.config import SequentialConfig
from framework_plugins.mcts.engines import local_search
from framework_plugins.mcts.puct import PuctSearch

SIMULATIONS = 48


def near_stones_evaluator(
    game: Gomoku,
) -> Callable[[], Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]:
    """A factory of an evaluator whose prior favours cells beside stones and near the centre; value 0."""
    size = game.board_size
    ys, xs = np.mgrid[0:size, 0:size]
    centre = -0.3 * np.hypot(xs - (size - 1) / 2, ys - (size - 1) / 2)

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stones = np.pad(planes[:, 0] + planes[:, 1], ((0, 0), (1, 1), (1, 1)))
        beside = sum(
            stones[:, 1 + dy : 1 + dy + size, 1 + dx : 1 + dx + size]
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
        )
        logits = (1.5 * beside + centre).reshape(len(planes), -1).astype(np.float32)
        return logits, np.zeros(len(planes), dtype=np.float32)

    return lambda: evaluate


class GatedEngine:
    """A real engine whose searches wait for `go`: a test holds the agent 'thinking' as long as it likes."""

    def __init__(self, engine: PuctSearch, go: threading.Event) -> None:
        self.engine, self.go, self.searching = engine, go, threading.Event()

    @property
    def num_simulations(self) -> int:
        return self.engine.num_simulations

    def warm_up(self, root: Any) -> None:
        self.engine.warm_up(root)

    def interrupt(self) -> None:
        self.engine.interrupt()

    def search(self, roots: Any, request: Any = None) -> Any:
        self.searching.set()
        assert self.go.wait(30), "the test never let the search go"
        return self.engine.search(roots, request)

    def close(self) -> None:
        self.engine.close()


class SearchOnlyPlayer:
    """What `play` gets from a trained run, with a hand-made prior in place of its network."""

    label = "runs/hand-made-prior"
    step = 0

    def __init__(self, game: Gomoku, go: threading.Event | None = None) -> None:
        self.game, self.go = game, go

    def engine(self, game: Gomoku | None = None, seed: int | None = None) -> Any:
        engine = local_search(
            SequentialConfig(num_simulations=SIMULATIONS),
            game=game or self.game,
            evaluator_factory=near_stones_evaluator(self.game),
            seed=0 if seed is None else seed,
        )
        return engine if self.go is None else GatedEngine(engine, self.go)


def request(
    server: PlayServer, path: str, body: Any = None, *, token: str | None = None, raw: bytes | None = None
) -> tuple[int, Any]:
    """(status, decoded JSON or text) of GET path (body None) or POST path with a JSON body."""
    token = server.token if token is None else token
    url = f"http://127.0.0.1:{server.port}{path}" + (f"?token={urllib.parse.quote(token)}" if token else "")
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def state_of(server: PlayServer) -> dict[str, Any]:
    status, state = request(server, "/api/state")
    assert status == 200
    return state


# --- pushed changes -----------------------------------------------------------------------


def next_event(stream: Any) -> dict[str, Any]:
    """The next server-sent event's state (keep-alive comments skipped)."""
    data = []
    while True:
        line = stream.readline().decode()
        assert line, "the event stream ended"
        if line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "\n" and data:
            return json.loads("".join(data))


def events_of(server: PlayServer) -> Any:
    url = f"http://127.0.0.1:{server.port}/api/events?token={urllib.parse.quote(server.token)}"
    return urllib.request.urlopen(url, timeout=30)


def test_a_listening_page_gets_each_change_pushed_as_it_happens() -> None:
    go = threading.Event()
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4), go))
    server.start()
    try:
        with events_of(server) as events:
            assert events.headers["Content-Type"].startswith("text/event-stream")
            first = next_event(events)
            assert first["moves"] == [] and not first["thinking"]
            mover = threading.Thread(target=request, args=(server, "/api/move", {"x": 3, "y": 3}))
            mover.start()
            thinking = next_event(events)  # the person's move, and the agent held thinking
            assert thinking["thinking"] and thinking["moves"] == [[3, 3]]
            go.set()
            answered = next_event(events)
            assert not answered["thinking"] and len(answered["moves"]) == 2
            assert [a["ply"] for a in answered["analyses"]] == [1]  # its search, for stepping back
            mover.join(30)
            request(server, "/api/undo", {})
            assert next_event(events)["moves"] == []
    finally:
        go.set()
        server.close()


def test_at_most_eight_pages_follow_a_game(server: PlayServer) -> None:
    streams = [events_of(server) for _ in range(8)]
    try:
        for stream in streams:
            assert next_event(stream)["moves"] == []
        status, answer = request(server, "/api/events")
        assert status == 503 and answer == {"error": "8 pages already follow this game: close one"}
    finally:
        for stream in streams:
            stream.close()
    deadline = time.monotonic() + 5
    while True:  # a closed page frees its place within seconds
        try:
            with events_of(server) as again:
                assert next_event(again)["moves"] == []
            break
        except urllib.error.HTTPError as e:
            assert e.code == 503 and time.monotonic() < deadline
            time.sleep(0.1)


# --- play ---------------------------------------------------------------------------------


def test_the_agent_answers_a_legal_move_with_its_search(server: PlayServer) -> None:
    status, state = request(server, "/api/move", {"x": 3, "y": 3})
    assert status == 200
    assert state["moves"][0] == [3, 3] and len(state["moves"]) == 2
    agent = 7 * state["moves"][1][1] + state["moves"][1][0]
    assert agent != 7 * 3 + 3
    assert state["board"][7 * 3 + 3] == 1 and state["board"][agent] == -1
    analysis = state["analysis"]
    assert analysis["ply"] == 1
    assert sum(analysis["visits"]) == SIMULATIONS
    assert analysis["visits"][7 * 3 + 3] == 0  # the taken cell
    assert max(analysis["visits"]) == analysis["visits"][agent]  # it plays its most visited move
    assert -1.0 <= analysis["value"] <= 1.0
    assert state["to_play"] == state["human"] == 1 and not state["thinking"] and state["result"] is None


def test_choosing_white_makes_the_agent_open(server: PlayServer) -> None:
    status, state = request(server, "/api/new", {"colour": "white"})
    assert status == 200
    assert state["human"] == -1 and state["to_play"] == -1
    assert len(state["moves"]) == 1 and sum(state["board"]) == 1
    assert sum(state["analysis"]["visits"]) == SIMULATIONS and state["analysis"]["ply"] == 0


def test_undo_takes_back_the_persons_move_and_the_agents_answer(server: PlayServer) -> None:
    first = request(server, "/api/move", {"x": 3, "y": 3})[1]
    empty = first["board"].index(0)
    assert request(server, "/api/move", {"x": empty % 7, "y": empty // 7})[0] == 200
    status, state = request(server, "/api/undo", {})
    assert status == 200
    assert state["moves"] == first["moves"] and state["board"] == first["board"]
    assert state["analysis"] == first["analysis"]  # the search that chose the move now last
    state = request(server, "/api/undo", {})[1]
    assert state["moves"] == [] and state["analysis"] is None and not state["can_undo"]
    assert request(server, "/api/undo", {}) == (400, {"error": "nothing to undo: you have not moved yet"})


def test_undo_as_white_keeps_the_agents_opening(server: PlayServer) -> None:
    opening = request(server, "/api/new", {"colour": "white"})[1]
    empty = opening["board"].index(0)
    assert request(server, "/api/move", {"x": empty % 7, "y": empty // 7})[0] == 200
    state = request(server, "/api/undo", {})[1]
    assert state["moves"] == opening["moves"] and state["to_play"] == -1
    assert request(server, "/api/undo", {})[0] == 400


def test_simulations_per_move_follow_the_page(server: PlayServer) -> None:
    state = request(server, "/api/new", {"colour": "white", "simulations": 7})[1]
    assert sum(state["analysis"]["visits"]) == 7 and state["simulations"] == 7
    empty = state["board"].index(0)
    state = request(server, "/api/move", {"x": empty % 7, "y": empty // 7})[1]
    assert state["analysis"]["simulations"] == 7


def test_a_finished_game_refuses_moves_and_says_who_won(server: PlayServer) -> None:
    state = state_of(server)
    while state["result"] is None:
        empty = state["board"].index(0)
        status, state = request(server, "/api/move", {"x": empty % 7, "y": empty // 7})
        assert status == 200
    result = state["result"]
    assert result["winner"] in ("human", "agent", "draw")
    if result["winner"] != "draw":
        colour = state["human"] if result["winner"] == "human" else -state["human"]
        assert len(result["line"]) >= 4 and all(
            state["board"][7 * y + x] == colour for x, y in result["line"]
        )
    empty = state["board"].index(0) if 0 in state["board"] else 0
    status, answer = request(server, "/api/move", {"x": empty % 7, "y": empty // 7})
    assert (status, answer) == (400, {"error": "the game is over: start a new game or undo"})


def move_while_the_agent_waits(server: PlayServer) -> tuple[threading.Thread, list[tuple[int, Any]]]:
    """The person's move at (3, 3) sent from a thread, once the agent's (gated) search has begun;
    its answer lands in the list."""
    answered: list[tuple[int, Any]] = []
    mover = threading.Thread(target=lambda: answered.append(request(server, "/api/move", {"x": 3, "y": 3})))
    mover.start()
    assert server._engine.searching.wait(10)
    return mover, answered


def test_while_the_agent_thinks_the_state_answers_and_moves_wait() -> None:
    go = threading.Event()
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4), go))
    server.start()
    try:
        mover, answered = move_while_the_agent_waits(server)
        state = state_of(server)
        assert state["thinking"] and state["moves"] == [[3, 3]]
        said = (409, {"error": "the agent is thinking: wait for its move"})
        assert request(server, "/api/move", {"x": 0, "y": 0}) == said
        go.set()
        mover.join(30)
        assert answered[0][0] == 200 and len(answered[0][1]["moves"]) == 2
    finally:
        go.set()
        server.close()


class StoppedByInterrupt(GatedEngine):
    """A search held until it is interrupted, as a long search (20,000 simulations) is, in effect."""

    def interrupt(self) -> None:
        self.interrupted += 1
        self.go.set()
        self.engine.interrupt()

    interrupted = 0


def interruptible_player(game: Gomoku, go: threading.Event) -> SearchOnlyPlayer:
    """A player whose searches are held until interrupted (StoppedByInterrupt)."""
    player = SearchOnlyPlayer(game, go)
    made = player.engine
    player.engine = lambda *a, **k: StoppedByInterrupt(made(*a, **k).engine, go)  # type: ignore[method-assign]
    return player


@pytest.mark.parametrize(
    ("path", "body", "moves"), [("/api/undo", {}, 0), ("/api/new", {"colour": "white"}, 1)]
)
def test_a_new_game_or_an_undo_while_the_agent_thinks_stops_its_search_and_goes_first(
    path: str, body: dict[str, Any], moves: int
) -> None:
    """They were refused (409) until the search ended: 17 s at the page's most simulations."""
    go = threading.Event()
    server = PlayServer(interruptible_player(Gomoku(board_size=7, n_in_row=4), go))
    server.start()
    try:
        mover, answered = move_while_the_agent_waits(server)
        status, state = request(server, path, body)
        mover.join(30)
        assert status == 200 and server._engine.interrupted >= 1, state
        # The stopped search's move is not played: the undo takes back the person's move alone; the
        # new game as white is the agent's opening, searched anew.
        assert len(state["moves"]) == moves and not state["thinking"], state
        assert answered and answered[0][0] == 200 and len(answered[0][1]["moves"]) <= 1, answered
        assert state_of(server)["moves"] == state["moves"] and len(server.analyses) == moves
        assert request(server, "/api/move", {"x": 0, "y": 0})[0] == 200  # the game goes on
    finally:
        go.set()
        server.close()


def test_a_warmed_up_server_searches_once_before_the_first_move() -> None:
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4)), warm_up=True)
    server.start()
    try:
        deadline = time.monotonic() + 30
        while server._engine.simulations < 2:  # the compiled kernels' first call, with no one waiting
            assert time.monotonic() < deadline, "the server never warmed up"
            time.sleep(0.05)
        assert state_of(server)["moves"] == [] and not server.analyses
        assert request(server, "/api/move", {"x": 3, "y": 3})[0] == 200
        assert len(state_of(server)["moves"]) == 2
    finally:
        server.close()


def test_a_search_the_stopping_server_interrupted_plays_no_move() -> None:
    go = threading.Event()
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4), go))
    server.start()
    try:
        mover, answered = move_while_the_agent_waits(server)
        server.closing = True  # as close() sets it, before it interrupts the search
        go.set()
        mover.join(30)
        assert answered == [(503, {"error": "the server is stopping: the move was not played"})]
        assert server.state.moves == []  # the person's move taken back, no answer played
    finally:
        go.set()
        server.close()


def test_serve_announces_the_page_and_stops_when_told() -> None:
    stop, urls = threading.Event(), list[str]()
    player = SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4))
    thread = threading.Thread(target=serve, args=(player,), kwargs={"ready": urls.append, "stop": stop})
    thread.start()
    deadline = time.monotonic() + 10
    while not urls and time.monotonic() < deadline:
        time.sleep(0.05)
    with urllib.request.urlopen(urls[0], timeout=10) as page:
        assert page.status == 200
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(urls[0], timeout=2)
