"""The WebRTC transport with a real aiortc game client (the Python peer): contract and faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from framework_plugins.fighter import python_peer
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.protocol import pack_game
from framework_plugins.fighter.transports import WebRTCTransport
from framework_plugins.fighter.webrtc import PeerGone
from tests.fighter.transport_checks import (
    assert_a_lost_peer_is_started_anew,
    assert_passes_env_checkers,
    assert_plays_like_the_twin,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def transport():
    t = WebRTCTransport("python", connect_timeout_s=30, step_timeout_s=10)
    yield t
    t.close()


def test_python_transport_passes_the_env_checkers(transport: WebRTCTransport) -> None:
    assert_passes_env_checkers(transport)


def test_the_twin_over_webrtc_plays_exactly_as_in_process(transport: WebRTCTransport) -> None:
    actions = np.random.default_rng(0).integers(0, 9, 200)
    assert_plays_like_the_twin(transport, opponent="random", seed=5, actions=actions)


def test_wrong_or_missing_token_is_refused(transport: WebRTCTransport) -> None:
    base = transport.url.split("?")[0]
    for url in (base, base + "?token=wrong"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=5)
        assert err.value.code == 403
    offer = json.dumps({"sdp": "v=0", "type": "offer", "token": "wrong"}).encode()
    request = urllib.request.Request(transport.connection.offer_url, data=offer, method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 403
    with urllib.request.urlopen(transport.url, timeout=5) as page:  # the right token opens the page
        assert page.status == 200


def test_a_token_that_looks_like_a_flag_still_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("secrets.token_urlsafe", lambda n: "-h--leading-dash-token")
    t = WebRTCTransport("python", connect_timeout_s=30)
    try:
        assert t.connection.token == "-h--leading-dash-token"
        assert len(t.reset([0], "idle")) == 1
    finally:
        t.close()


def test_the_python_peer_refuses_to_start_without_a_token() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "framework_plugins.fighter.python_peer", "http://127.0.0.1:9/offer"],
        capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                        if k != python_peer.TOKEN_VARIABLE},
    )  # fmt: skip
    assert r.returncode == 2
    assert "set FRAMEWORK_FIGHTER_TOKEN" in r.stderr


@pytest.mark.parametrize(
    ("sig", "said", "within"),
    [
        (signal.SIGKILL, "the Python game peer exited with code -9", 1.0),
        (signal.SIGSTOP, "no heartbeat", 2.5),
    ],
    ids=["killed", "frozen"],
)
def test_a_dead_or_frozen_peer_is_a_clear_error_at_once_when_reconnecting_is_off(
    transport: WebRTCTransport, sig: int, said: str, within: float
) -> None:
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    env.step(0)
    assert transport.process is not None
    os.kill(transport.process.pid, sig)
    t0 = time.monotonic()
    with pytest.raises(PeerGone, match=said):
        for _ in range(10_000):
            env.step(0)
    assert time.monotonic() - t0 < within
    if sig == signal.SIGSTOP:
        os.kill(transport.process.pid, signal.SIGKILL)


def test_a_malformed_message_drops_the_client_saying_why(transport: WebRTCTransport) -> None:
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    # Delivered through the same handler as every data-channel message.
    transport.connection._loop.call_soon_threadsafe(
        transport.connection._on_message, '{"type": "result", "episode"'
    )
    with pytest.raises(PeerGone, match="it sent a malformed message: malformed JSON message"):
        env.step(0)


def test_a_late_reply_from_before_a_reset_is_dropped(transport: WebRTCTransport) -> None:
    env = FightingEnv(transport=transport)
    env.reset(seed=0)
    obs_before, *_ = env.step(2)
    stale = {"type": "result", "episode": transport.episode - 1, "step": 1, "games": [pack_game(env.game)]}
    transport.connection.inbox.put((transport.connection.generation, "result", stale))
    obs, *_ = env.step(2)
    assert env.game["frame"] == 2 * 4  # the stale result was skipped, not taken for this step
    assert not np.array_equal(obs, obs_before)


def test_a_reconnecting_client_truncates_the_round_and_play_goes_on(transport: WebRTCTransport) -> None:
    assert_a_lost_peer_is_started_anew(transport)
