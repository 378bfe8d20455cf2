"""What the play page refuses: a wrong or missing token, requests that are not HTTP, bodies of any
bad shape or size; and the token in no log line (the API itself: test_play_page.py)."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from framework_plugins.gomoku.page import MAX_BODY_BYTES, PlayServer
from framework_plugins.gomoku.rules import Gomoku
from tests.gomoku.test_play_page import SearchOnlyPlayer, request, state_of
from tests.token_leaks import exchange, hostile_requests, percent_encoded, token_traces

# --- the token ----------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["", "wrong", "ümlaut"])
@pytest.mark.parametrize("path", ["/", "/api/state", "/api/events"])
def test_page_and_state_need_the_token(server: PlayServer, path: str, token: str) -> None:
    status, answer = request(server, path, token=token)
    assert status == 403
    assert "token" in str(answer)


def test_a_move_without_the_token_is_refused_and_not_played(server: PlayServer) -> None:
    status, answer = request(server, "/api/move", {"x": 3, "y": 3}, token="wrong")
    assert (status, answer) == (403, {"error": "wrong or missing token: open the address the server printed"})
    assert state_of(server)["moves"] == []


def test_the_page_is_served_with_the_token_and_names_only_its_own_files(server: PlayServer) -> None:
    status, page = request(server, "/")
    assert status == 200 and "/static/play.js" in page
    assert request(server, "/static/play.js", token="")[0] == 200
    assert request(server, "/static/page.py", token="")[0] == 404
    assert request(server, "/static/..%2Fpage.py", token="")[0] == 404


def test_the_token_is_never_logged(server: PlayServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    request(server, "/")
    request(server, "/api/move", {"x": 3, "y": 3})
    request(server, "/api/move", {"x": 9, "y": 3})
    request(server, "/api/state", token="wrong")
    assert server.token not in caplog.text


def test_a_request_that_is_not_http_or_ends_early_is_one_log_line_without_the_token(
    server: PlayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    target = f"/api/move?token={server.token}"
    half_sent = (  # the body announced, part of it sent, then the connection closed
        f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n"
        '{"x": 3,'
    )
    for data in [
        f"GET {target} HTTP/1.1\r\nBad Header\r\n\r\n",
        f"GET {target}\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
        f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        f"GET {target} HTTP/9.9\r\nHost: x\r\n\r\n",
        f"GET {target} HTTP/1.1\r\nHost: x\r\nX-Long: {'a' * 9000}\r\n\r\n",
        half_sent,
    ]:
        answer = exchange(server.port, data.encode())
        assert not answer or re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer[:200]
    time.sleep(0.5)  # the half-sent request's handler sees its connection go
    assert server.token not in caplog.text
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]
    assert any(r.name == "framework_plugins.gomoku.page.requests" for r in caplog.records)
    assert state_of(server)["moves"] == []  # the half-sent move was not played


def _refusals_logged(text: str) -> bool:
    """Each kind of refused request logged: a line too long, a URL, a method (aiohttp's C parser says
    BadHttpMethod; its Python one, where the C extension is not installed or AIOHTTP_NO_EXTENSIONS is
    set, BadStatusLine)."""
    method = "BadHttpMethod" in text or "BadStatusLine" in text
    return "LineTooLong" in text and "InvalidURLError" in text and method


def test_no_part_of_the_token_in_any_encoding_reaches_a_log_line_or_stderr(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Requests aiohttp refuses with a message quoting the request line (cut short, or the token
    percent-encoded as it came), logged at every level, aiohttp's debug lines included."""
    monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")  # aiohttp's request log says more in debug mode
    caplog.set_level(logging.DEBUG)
    server = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4)), "127.0.0.1", 0)
    server.start()
    try:
        for data in hostile_requests("/api/state", server.token):
            answer = exchange(server.port, data)
            assert not answer or re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer[:200]
        # The page still opens with the token, whole or percent-encoded.
        for token in (server.token, percent_encoded(server.token, every=3)):
            answer = exchange(
                server.port,
                f"GET /?token={token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
                half_close=False,
            )
            assert answer.startswith(b"HTTP/1.1 200 ") and b"/static/play.js" in answer, answer[:200]
        # aiohttp logs a refused request after it answered it: on a loaded machine, a moment later.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _refusals_logged(caplog.text):
            time.sleep(0.1)
    finally:
        server.close()
    said = caplog.text + capfd.readouterr().err
    assert _refusals_logged(said), said  # logged, redacted
    assert not [line for line in said.splitlines() if token_traces(line, server.token)]


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"x": 7, "y": 0}, "x=7: give an integer from 0 to 6 (the board is 7x7)"),
        ({"x": 0, "y": -1}, "y=-1: give an integer from 0 to 6"),
        ({"x": "3", "y": 3}, "x='3': give an integer"),
        ({"x": 1.0, "y": 3}, "x=1.0: give an integer"),
        ({"x": True, "y": 3}, "x=True: give an integer"),
        ({"x": 3}, "y=None: give an integer"),
        ({"x": 3, "y": 3, "z": 1}, "unknown field(s) z; valid: simulations, x, y"),
        ({"x": 3, "y": 3, "simulations": 0}, "simulations=0: give an integer from 1 to"),
        ({"x": 3, "y": 3, "simulations": 10**9}, "simulations=1000000000: give an integer from 1 to"),
        ([3, 3], "the request body must be a JSON object"),
    ],
)
def test_a_bad_move_is_refused_with_what_was_wrong(server: PlayServer, body: Any, message: str) -> None:
    status, answer = request(server, "/api/move", body)
    assert status == 400
    assert message in answer["error"]
    assert state_of(server)["moves"] == []


@pytest.mark.parametrize(("path", "body", "status"), [("/api/nope", None, 404), ("/api/state", {}, 405)])
def test_a_call_the_api_lacks_is_json_naming_those_it_has(
    server: PlayServer, path: str, body: Any, status: int
) -> None:
    """The page shows an API error's "error" as it is: a plain-text 404 or 405 showed as nothing."""
    got, answer = request(server, path, body)
    method = "GET" if body is None else "POST"
    assert got == status and isinstance(answer, dict), (got, answer)
    assert answer["error"] == (
        f"{method} {path}: no such call; the API's: GET /api/events, GET /api/state, POST /api/move, "
        "POST /api/new, POST /api/undo"
    )
    assert request(server, path, body, token="wrong")[0] == 403  # the token still first


def test_a_body_that_is_not_json_is_refused(server: PlayServer) -> None:
    status, answer = request(server, "/api/move", raw=b"x=3&y=3")
    assert (status, answer) == (400, {"error": "the request body must be a JSON object"})


def test_a_huge_body_is_refused_unread(server: PlayServer) -> None:
    status, answer = request(server, "/api/move", raw=b'{"x": 3, "y": 3, "pad": "' + b"a" * 100_000 + b'"}')
    assert status == 413
    assert answer == {"error": f"the request body is larger than the {MAX_BODY_BYTES} bytes allowed"}


JSON_OF_EVERY_SHAPE = [
    b"[" * 1000,  # nested deeper than Python's recursion limit
    b'{"a":' * 150 + b"1" + b"}" * 150,  # deep, under the size limit
    b'{"colour": ["black"]}',
    b'{"colour": {"black": 1}}',
    b'{"colour": null}',
    b'{"colour": 1}',
    b"null",
    b'"black"',
    b"1e999",
    b"\xff\xfe",
]


@pytest.mark.parametrize("path", ["/api/new", "/api/move", "/api/undo"])
@pytest.mark.parametrize("raw", JSON_OF_EVERY_SHAPE)
def test_json_of_any_shape_is_a_400_with_what_was_wrong(server: PlayServer, path: str, raw: bytes) -> None:
    status, answer = request(server, path, raw=raw)
    assert status == 400 and isinstance(answer, dict) and answer["error"], (status, answer)
    assert state_of(server)["moves"] == []


def test_a_new_game_needs_a_colour(server: PlayServer) -> None:
    status, answer = request(server, "/api/new", {"colour": "red"})
    assert (status, answer) == (400, {"error": 'colour=\'red\': choose "black" or "white"'})


def test_a_taken_cell_is_refused(server: PlayServer) -> None:
    state = request(server, "/api/move", {"x": 3, "y": 3})[1]
    agent_x, agent_y = state["moves"][1]
    for x, y in ((3, 3), (agent_x, agent_y)):
        status, answer = request(server, "/api/move", {"x": x, "y": y})
        assert status == 400
        assert f"(x={x}, y={y}) is taken: play an empty cell" in answer["error"]
    assert len(state_of(server)["moves"]) == 2


def test_a_page_served_on_every_interface_is_named_by_an_address_other_machines_open(tmp_path: Path) -> None:
    """`play --host 0.0.0.0` printed http://0.0.0.0:PORT/, which no other machine can open."""
    from framework_plugins.web.page_server import PageServer

    (tmp_path / "index.html").write_text("<html></html>")
    log = logging.getLogger("test-page")
    for host in ("0.0.0.0", "127.0.0.1"):
        server = PageServer(
            tmp_path, "index.html", host=host, name="test-page", loggers=[log], request_log=log
        )
        try:
            assert "0.0.0.0" not in server.address
            assert server.address.startswith("http://127.0.0.1:") is (host == "127.0.0.1")
        finally:
            server.loop.close()
