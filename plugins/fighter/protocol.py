"""The data-channel protocol between the trainer (controller) and a game client, with its checks.

Every message is one JSON object. Messages are size-limited and checked field by field before
use; nothing received is ever unpickled or evaluated.

controller → game:  {"type": "reset", "episode": E, "seeds": [s, ...], "opponent": name}
                    (with "arenas": [i, ...] only those arenas restart, one seed each)
                    {"type": "step", "episode": E, "step": t, "actions": [a, ...]}
                    {"type": "ping", "id": n}
                    {"type": "status", "phase": P, "steps": N, "steps_per_s": r, "rounds": [won, lost, drawn]}
                    {"type": "replaced", "message": text}
game → controller:  {"type": "hello", "client": "browser" | "python"}
                    {"type": "result", "episode": E, "step": t, "games": [packed, ...]}
                    {"type": "pong", "id": n}
                    {"type": "error", "message": text}
A game client answers reset, step and ping; it never answers status (what the trainer is doing,
for the page to show: P is one of PHASES, N the trainer's env steps so far, r its steps/s, and the
rounds its arenas finished) or replaced (sent to a page just before another one takes over the
connection: one client at a time). A reset's result has step 0; the n-th step's result has step n. One message carries every
arena's action, one reply every arena's state, each packed as GAME_WIRE_LENGTH integers
(`pack_game`): small messages keep 16 arenas within a few SCTP chunks.
"""

from __future__ import annotations

import json
from typing import Any

#: Largest message accepted, in bytes (16 arenas' states take about 6 KB).
MAX_MESSAGE_BYTES = 64 * 1024

FIGHTER_KEYS = ("x", "y", "vx", "vy", "hp", "facing", "state", "timer", "elapsed", "hit", "cooldown")
GAME_KEYS = ("frame", "rng", "done", "winner", "hold", "held")
#: frame, rng, done, winner, hold, held, dealt[0], dealt[1], then both fighters' FIGHTER_KEYS.
GAME_WIRE_LENGTH = len(GAME_KEYS) + 2 + 2 * len(FIGHTER_KEYS)
#: What a status message says the trainer is doing.
PHASES = ("training", "updating", "evaluating", "waiting")


class ProtocolError(ValueError):
    """A message that is too large, not JSON, or not of the protocol's schema."""


def encode(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))


def parse_object(raw: str | bytes, what: str = "message") -> dict[str, Any]:
    """One size-limited JSON object (never anything but plain JSON values)."""
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"{what} of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    try:
        message = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed JSON {what}: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a {what} must be a JSON object, got {type(message).__name__}")
    return message


def decode(raw: str | bytes, *, allowed: tuple[str, ...]) -> dict[str, Any]:
    """Parse and check one message whose type must be one of `allowed`."""
    message = parse_object(raw)
    kind = message.get("type")
    if kind not in allowed:
        raise ProtocolError(f"unexpected message type {kind!r}; expected one of {', '.join(allowed)}")
    CHECKS[kind](message)
    return message


def _int(message: dict[str, Any], key: str, where: str = "") -> int:
    value = message.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"field {where}{key!r} must be an integer, got {value!r}")
    return value


def _int_list(message: dict[str, Any], key: str) -> list[int]:
    values = message.get(key)
    if not isinstance(values, list) or not values:
        raise ProtocolError(f"field {key!r} must be a non-empty list, got {values!r}")
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ProtocolError(f"field {key!r}[{i}] must be an integer, got {v!r}")
    return values


def _str(message: dict[str, Any], key: str) -> str:
    value = message.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"field {key!r} must be a string, got {value!r}")
    return value


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


def _check_game(game: Any, i: int) -> None:
    if not isinstance(game, list) or len(game) != GAME_WIRE_LENGTH:
        raise ProtocolError(f"games[{i}] must be a list of {GAME_WIRE_LENGTH} integers, got {game!r:.200}")
    for j, v in enumerate(game):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ProtocolError(f"games[{i}][{j}] must be an integer, got {v!r}")


def _check_result(message: dict[str, Any]) -> None:
    _int(message, "episode")
    _int(message, "step")
    games = message.get("games")
    if not isinstance(games, list) or not games:
        raise ProtocolError(f"field 'games' must be a non-empty list, got {games!r}")
    for i, game in enumerate(games):
        _check_game(game, i)


def _check_status(message: dict[str, Any]) -> None:
    if message.get("phase") not in PHASES:
        raise ProtocolError(f"field 'phase' must be one of {', '.join(PHASES)}, got {message.get('phase')!r}")
    _int(message, "steps")
    rate = message.get("steps_per_s")
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate >= 0:
        raise ProtocolError(f"field 'steps_per_s' must be a number >= 0, got {rate!r}")
    rounds = _int_list(message, "rounds")
    if len(rounds) != 3:
        raise ProtocolError(f"field 'rounds' must be [won, lost, drawn], got {rounds!r}")


CHECKS = {
    "reset": lambda m: (
        _int(m, "episode"),
        _int_list(m, "seeds"),
        _str(m, "opponent"),
        "arenas" not in m or _int_list(m, "arenas"),
    ),
    "step": lambda m: (_int(m, "episode"), _int(m, "step"), _int_list(m, "actions")),
    "ping": lambda m: _int(m, "id"),
    "status": lambda m: _check_status(m),
    "replaced": lambda m: _str(m, "message"),
    "hello": lambda m: _str(m, "client"),
    "result": _check_result,
    "pong": lambda m: _int(m, "id"),
    "error": lambda m: _str(m, "message"),
}
