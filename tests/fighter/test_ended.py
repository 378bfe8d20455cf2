"""The end of a run as a game client sees it, over real aiortc peers: the trainer's last message says
how the run ended (checked as every message is) and the client closes its side; "updating the
policy" is said only once the trainer has stepped and then stands idle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field

import numpy as np
import pytest

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.arenas import Arenas
from framework_plugins.fighter.config import FighterConfig
from framework_plugins.fighter.ending import run_ending
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.plugin import Fighter
from framework_plugins.fighter.protocol import ENDINGS, ProtocolError, decode
from framework_plugins.fighter.transports import WebRTCTransport
from framework_plugins.fighter.webrtc import WebRTCClient
from tests.fighter.transport_checks import wait_for

pytestmark = pytest.mark.slow


@dataclass
class UsersPage:
    """The user's page (env.headless=false), played by an aiortc peer in a thread of the test's:
    every message it gets, in order, and the thread, which ends once the peer has closed its side."""

    seen: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def messages(self, kind: str) -> list[dict]:
        return [m for m in map(json.loads, self.seen) if m["type"] == kind]

    def open(self, url: str, public_url: str, *, open_browser: bool = True) -> None:
        token = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["token"][0]
        arenas = Arenas()

        def respond(raw: str | bytes) -> object:
            assert isinstance(raw, str)
            self.seen.append(raw)
            return python_peer.answer(arenas, raw)

        play = python_peer.play([public_url + "offer"], token, respond, watch_stdin=False)
        thread = threading.Thread(target=asyncio.run, args=(play,), daemon=True)
        thread.start()
        self.threads.append(thread)


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> UsersPage:
    played = UsersPage()
    monkeypatch.setattr("framework_plugins.fighter.transports.open_in_users_browser", played.open)
    return played


@pytest.fixture
def plugin(page: UsersPage) -> Fighter:
    """The fighter plugin with the user's page as its client, as a run builds it."""
    return Fighter(FighterConfig(transport="browser", headless=False, n_envs=2, connect_timeout_s=30))


def test_an_ended_message_is_checked_as_every_message_is() -> None:
    for status in ENDINGS:
        assert decode(f'{{"type":"ended","status":"{status}","steps":7}}', allowed=("ended",))
    refused = {
        '{"type":"ended","status":"crashed","steps":7}': "is not one of finished, stopped, failed, ended",
        '{"type":"ended","status":"finished","steps":-1}': "out of range",
        '{"type":"ended","status":"finished","steps":true}': "must be an integer",
        '{"type":"ended","status":"finished"}': "'steps' must be an integer",
        '{"type":"ended","status":"finished","steps":1,"reason":"x"}': "unexpected field",
        '{"type":"ended","status":["finished"],"steps":1}': "must be a string",
    }
    for raw, why in refused.items():
        with pytest.raises(ProtocolError, match=why):
            decode(raw, allowed=("ended",))
    with pytest.raises(ProtocolError, match="unexpected message type 'ended'"):
        decode('{"type":"ended","status":"failed","steps":1}', allowed=("result", "pong"))


def test_the_trainer_holds_its_ended_message_to_the_same_checks_before_sending_it() -> None:
    connection = WebRTCClient()
    try:
        with pytest.raises(ProtocolError, match="'status'='crashed' is not one of"):
            connection.end("crashed", 1)
        with pytest.raises(ProtocolError, match="'steps'=-1 is out of range"):
            connection.end("finished", -1)
        assert connection.end("finished", 1) is False  # valid, and no client to tell
    finally:
        connection.close()


def _closed_during(error: BaseException | None, stop: threading.Event | None) -> str:
    """What run_ending says in a close called on the way out of `error` (or of no error)."""
    try:
        try:
            if error is not None:
                raise error
        finally:
            ending = run_ending(stop)
    except BaseException:  # the error raised on purpose, seen by run_ending above
        pass
    return ending


def test_the_ending_comes_from_the_exception_on_its_way_out_else_from_the_stop_flag() -> None:
    unset, stopped = threading.Event(), threading.Event()
    stopped.set()
    assert _closed_during(KeyboardInterrupt(), unset) == "stopped"  # SIGTERM, a second Ctrl-C
    assert _closed_during(ValueError("bad"), unset) == "failed"
    assert _closed_during(None, stopped) == "stopped"  # a first Ctrl-C, a pruner: training returned
    assert _closed_during(None, unset) == "finished"
    assert _closed_during(None, None) == "ended"  # no stop flag given: finished or stopped, unknown
    try:
        raise ValueError("handled, and over")
    except ValueError:
        pass
    assert run_ending(unset) == "finished"  # an exception handled earlier is no ending


@pytest.mark.parametrize(
    ("error", "stop_set", "expected"),
    [(None, False, "finished"), (None, True, "stopped"), (KeyboardInterrupt, False, "stopped"),
     (RuntimeError, False, "failed")],
    ids=["finished", "first-ctrl-c", "sigterm", "failed"],
)  # fmt: skip
def test_closing_tells_the_page_how_the_run_ended_and_the_page_closes_its_side(
    plugin: Fighter, page: UsersPage, error: type[BaseException] | None, stop_set: bool, expected: str
) -> None:
    stop = threading.Event()
    plugin.watch_run(stop, start_step=100)  # as the run gives it: a run resumed at step 100
    venv = plugin.make_vector(seed=0, n=2)
    venv.reset(seed=0)
    for _ in range(3):
        venv.step(np.zeros(2, dtype=int))
    if stop_set:
        stop.set()
    with pytest.raises(error) if error is not None else contextlib.nullcontext():
        try:  # as an agent closes its envs: in a finally, on every way out of training
            if error is not None:
                raise error
        finally:
            venv.close()
    last = decode(page.seen[-1], allowed=("ended",))  # the very last message, and a valid one
    assert last == {"type": "ended", "status": expected, "steps": 106}  # counted on from the run's step
    page.threads[0].join(timeout=10)  # the page closed its side once it had it
    assert not page.threads[0].is_alive()


def test_a_dropped_connection_is_no_ended_message(page: UsersPage) -> None:
    """A connection that drops (the trainer killed, a network fault) ends with no ended message:
    the page goes on reconnecting as before."""
    t = WebRTCTransport("browser", headless=False, connect_timeout_s=30)
    try:
        env = FightingEnv(transport=t)
        env.reset(seed=0)
        env.step(0)
        t.connection.drop("dropped by the test")
        page.threads[0].join(timeout=10)
        assert not page.threads[0].is_alive()
        assert page.messages("ended") == []
    finally:
        t.close()
    assert page.messages("ended") == []  # nobody left to tell


def test_the_trainer_is_starting_not_updating_until_its_first_step(page: UsersPage) -> None:
    t = WebRTCTransport("browser", headless=False, connect_timeout_s=30)
    try:
        # Status goes out once a second: three of them span two seconds of no step, well past
        # IDLE_S (the agent being built, say), and each says "starting".
        wait_for(lambda: len(page.messages("status")) >= 3, 10, "three status messages")
        env = FightingEnv(transport=t)
        env.reset(seed=0)
        assert {m["phase"] for m in page.messages("status")} == {"starting"}
        env.step(0)
        wait_for(lambda: page.messages("status")[-1]["phase"] == "training", 5, "training")
        # Idle after stepping (an update between rollouts): now it is "updating".
        wait_for(lambda: page.messages("status")[-1]["phase"] == "updating", 5, "updating")
        assert page.messages("status")[-1]["steps"] == 1
    finally:
        t.close()
