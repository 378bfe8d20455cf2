"""The data-channel protocol's checks: every message is refused with a clear ProtocolError, or
accepted only if it is one the rules could have produced."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_plugins.fighter import rules
from framework_plugins.fighter.env import FightingEnv
from framework_plugins.fighter.protocol import (
    GAME_WIRE_LENGTH,
    MAX_DEPTH,
    ProtocolError,
    decode,
    encode,
    game_ranges,
    nesting,
    pack_game,
    token_matches,
    unpack_game,
)

GAME_SIDE = ("hello", "result", "pong", "error")


def result_with(games: list[list[int]]) -> str:
    return json.dumps({"type": "result", "episode": 0, "step": 0, "games": games})


def test_oversized_binary_and_unknown_messages_are_refused() -> None:
    with pytest.raises(ProtocolError, match="exceeds the 65536-byte limit"):
        decode("x" * 70_000, allowed=("result",))
    with pytest.raises(
        ProtocolError, match="a binary frame of 2 bytes; the protocol's messages are JSON text"
    ):
        decode(b"{}", allowed=("result",))
    with pytest.raises(ProtocolError, match="unexpected message type 'step'; expected one of result"):
        decode('{"type": "step", "episode": 0, "step": 1, "actions": [1]}', allowed=("result",))
    with pytest.raises(ProtocolError, match=r"unexpected field\(s\) 'extra' in a pong message"):
        decode('{"type": "pong", "id": 1, "extra": [[]]}', allowed=GAME_SIDE)


def test_fields_of_the_wrong_type_are_named() -> None:
    with pytest.raises(ProtocolError, match="field 'step' must be an integer, got 'one'"):
        decode('{"type": "result", "episode": 0, "step": "one", "games": []}', allowed=("result",))
    packed = pack_game(FightingEnv().game)
    with pytest.raises(
        ProtocolError, match=r"games\[0\]\[12\] \(fighters\[0\].hp\) must be an integer, got 'full'"
    ):
        decode(result_with([[*packed[:12], "full", *packed[13:]]]), allowed=("result",))
    with pytest.raises(ProtocolError, match=r"games\[0\] must be a list of 30 integers"):
        decode(result_with([packed[:-1]]), allowed=("result",))
    with pytest.raises(ProtocolError, match="field 'client'='chrome' is not one of browser, python"):
        decode('{"type": "hello", "client": "chrome"}', allowed=GAME_SIDE)
    assert unpack_game(packed, "aggressive") == FightingEnv().game  # packing loses nothing


def test_a_30000_deep_message_is_refused_before_it_is_parsed() -> None:
    deep = '{"type": "pong", "id": ' + "[" * 30_000 + "]" * 30_000 + "}"
    assert len(deep) < 65536
    with pytest.raises(ProtocolError, match=f"nested 30001 deep; at most {MAX_DEPTH} is accepted"):
        decode(deep, allowed=GAME_SIDE)


def test_nesting_ignores_brackets_inside_strings() -> None:
    assert nesting('{"message": "[[[[[[[[ {{{{ \\" [[[["}') == 1
    assert nesting(result_with([[0] * 30])) == 3
    assert nesting("[" * 10) == 10  # malformed text: an upper bound is enough


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        (12, -500, r"\(fighters\[0\].hp\)=-500 is out of range 0..100"),
        (14, 99, r"\(fighters\[0\].state\)=99 is out of range 0..9"),
        (8, 10**12, r"\(fighters\[0\].x\)=1000000000000 is out of range 0..1000"),
        (6, 10**13, r"\(dealt\[0\]\)=10000000000000 is out of range 0..100"),
        (19, 10**30, r"\(fighters\[1\].x\)=1000000000000000000000000000000 is out of range 0..1000"),
        (2, 2, r"\(done\)=2 is out of range 0..1"),
    ],
)
def test_absurd_values_are_refused_naming_the_field(column: int, value: int, said: str) -> None:
    packed = pack_game(FightingEnv().game)
    packed[column] = value
    with pytest.raises(ProtocolError, match=said):
        decode(result_with([packed]), allowed=("result",))


def test_huge_integers_outside_game_states_are_refused_too() -> None:
    with pytest.raises(ProtocolError, match=r"field 'id'=1000000000000000000000000000000 is out of range"):
        decode(encode({"type": "pong", "id": 10**30}), allowed=GAME_SIDE)
    with pytest.raises(ProtocolError, match="field 'steps_per_s' must be a number >= 0"):
        decode('{"type": "status", "phase": "training", "steps": 1, "steps_per_s": -1, "rounds": [0, 0, 0]}',
               allowed=("status",))  # fmt: skip


@pytest.mark.parametrize("opponent", rules.load_constants()["opponents"])
def test_every_state_the_rules_reach_is_within_the_checked_ranges(opponent: str) -> None:
    C = rules.load_constants()
    lo, hi = np.array(game_ranges()).T
    rng = np.random.default_rng(3)
    for seed in range(25):
        game = rules.new_game(C, seed, opponent)
        # Jumps and specials more often than uniform play, for the states at the ranges' edges.
        policy = rng.choice(9, p=[0.05, 0.1, 0.1, 0.25, 0.05, 0.1, 0.1, 0.1, 0.15], size=C["round_frames"])
        for action in policy:
            rules.step(C, game, int(action))
            packed = np.array(pack_game(game))
            assert ((lo <= packed) & (packed <= hi)).all(), (seed, packed.tolist())
            if game["done"]:
                break


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["hello", "result", "pong", "error", "status", "step", 7, None]),
    fields=st.dictionaries(
        st.sampled_from(["episode", "step", "games", "id", "client", "message", "x"]), JSON
    ),
)
def test_any_json_message_is_accepted_whole_or_refused_with_a_protocol_error(
    kind: object, fields: dict
) -> None:
    raw = json.dumps({"type": kind, **fields})
    try:
        message = decode(raw, allowed=GAME_SIDE)
    except ProtocolError:
        return
    assert message["type"] in GAME_SIDE


@settings(max_examples=200, deadline=None)
@given(
    games=st.lists(st.lists(st.integers(), min_size=GAME_WIRE_LENGTH, max_size=GAME_WIRE_LENGTH), max_size=3)
)
def test_a_result_accepted_holds_only_values_within_range(games: list[list[int]]) -> None:
    try:
        decode(result_with(games), allowed=("result",))
    except ProtocolError:
        return
    lo, hi = np.array(game_ranges()).T
    assert all(((lo <= np.array(g)) & (np.array(g) <= hi)).all() for g in games)


@pytest.mark.parametrize("given_token", ["wrong", "", "t\u00f6ken", "\udcff", 7, None, ["x"]])
def test_a_wrong_token_of_any_kind_does_not_match(given_token: object) -> None:
    assert not token_matches(given_token, "the-token")
    assert token_matches("the-token", "the-token")
