"""Hostile replies over a real data channel: a client with the run's token that answers with malformed,
oversized, deep, out-of-range, wrong-schema or binary frames, or floods, is dropped saying why; the
trainer's own peer is started anew and training goes on, never hanging."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.protocol import GAME_WIRE_LENGTH, MAX_MESSAGE_BYTES, decode, encode, pack_game
from framework_plugins.fighter.transports import WebRTCTransport
from framework_plugins.fighter.webrtc import FLOOD_LIMIT
from tests.fighter.test_client_loss import Rogue, honest
from tests.fighter.transport_checks import wait_for

pytestmark = pytest.mark.slow


def hostile_params(kind: str, draw: st.DataObject) -> dict[str, Any]:
    """What makes this example's reply hostile, drawn in the test (not in the rogue's thread)."""
    if kind == "malformed":
        return {"cut": draw.draw(st.floats(0.01, 0.99), label="cut")}
    if kind == "deep":
        return {"depth": draw.draw(st.integers(4, 30_000), label="depth")}
    if kind == "out_of_range":
        return {
            "column": draw.draw(st.integers(0, GAME_WIRE_LENGTH - 1), label="column"),
            "value": draw.draw(st.sampled_from([-(10**30), -500, 10**12, 10**30, 2**63]), label="value"),
        }
    if kind == "wrong_schema":
        junk = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
        return {"junk": draw.draw(junk, label="junk")}
    if kind == "binary":
        return {"bytes": draw.draw(st.binary(min_size=1, max_size=64), label="bytes")}
    return {}


def frames(kind: str, params: dict[str, Any], request: dict[str, Any]) -> list[str | bytes]:
    """The hostile reply of `kind` to `request` (a reset or step the rogue received)."""
    game = pack_game(FightingEnv().game)
    reply = {"type": "result", "episode": request["episode"], "step": request.get("step", 0), "games": [game]}
    if kind == "malformed":
        text = encode(reply)
        return [text[: max(1, int(params["cut"] * len(text)))]]
    if kind == "oversized":
        return [encode({**reply, "pad": "x" * MAX_MESSAGE_BYTES})]
    if kind == "deep":
        depth = params["depth"]
        return ['{"type": "result", "games": ' + "[" * depth + "]" * depth + "}"]
    if kind == "out_of_range":
        game[params["column"]] = params["value"]
        return [encode(reply)]
    if kind == "wrong_schema":
        return [encode({**reply, **params["junk"], "games": "none"})]
    if kind == "binary":
        return [params["bytes"]]
    # flood: what it was asked for, then far more unsolicited answers than any client sends
    return [encode(reply)] + [encode({"type": "pong", "id": i}) for i in range(FLOOD_LIMIT * 4)]


KINDS = ("malformed", "oversized", "deep", "out_of_range", "wrong_schema", "binary", "flood")


@pytest.fixture(scope="module")
def fuzz_transport() -> Iterator[WebRTCTransport]:
    t = WebRTCTransport("python", connect_timeout_s=30, step_timeout_s=5)
    yield t
    t.close()


@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_replies_get_the_client_dropped_and_training_goes_on(
    fuzz_transport: WebRTCTransport, kind: str, data: st.DataObject
) -> None:
    """A rogue with the token takes over, answers one request with a hostile reply: it is dropped
    saying why, the trainer's own peer is started anew, and training goes on, never hanging."""
    transport = fuzz_transport
    env = FightingEnv(transport=transport, reconnect_timeout_s=30)
    env.reset(seed=0)
    takeovers, restarts = transport.connection.takeovers, transport.restarts
    answer = honest()
    hostile = [True]
    params = hostile_params(kind, data)

    def respond(raw: str | bytes) -> Any:
        message = decode(raw, allowed=("reset", "step", "ping", "status", "replaced"))
        if message["type"] in ("reset", "step") and hostile[0]:
            hostile[0] = False
            return frames(kind, params, message)
        return answer(raw)

    Rogue(transport, respond)
    wait_for(lambda: transport.connection.takeovers == takeovers + 1, 20, "the takeover")
    assert env.step(0)[3]  # the takeover truncates the round
    t0 = time.monotonic()
    env.reset(seed=1)  # answered with the hostile reply: dropped at once (a flood: just after)
    while transport.restarts == restarts:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()
        assert time.monotonic() - t0 < 20, "the hostile client was never dropped"
    assert transport.connection.client_kind == "python" and transport.restarts == restarts + 1
    env.reset(seed=2)
    for _ in range(3):
        assert not env.step(0)[3]
    expected = {
        "malformed": "malformed JSON",
        "oversized": "exceeds the 65536-byte limit",
        "deep": "deep; at most 3 is accepted",
        "out_of_range": "is out of range",
        "wrong_schema": "unexpected field|must be a list",
        "binary": "a binary frame",
        "flood": f"more than {FLOOD_LIMIT} unsolicited messages within a second",
    }[kind]
    assert transport.lost_reasons and re.search(expected, transport.lost_reasons[-1]), transport.lost_reasons
