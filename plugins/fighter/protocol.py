"""The data-channel protocol between the trainer (controller) and a game client, with its checks.

Every message is one JSON text frame (binary frames are refused) holding one object. Messages are
size-limited and checked against a schema before use: only the keys of their type, each of its
type, every integer within its field's range (a game state's ranges come from the rules'
constants, so an absurd health or position is refused, never scored); a message nested deeper
than any message of the protocol is refused before it is parsed. Nothing received is ever
unpickled or evaluated.

controller → game:  {"type": "reset", "episode": E, "seeds": [s, ...], "opponent": name}
                    (with "arenas": [i, ...] only those arenas restart, one seed each)
                    {"type": "step", "episode": E, "step": t, "actions": [a, ...]}
                    {"type": "ping", "id": n}
                    {"type": "status", "phase": P, "steps": N, "steps_per_s": r, "rounds": [won, lost, drawn]}
                    {"type": "replaced", "message": text}
                    {"type": "ended", "status": S, "steps": N}
game → controller:  {"type": "hello", "client": "browser" | "python"}
                    {"type": "result", "episode": E, "step": t, "games": [packed, ...]}
                    {"type": "pong", "id": n}
                    {"type": "error", "message": text}
A game client answers reset, step and ping; it never answers status (what the trainer is doing,
for the page to show: P is one of PHASES, N the trainer's env steps so far, r its steps/s, and the
rounds its arenas finished), replaced (sent to a page just before another one takes over the
connection: one client at a time) or ended (the last message of a run, before the trainer closes
the connection: S is one of ENDINGS, N its env steps; a client that gets it closes its side, and a
page does not reconnect). A reset's result has step 0; the n-th step's result has
step n. One message carries every arena's action, one reply every arena's state, each packed as
GAME_WIRE_LENGTH integers (`pack_game`): small messages keep 16 arenas within a few SCTP chunks.
"""

from __future__ import annotations

import functools
import json
import operator
import re
import secrets
from collections.abc import Callable
from itertools import accumulate
from typing import Any

#: Largest message accepted, in bytes (16 arenas' states take about 6 KB).
MAX_MESSAGE_BYTES = 64 * 1024
#: Deepest nesting of any protocol message (an object holding a list of lists): deeper is refused.
MAX_DEPTH = 3
#: Integers a message may carry outside a game state (ids, counters, seeds): JavaScript's safe range.
MAX_INT = 2**53 - 1
#: Longest text a message may carry (an error's message, a client's name).
MAX_TEXT = 500
#: Most arenas one connection serves.
MAX_ARENAS = 256

FIGHTER_KEYS = ("x", "y", "vx", "vy", "hp", "facing", "state", "timer", "elapsed", "hit", "cooldown")
GAME_KEYS = ("frame", "rng", "done", "winner", "hold", "held")
#: frame, rng, done, winner, hold, held, dealt[0], dealt[1], then both fighters' FIGHTER_KEYS.
GAME_WIRE_LENGTH = len(GAME_KEYS) + 2 + 2 * len(FIGHTER_KEYS)
#: What a status message says the trainer is doing ("starting": connected, no step asked for yet).
PHASES = ("starting", "training", "updating", "evaluating", "waiting")
#: How an ended message says the run ended: its training ran to the end, it was stopped (Ctrl-C,
#: SIGTERM, a sweep's pruner), it failed; or "ended" where the trainer cannot tell which.
ENDINGS = ("finished", "stopped", "failed", "ended")
CLIENTS = ("browser", "python")


class ProtocolError(ValueError):
    """A message that is too large, binary, not JSON, or not of the protocol's schema."""


def token_matches(given: object, token: str) -> bool:
    """A constant-time comparison with the run's token that refuses, rather than fails on, any
    value (a number, non-ASCII text)."""
    if not isinstance(given, str):
        return False
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode())


def encode(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))


def parse_object(raw: str | bytes, what: str = "message", max_depth: int = 16) -> dict[str, Any]:
    """One size-limited JSON object of plain JSON values, nested at most `max_depth` deep."""
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"{what} of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    text = raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")
    depth = nesting(text)
    if depth > max_depth:
        raise ProtocolError(f"{what} nested {depth} deep; at most {max_depth} is accepted")
    try:
        message = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolError(f"malformed JSON {what}: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a {what} must be a JSON object, got {type(message).__name__}")
    return message


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deep a JSON text's brackets nest, string literals aside, counted before parsing, so
    that a 30,000-deep message never reaches the parser's recursion (regular expressions and
    `accumulate` keep it at C speed)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def decode(raw: str | bytes, *, allowed: tuple[str, ...]) -> dict[str, Any]:
    """Parse and check one data-channel message whose type must be one of `allowed`."""
    if not isinstance(raw, str):
        raise ProtocolError(f"a binary frame of {len(raw)} bytes; the protocol's messages are JSON text")
    message = parse_object(raw, max_depth=MAX_DEPTH)
    kind = message.get("type")
    if kind not in allowed:
        raise ProtocolError(
            f"unexpected message type {str(kind)[:40]!r}; expected one of {', '.join(allowed)}"
        )
    keys, check = SCHEMAS[kind]
    extra = set(message) - keys - {"type"}
    if extra:
        raise ProtocolError(
            f"unexpected field(s) {', '.join(sorted(map(repr, extra)))[:200]} in a {kind} message"
        )
    check(message)
    return message


def _int(message: dict[str, Any], key: str, lo: int = 0, hi: int = MAX_INT) -> int:
    value = message.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"field {key!r} must be an integer, got {_show(value)}")
    if not lo <= value <= hi:
        raise ProtocolError(f"field {key!r}={_show(value)} is out of range {lo}..{hi}")
    return value


def _int_list(message: dict[str, Any], key: str, lo: int = 0, hi: int = MAX_INT) -> list[int]:
    values = message.get(key)
    if not isinstance(values, list) or not 0 < len(values) <= MAX_ARENAS:
        raise ProtocolError(
            f"field {key!r} must be a list of 1 to {MAX_ARENAS} integers, got {_show(values)}"
        )
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ProtocolError(f"field {key!r}[{i}] must be an integer, got {_show(v)}")
        if not lo <= v <= hi:
            raise ProtocolError(f"field {key!r}[{i}]={_show(v)} is out of range {lo}..{hi}")
    return values


def _str(message: dict[str, Any], key: str, choices: tuple[str, ...] = ()) -> str:
    value = message.get(key)
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ProtocolError(
            f"field {key!r} must be a string of at most {MAX_TEXT} characters, got {_show(value)}"
        )
    if choices and value not in choices:
        raise ProtocolError(f"field {key!r}={_show(value)} is not one of {', '.join(choices)}")
    return value


def _show(value: Any) -> str:
    """A value for an error message: short, whatever it is (a 10^30 integer, a huge list)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def pack_game(game: dict[str, Any]) -> list[int]:
    """A game state as GAME_WIRE_LENGTH integers (static/game.js packs it the same way)."""
    out = [int(game[k]) for k in GAME_KEYS] + [int(d) for d in game["dealt"]]
    for fighter in game["fighters"]:
        out += [int(fighter[k]) for k in FIGHTER_KEYS]
    return out


def unpack_game(values: list[int], opponent: str = "") -> dict[str, Any]:
    n, f = len(GAME_KEYS), len(FIGHTER_KEYS)
    game: dict[str, Any] = dict(zip(GAME_KEYS, values[:n], strict=True))
    game["done"] = bool(game["done"])
    game["dealt"] = values[n : n + 2]
    game["fighters"] = [
        dict(zip(FIGHTER_KEYS, values[n + 2 + j * f : n + 2 + (j + 1) * f], strict=True)) for j in range(2)
    ]
    game["opponent"] = opponent
    return game


WIRE_NAMES = (
    *GAME_KEYS,
    "dealt[0]",
    "dealt[1]",
    *(f"fighters[{j}].{k}" for j in range(2) for k in FIGHTER_KEYS),
)


@functools.cache
def game_ranges() -> tuple[tuple[int, int], ...]:
    """Each packed game field's valid range, from the rules' constants (a state outside them is
    not one the rules can reach: a forged or corrupted message)."""
    from .rules import load_constants

    C = load_constants()
    attacks = C["attacks"].values()
    longest = max(
        max(k["startup"] + k["active"] + k["recovery"], k["hitstun"], k["blockstun"]) for k in attacks
    )
    speed = max(C["walk_speed"], *(k["knockback"] for k in attacks))
    jump, gravity = C["jump_velocity"], C["gravity"]
    # A fighter hit in the air may jump again before landing, so heights pile up: generous
    # bounds, still far below anything forged (a height of 10^12, a health of -500).
    high = 10 * jump * (jump // gravity + 1)
    game = {
        "frame": (0, C["round_frames"] + C["frames_per_step"]),
        "rng": (0, 2**32 - 1),
        "done": (0, 1),
        "winner": (-1, 1),
        "hold": (0, len(C["actions"]) - 1),
        "held": (0, C["random_hold_frames"]),
    }
    fighter = {
        "x": (0, C["stage_width"]),
        "y": (0, high),
        "vx": (-speed, speed),
        "vy": (-4 * jump, jump),
        "hp": (0, C["max_hp"]),
        "facing": (-1, 1),
        "state": (0, len(C["states"]) - 1),
        "timer": (0, longest),
        "elapsed": (0, longest),
        "hit": (0, 1),
        "cooldown": (0, max(k["cooldown"] for k in attacks)),
    }
    dealt = (0, C["max_hp"])
    return (
        *(game[k] for k in GAME_KEYS),
        dealt,
        dealt,
        *(fighter[k] for _ in range(2) for k in FIGHTER_KEYS),
    )


def _check_game(game: Any, i: int) -> None:
    if not isinstance(game, list) or len(game) != GAME_WIRE_LENGTH:
        raise ProtocolError(f"games[{i}] must be a list of {GAME_WIRE_LENGTH} integers, got {_show(game)}")
    lows, highs = _bounds()
    # The common case at C speed (a step's reply holds 30 integers per arena); the slow loop only
    # finds which field is wrong. Comparing types also refuses bools.
    if (
        all(type(v) is int for v in game)
        and all(map(operator.le, lows, game))
        and all(map(operator.le, game, highs))
    ):
        return
    for j, (v, lo, hi) in enumerate(zip(game, lows, highs, strict=True)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ProtocolError(f"games[{i}][{j}] ({WIRE_NAMES[j]}) must be an integer, got {_show(v)}")
        if not lo <= v <= hi:
            raise ProtocolError(f"games[{i}][{j}] ({WIRE_NAMES[j]})={_show(v)} is out of range {lo}..{hi}")


_INT = {int}


@functools.cache
def _bounds() -> tuple[tuple[int, ...], tuple[int, ...]]:
    lows, highs = zip(*game_ranges(), strict=True)
    return lows, highs


def _check_result(message: dict[str, Any]) -> None:
    _int(message, "episode")
    _int(message, "step")
    games = message.get("games")
    if not isinstance(games, list) or not 0 < len(games) <= MAX_ARENAS:
        raise ProtocolError(f"field 'games' must be a list of 1 to {MAX_ARENAS} games, got {_show(games)}")
    for i, game in enumerate(games):
        _check_game(game, i)


def _check_status(message: dict[str, Any]) -> None:
    _str(message, "phase", PHASES)
    _int(message, "steps")
    rate = message.get("steps_per_s")
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 <= rate <= MAX_INT:
        raise ProtocolError(f"field 'steps_per_s' must be a number >= 0, got {_show(rate)}")
    if len(_int_list(message, "rounds")) != 3:
        raise ProtocolError(f"field 'rounds' must be [won, lost, drawn], got {_show(message['rounds'])}")


def _check_reset(message: dict[str, Any]) -> None:
    _int(message, "episode")
    seeds = _int_list(message, "seeds", 0, 2**32 - 1)
    _str(message, "opponent")
    if "arenas" in message and len(_int_list(message, "arenas", 0, MAX_ARENAS - 1)) != len(seeds):
        raise ProtocolError("field 'arenas' must name one arena per seed")


#: Each message type's fields (besides "type") and its check.
SCHEMAS: dict[str, tuple[set[str], Callable[[dict[str, Any]], Any]]] = {
    "reset": ({"episode", "seeds", "opponent", "arenas"}, _check_reset),
    "step": (
        {"episode", "step", "actions"},
        lambda m: (_int(m, "episode"), _int(m, "step"), _int_list(m, "actions")),
    ),
    "ping": ({"id"}, lambda m: _int(m, "id")),
    "status": ({"phase", "steps", "steps_per_s", "rounds"}, _check_status),
    "replaced": ({"message"}, lambda m: _str(m, "message")),
    "ended": ({"status", "steps"}, lambda m: (_str(m, "status", ENDINGS), _int(m, "steps"))),
    "hello": ({"client"}, lambda m: _str(m, "client", CLIENTS)),
    "result": ({"episode", "step", "games"}, _check_result),
    "pong": ({"id"}, lambda m: _int(m, "id")),
    "error": ({"message"}, lambda m: _str(m, "message")),
}
