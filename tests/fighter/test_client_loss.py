"""Client loss and hostile clients over real aiortc peers: the trainer never hangs, says what
happened, and either goes on with a new client or stops with one message naming the client (hostile
replies: test_hostile_replies.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.transports import ClientLost, WebRTCTransport
from tests.fighter.transport_checks import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def transport() -> Iterator[WebRTCTransport]:
    t = WebRTCTransport("python", connect_timeout_s=30, step_timeout_s=5)
    yield t
    t.close()


Respond = Callable[[str | bytes], Any]


class Rogue:
    """A client of the test's making, with the run's token, on a real aiortc peer in a thread of
    its own: it says `hello`, then answers each message with `respond`."""

    def __init__(self, transport: WebRTCTransport, respond: Respond, hello: Any = None) -> None:
        self.error: BaseException | None = None
        args, token = transport.connection.client_args, transport.connection.token

        def run() -> None:
            try:
                asyncio.run(python_peer.play(args, token, respond, watch_stdin=False, hello=hello))
            except BaseException as e:  # kept for the test to look at; a dropped peer just ends
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


def honest() -> Respond:
    from framework_plugins.fighter.arenas import Arenas

    arenas = Arenas()
    return lambda raw: python_peer.answer(arenas, raw)


def take_over_honestly(transport: WebRTCTransport) -> list[str]:
    """An honest client of the test's takes the connection over: the types of what it is sent."""
    seen: list[str] = []
    answer = honest()

    def respond(raw: str | bytes) -> Any:
        seen.append(json.loads(raw)["type"])
        return answer(raw)

    Rogue(transport, respond)
    wait_for(lambda: transport.connection.takeovers == 1, 20, "the takeover")
    return seen


def test_a_killed_python_peer_is_started_anew_within_seconds_and_training_goes_on(
    transport: WebRTCTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    env.step(0)
    assert transport.process is not None
    transport.process.kill()
    t0, wall0 = time.monotonic(), time.time()
    _, _, _, truncated, info = env.step(0)
    assert truncated and info["reconnected"]
    said = [r.getMessage() for r in caplog.records if "lost the Python game peer" in r.getMessage()]
    assert said and "exited with code -9" in said[0] and "starting a new one" in said[0]
    said_at = next(r.created for r in caplog.records if "lost the Python game peer" in r.getMessage())
    assert said_at - wall0 < 5  # said at once
    assert time.monotonic() - t0 < 10
    env.reset(seed=1)
    for _ in range(20):
        assert not env.step(1)[3]
    assert transport.restarts == 1


def test_closing_says_nothing_of_a_lost_client_while_that_client_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    t = WebRTCTransport("python", connect_timeout_s=30, step_timeout_s=5, heartbeat_timeout_s=0.5)
    try:
        env = FightingEnv(transport=t)
        env.reset(seed=0)
        env.step(0)
        assert t.process is not None
        os.kill(t.process.pid, signal.SIGSTOP)  # a client slow to end: silent well past the heartbeat
    finally:
        t.close()
    assert t.process is None
    said = [r.getMessage() for r in caplog.records if r.name.startswith("framework_plugins.fighter")]
    assert said == []


def test_a_client_that_stops_answering_steps_is_dropped_and_replaced(transport: WebRTCTransport) -> None:
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    answer = honest()
    Rogue(transport, lambda raw: answer(raw) if json.loads(raw)["type"] != "step" else None)
    wait_for(lambda: transport.connection.takeovers == 1, 20, "the takeover")
    env.step(0)  # the takeover truncates the round
    env.reset(seed=0)
    t0 = time.monotonic()
    _, _, _, truncated, _ = env.step(0)  # unanswered: dropped after step_timeout_s, our peer again
    assert truncated and 5 <= time.monotonic() - t0 < 15
    assert "did not answer a step within 5 s" in transport.lost_reasons[-1] and transport.restarts == 1
    env.reset(seed=2)
    assert not env.step(0)[3]


def test_a_bad_sdp_with_the_right_token_is_refused_and_the_live_client_plays_on(
    transport: WebRTCTransport,
) -> None:
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    for sdp in ("garbage", "v=0\r\nm=audio 9 RTP/AVP 0\r\n", "", 7, "x" * 20_000):
        body = json.dumps({"sdp": sdp, "type": "offer", "token": transport.connection.token}).encode()
        request = urllib.request.Request(transport.connection.offer_url, data=body, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        assert err.value.code == 400
        assert err.value.read().decode().startswith("refused: the offer")
    assert transport.connection.connected.is_set() and transport.connection.takeovers == 0
    for _ in range(10):
        env.step(0)


@pytest.mark.parametrize("token", ["t\u00f6ken", "\u043a\u043b\u044e\u0447", "%FF%FE"])
def test_a_wrong_token_in_any_encoding_is_403(transport: WebRTCTransport, token: str) -> None:
    base = transport.connection.public_url
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{base}?token={urllib.parse.quote(token)}", timeout=5)
    assert err.value.code == 403
    body = json.dumps({"sdp": "v=0", "type": "offer", "token": token}).encode()
    request = urllib.request.Request(transport.connection.offer_url, data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 403


def test_a_client_that_never_says_hello_never_touches_the_live_one(transport: WebRTCTransport) -> None:
    transport.connection.signaling_timeout_s = 2.0
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    rogue = Rogue(transport, honest(), hello='{"type": "pong", "id": 1}')
    rogue.thread.join(timeout=20)  # closed by the trainer: its first message was not a hello
    assert not rogue.thread.is_alive()
    assert transport.connection.takeovers == 0
    for _ in range(10):
        assert not env.step(0)[3]


def test_a_takeover_tells_the_replaced_client_and_play_goes_on_with_the_new_one(
    transport: WebRTCTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    first = transport.process
    assert first is not None
    seen = take_over_honestly(transport)
    first.wait(timeout=10)  # told it was replaced, its channel closed: the old peer exits
    assert any(
        "took over the connection; the previous one was told" in r.getMessage() for r in caplog.records
    )
    assert env.step(0)[3]  # the round in progress ended truncated
    env.reset(seed=3)
    for _ in range(5):
        assert not env.step(2)[3]
    assert "step" in seen and transport.restarts == 0  # the new client played, ours was not restarted
    wait_for(lambda: "status" in seen, 5, "a status message to the new client")


def test_what_was_meant_for_a_replaced_client_neither_reaches_nor_answers_for_the_new_one(
    transport: WebRTCTransport,
) -> None:
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    env.step(0)
    replaced = transport.connection.generation
    seen = take_over_honestly(transport)
    # A step sent as the takeover happened (its check passed just before), and an error the replaced
    # client answered with, still in the inbox: the new client is sent a reset first, and plays.
    transport.connection.send(
        {"type": "step", "episode": transport.episode, "step": 9, "actions": [0]}, replaced
    )
    transport.connection.inbox.put((replaced, "error", "the game client (python) reported: a late error"))
    assert env.step(0)[3]  # the round in progress ended truncated; no ProtocolError from the old client
    env.reset(seed=3)
    for _ in range(5):
        assert not env.step(2)[3]
    assert next(t for t in seen if t in ("reset", "step")) == "reset"


@pytest.fixture
def users_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """env.headless=false: the trainer opens the user's page and does not own it; here a Python
    peer started by the test plays that page (the list holds each one started)."""
    pages: list[Any] = []

    def open_page(url: str, public_url: str, *, open_browser: bool = True) -> None:
        token = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["token"][0]
        pages.append(lambda: python_peer.spawn([public_url + "offer"], token))
        pages.append(pages[-1]())

    monkeypatch.setattr("framework_plugins.fighter.transports.open_in_users_browser", open_page)
    yield pages
    for page in pages:
        if not callable(page) and page.poll() is None:
            page.kill()


def test_a_lost_user_page_is_waited_for_saying_so_then_one_clear_error(
    users_page: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    t = WebRTCTransport("browser", headless=False, connect_timeout_s=30, step_timeout_s=5)
    try:
        assert not t.owns_client
        env = FightingEnv(transport=t, reconnect_timeout_s=3)
        env.reset(seed=0)
        users_page[1].kill()
        t0, wall0 = time.monotonic(), time.time()
        with pytest.raises(ClientLost) as lost:
            for _ in range(10_000):
                env.step(0)
        waited = [r for r in caplog.records if "the game page disconnected" in r.getMessage()]
        assert waited and "waiting up to 3 s (env.connect_timeout_s)" in waited[0].getMessage()
        assert waited[0].created - wall0 < 5  # said at once, not after the wait
        assert 3 <= time.monotonic() - t0 < 10
        message = str(lost.value)
        assert f"the game page at {t.connection.public_url} disconnected" in message
        assert "did not come back within 3 s" in message and t.connection.token not in message
    finally:
        t.close()


def test_a_user_page_that_comes_back_in_time_plays_on(users_page: list[Any]) -> None:
    t = WebRTCTransport("browser", headless=False, connect_timeout_s=30, step_timeout_s=5)
    try:
        env = FightingEnv(transport=t, reconnect_timeout_s=30)
        env.reset(seed=0)
        users_page[1].kill()
        wait_for(lambda: not t.connection.connected.is_set(), 5, "the loss being noticed")
        users_page.append(users_page[0]())  # the user reloads the page
        assert env.step(0)[3]  # truncated: the round was lost with the page
        env.reset(seed=1)
        assert not env.step(0)[3] and t.restarts == 0
    finally:
        t.close()


def test_nothing_said_about_a_lost_client_names_the_token(
    transport: WebRTCTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    assert transport.process is not None
    transport.process.kill()
    env.step(0)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "lost the Python game peer" in text and transport.connection.token not in text


# -- the page's phase, and a takeover before the arenas' first step -------------------------------


def test_an_evaluation_is_shown_on_the_training_page_until_training_steps_again() -> None:
    from framework_plugins.fighter.config import FighterConfig
    from framework_plugins.fighter.plugin import Fighter

    plugin = Fighter(FighterConfig(transport="python", n_envs=2))
    venv = plugin.make_vector(seed=0, n=2)
    try:
        venv.reset(seed=0)
        venv.step(np.zeros(2, dtype=int))
        status = venv.transport.connection.status
        assert status["phase"] == "training" and status["steps"] == 2
        evaluation = plugin.make_variant("aggressive", seed=1)
        assert status["phase"] == "evaluating"
        assert type(evaluation.unwrapped.transport).__name__ == "InProcessTransport"
        venv.step(np.zeros(2, dtype=int))
        assert status["phase"] == "training" and status["steps"] == 4
    finally:
        venv.close()


def test_a_takeover_before_the_first_step_of_the_arenas_lets_training_start_with_the_new_client(
    transport: WebRTCTransport,
) -> None:
    """The page opened by hand before the trainer's own client (env.headless=true): it takes over
    before the vector env's first reset, which goes on with it rather than failing the run."""
    from framework_plugins.fighter.vector import FighterVectorEnv

    Rogue(transport, honest())
    wait_for(lambda: transport.connection.takeovers == 1, 20, "the takeover")
    env = FighterVectorEnv(4, transport=transport, opponent="aggressive", reconnect_timeout_s=30)
    obs, _ = env.reset(seed=0)  # the first request meets the takeover: reconnected, then reset
    assert obs.shape[0] == 4
    for _ in range(5):
        assert not env.step(np.zeros(4, dtype=int))[3].any()
