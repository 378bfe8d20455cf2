"""The data-channel protocol's checks: every message is refused with a clear ProtocolError, or
accepted only if it is one the rules could have produced."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import event, given, settings
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


#: A game state as packed on the wire: each field within its range.
PACKED = st.tuples(*(st.integers(lo, hi) for lo, hi in game_ranges())).map(list)


def _pushed_out(case: tuple[list[int], int, int]) -> list[int]:
    """A packed state with one field just past its range (by 1 or 2, below or above)."""
    packed, column, by = case
    lo, hi = game_ranges()[column]
    return [*packed[:column], lo + by if by < 0 else hi + by, *packed[column + 1 :]]


#: A packed state with one field out of its range, at its edge.
OUT_OF_RANGE = st.tuples(PACKED, st.integers(0, GAME_WIRE_LENGTH - 1), st.sampled_from([-2, -1, 1, 2])).map(
    _pushed_out
)
#: Each message the game side sends, as it could send it.
VALID = st.one_of(
    st.builds(lambda client: {"type": "hello", "client": client}, st.sampled_from(["browser", "python"])),
    st.builds(
        lambda episode, step, games: {"type": "result", "episode": episode, "step": step, "games": games},
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.lists(PACKED, min_size=1, max_size=3),
    ),
    st.builds(lambda n: {"type": "pong", "id": n}, st.integers(0, 10**6)),
    st.builds(lambda text: {"type": "error", "message": text}, st.text(max_size=40)),
)
FIELDS = ["type", "episode", "step", "games", "id", "client", "message", "x"]


@st.composite
def spoiled(draw: st.DrawFn) -> tuple[dict, bool]:
    """A valid message, and most of the time one field of it set to any JSON (or dropped): the
    message, and whether it is still the valid one."""
    message = draw(VALID)
    action = draw(st.sampled_from(["keep", "set", "set", "drop"]))
    if action == "keep":
        return message, True
    key = draw(st.sampled_from(FIELDS))
    changed = dict(message)
    if action == "drop":
        changed.pop(key, None)
    else:
        changed[key] = draw(JSON | st.integers(-(10**20), 10**20))
    return changed, changed == message


@settings(max_examples=300, deadline=None)
@given(case=spoiled())
def test_any_json_message_is_accepted_whole_or_refused_with_a_protocol_error(case: tuple[dict, bool]) -> None:
    """A message the game could send is accepted, equal to what was sent; one with a field spoiled
    is refused with a ProtocolError, or accepted whole where the new value is one it could send too."""
    message, valid = case
    try:
        decoded = decode(json.dumps(message), allowed=GAME_SIDE)
    except ProtocolError:
        assert not valid, message
        event("refused")
        return
    event("accepted")
    assert decoded == message and decoded["type"] in GAME_SIDE
    assert set(decoded) <= {"type", "episode", "step", "games", "id", "client", "message"}


def test_the_property_draws_both_accepted_and_refused_messages() -> None:
    """The draws above exercise both outcomes (a property whose draws were nearly all refused once
    checked an accepted message a single time in 200)."""
    accepted: list[bool] = []

    @settings(max_examples=200, deadline=None, database=None)
    @given(case=spoiled())
    def collect(case: tuple[dict, bool]) -> None:
        try:
            decode(json.dumps(case[0]), allowed=GAME_SIDE)
            accepted.append(True)
        except ProtocolError:
            accepted.append(False)

    collect()
    assert len(accepted) >= 100 and 0.2 < sum(accepted) / len(accepted) < 0.9, sum(accepted)


@settings(max_examples=200, deadline=None)
@given(games=st.lists(PACKED | OUT_OF_RANGE, min_size=1, max_size=3))
def test_a_result_accepted_holds_only_values_within_range(games: list[list[int]]) -> None:
    """States in range and states with a field just past an edge: accepted exactly when all are in."""
    lo, hi = np.array(game_ranges()).T
    within = all(((lo <= np.array(g)) & (np.array(g) <= hi)).all() for g in games)
    try:
        decode(result_with(games), allowed=("result",))
    except ProtocolError:
        assert not within, games
        event("refused")
        return
    assert within, games
    event("accepted")


@pytest.mark.parametrize("given_token", ["wrong", "", "t\u00f6ken", "\udcff", 7, None, ["x"]])
def test_a_wrong_token_of_any_kind_does_not_match(given_token: object) -> None:
    assert not token_matches(given_token, "the-token")
    assert token_matches("the-token", "the-token")
