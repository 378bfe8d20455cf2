"""The Python twin of static/rules.js: the same integer rules, frame for frame.

Golden trajectories (tests/fighter) run both over the same scripted action sequences and
require identical states. Keep every function here in step with its JavaScript namesake.
"""

from __future__ import annotations

import copy
import json
from enum import IntEnum
from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"
UINT32 = 0xFFFFFFFF

Game = dict[str, Any]
Fighter = dict[str, Any]


class S(IntEnum):
    """Fighter states."""

    IDLE = 0
    WALK = 1
    JUMP = 2
    CROUCH = 3
    BLOCK = 4
    PUNCH = 5
    KICK = 6
    SPECIAL = 7
    HITSTUN = 8
    KO = 9


class A(IntEnum):
    """Actions (the env's Discrete action space)."""

    NOOP = 0
    LEFT = 1
    RIGHT = 2
    JUMP = 3
    CROUCH = 4
    BLOCK = 5
    PUNCH = 6
    KICK = 7
    SPECIAL = 8


ATTACKS = ("punch", "kick", "special")

# Plain ints for the hot paths (IntEnum member lookups cost more than the rules themselves).
IDLE, WALK, JUMP, CROUCH, BLOCK, PUNCH, KICK, SPECIAL, HITSTUN, KO = (int(s) for s in S)
ACTIONABLE = frozenset((IDLE, WALK, CROUCH, BLOCK))
ATTACK_OF_STATE = {PUNCH: "punch", KICK: "kick", SPECIAL: "special"}


def load_constants() -> dict[str, Any]:
    """The rules' constants, shared with the JavaScript game."""
    constants: dict[str, Any] = json.loads((STATIC / "constants.json").read_text())
    return constants


def attack_of(state: int) -> str | None:
    return ATTACK_OF_STATE.get(state)


def seed_rng(seed: int) -> int:
    s = ((seed & UINT32) ^ 0x9E3779B9) & UINT32
    return 0x6D2B79F5 if s == 0 else s


def rng_next(g: Game) -> int:
    x = g["rng"]
    x ^= (x << 13) & UINT32
    x ^= x >> 17
    x ^= (x << 5) & UINT32
    g["rng"] = x & UINT32
    return int(g["rng"])


def new_fighter(C: dict[str, Any], x: int, facing: int) -> Fighter:
    return {
        "x": x, "y": 0, "vx": 0, "vy": 0, "hp": C["max_hp"], "facing": facing, "state": int(S.IDLE),
        "timer": 0, "elapsed": 0, "hit": 0, "cooldown": 0,
    }  # fmt: skip


def new_game(C: dict[str, Any], seed: int, opponent: str) -> Game:
    if opponent not in C["opponents"]:
        raise ValueError(f"unknown opponent {opponent!r}; valid: {', '.join(C['opponents'])}")
    return {
        "frame": 0,
        "rng": seed_rng(seed),
        "opponent": opponent,
        "fighters": [new_fighter(C, C["start_x"][0], 1), new_fighter(C, C["start_x"][1], -1)],
        "done": False,
        "winner": -1,
        "hold": 0,
        "held": 0,
        "dealt": [0, 0],
    }


def actionable(f: Fighter) -> bool:
    return f["state"] in ACTIONABLE and f["timer"] == 0


def apply_input(C: dict[str, Any], f: Fighter, a: int) -> None:
    if not actionable(f):
        return
    if a in (A.LEFT, A.RIGHT):
        f["state"] = int(S.WALK)
        f["vx"] = (-1 if a == A.LEFT else 1) * C["walk_speed"]
    elif a == A.JUMP:
        if f["state"] != S.WALK:
            f["vx"] = 0  # a walking jump carries its speed
        f["state"] = int(S.JUMP)
        f["vy"] = C["jump_velocity"]
    elif a == A.CROUCH:
        f["state"] = int(S.CROUCH)
        f["vx"] = 0
    elif a == A.BLOCK:
        f["state"] = int(S.BLOCK)
        f["vx"] = 0
    elif A.PUNCH <= a <= A.SPECIAL:
        k = C["attacks"][ATTACKS[a - A.PUNCH]]
        f["vx"] = 0
        if k["cooldown"] > 0 and f["cooldown"] > 0:
            f["state"] = int(S.IDLE)  # still cooling down: nothing happens
            return
        f["state"] = int(S.PUNCH) + (a - A.PUNCH)
        f["timer"] = k["startup"] + k["active"] + k["recovery"]
        f["elapsed"] = 0
        f["hit"] = 0
        if k["cooldown"] > 0:
            f["cooldown"] = k["cooldown"]
    else:
        f["state"] = int(S.IDLE)
        f["vx"] = 0


def clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def move(C: dict[str, Any], f: Fighter) -> None:
    f["x"] += f["vx"]
    if f["state"] in (HITSTUN, KO, BLOCK):
        if f["vx"] > 0:
            f["vx"] -= 1
        elif f["vx"] < 0:
            f["vx"] += 1
    if f["state"] == JUMP or f["y"] > 0:
        f["y"] += f["vy"]
        f["vy"] -= C["gravity"]
        if f["y"] <= 0:
            f["y"] = 0
            f["vy"] = 0
            if f["state"] == JUMP:
                f["state"] = IDLE
                f["vx"] = 0
    half = C["fighter_width"] // 2
    f["x"] = clamp(f["x"], half, C["stage_width"] - half)


def separate(C: dict[str, Any], fs: list[Fighter]) -> None:
    a, b = fs
    w = C["fighter_width"]
    half = w // 2
    gap = abs(b["x"] - a["x"])
    if gap >= w:
        return
    left, right = (a, b) if b["x"] >= a["x"] else (b, a)  # on a tie, fighter 0 goes left
    overlap = w - gap
    push = overlap // 2
    left["x"] = clamp(left["x"] - push, half, C["stage_width"] - half)
    right["x"] = clamp(right["x"] + (overlap - push), half, C["stage_width"] - half)
    if right["x"] - left["x"] < w:
        if left["x"] == half:
            right["x"] = left["x"] + w
        else:
            left["x"] = right["x"] - w


def face(f: Fighter, other: Fighter) -> None:
    if f["state"] <= BLOCK:
        if other["x"] > f["x"]:
            f["facing"] = 1
        elif other["x"] < f["x"]:
            f["facing"] = -1


def check_hit(C: dict[str, Any], att: Fighter, df: Fighter) -> str | None:
    name = attack_of(att["state"])
    if name is None or att["hit"] == 1 or df["state"] == KO:
        return None
    k = C["attacks"][name]
    if att["elapsed"] < k["startup"] or att["elapsed"] >= k["startup"] + k["active"]:
        return None
    dist = (df["x"] - att["x"]) * att["facing"]
    if dist <= 0 or dist > k["reach"]:
        return None
    if k["high"] and df["state"] == CROUCH:
        return None
    if k["low"] and df["y"] > C["low_attack_max_y"]:
        return None
    return name


def apply_hit(C: dict[str, Any], g: Game, i: int, name: str) -> None:
    att, df = g["fighters"][i], g["fighters"][1 - i]
    k = C["attacks"][name]
    att["hit"] = 1
    blocked = df["state"] == S.BLOCK and df["facing"] == -att["facing"]
    damage = min(df["hp"], k["chip"] if blocked else k["damage"])
    df["hp"] -= damage
    g["dealt"][i] += damage
    if blocked:
        df["timer"] = k["blockstun"]
        df["vx"] = att["facing"] * (k["knockback"] // 2)
    else:
        df["state"] = int(S.HITSTUN)
        df["timer"] = k["hitstun"]
        df["vx"] = att["facing"] * k["knockback"]
        df["elapsed"] = 0
        df["hit"] = 0
    if df["hp"] == 0:
        df["state"] = int(S.KO)
        df["timer"] = 0


def tick(f: Fighter) -> None:
    if f["cooldown"] > 0:
        f["cooldown"] -= 1
    if attack_of(f["state"]) is not None:
        f["elapsed"] += 1
    if f["timer"] > 0:
        f["timer"] -= 1
        if f["timer"] == 0 and f["state"] != BLOCK:
            f["state"] = IDLE
            f["elapsed"] = 0
            f["hit"] = 0


def finish(C: dict[str, Any], g: Game) -> None:
    a, b = g["fighters"]
    if a["hp"] == 0 or b["hp"] == 0 or g["frame"] >= C["round_frames"]:
        g["done"] = True
        g["winner"] = 0 if a["hp"] > b["hp"] else 1 if b["hp"] > a["hp"] else -1


def step_frame(C: dict[str, Any], g: Game, actions: tuple[int, int]) -> None:
    if g["done"]:
        return
    fs = g["fighters"]
    apply_input(C, fs[0], actions[0])
    apply_input(C, fs[1], actions[1])
    move(C, fs[0])
    move(C, fs[1])
    separate(C, fs)
    face(fs[0], fs[1])
    face(fs[1], fs[0])
    hits = (check_hit(C, fs[0], fs[1]), check_hit(C, fs[1], fs[0]))  # simultaneous: trades happen
    if hits[0] is not None:
        apply_hit(C, g, 0, hits[0])
    if hits[1] is not None:
        apply_hit(C, g, 1, hits[1])
    tick(fs[0])
    tick(fs[1])
    g["frame"] += 1
    finish(C, g)


def chance(g: Game, per_mille: int) -> bool:
    """True with probability per_mille / 1000, from the game's seeded rng."""
    return rng_next(g) % 1000 < per_mille


def commit(g: Game, action: int, frames: int) -> int:
    """Play `action` now and for frames - 1 more frames: a scripted opponent's decision is held
    (its reaction time), so it acts on what it saw a few frames ago."""
    g["hold"] = int(action)
    g["held"] = frames - 1
    return int(action)


def opponent_action(C: dict[str, Any], g: Game) -> int:
    if g["opponent"] == "idle":
        return int(A.NOOP)
    if g["held"] > 0:  # a decision still held
        g["held"] -= 1
        return int(g["hold"])
    if g["opponent"] == "random":
        return commit(g, rng_next(g) % len(C["actions"]), C["random_hold_frames"])
    if g["opponent"] == "aggressive":
        return aggressive(C, g)
    return defensive(C, g)


def aggressive(C: dict[str, Any], g: Game) -> int:
    """Presses forward: from afar it walks in with a random reaction time and the odd hesitation;
    within reach it mostly opens with the special (else waits behind its guard), then punches and
    kicks, now and then backing off."""
    P, reach = C["scripted"], C["attacks"]
    me, foe = g["fighters"][1], g["fighters"][0]
    dist = abs(foe["x"] - me["x"])
    toward = A.RIGHT if foe["x"] > me["x"] else A.LEFT
    away = A.LEFT if toward == A.RIGHT else A.RIGHT
    # A held walk ends before either fighter, both walking, could have closed into special reach.
    if dist > reach["special"]["reach"] + 2 * C["walk_speed"] * P["reaction_frames"]:
        if chance(g, P["hesitate_chance"]):
            return commit(g, A.NOOP, 2 + rng_next(g) % (P["hesitate_frames"] - 1))
        return commit(g, toward, 1 + rng_next(g) % P["reaction_frames"])
    if dist <= reach["kick"]["reach"] and chance(g, P["retreat_chance"]):
        return commit(g, away, 2 + rng_next(g) % (P["retreat_frames"] - 1))
    if me["cooldown"] == 0 and reach["kick"]["reach"] < dist <= reach["special"]["reach"]:
        if chance(g, P["special_chance"]):
            return commit(g, A.SPECIAL, 1)
        return commit(g, A.BLOCK, 1 + rng_next(g) % P["reaction_frames"])
    if dist <= reach["punch"]["reach"]:
        return commit(g, A.PUNCH if rng_next(g) % 2 == 0 else A.KICK, 1)
    if dist <= reach["kick"]["reach"]:
        return commit(g, A.KICK, 1)
    return commit(g, toward, 1)  # near a special's reach it steps in frame by frame


def defensive(C: dict[str, Any], g: Game) -> int:
    """Blocks what is coming (usually at once), counters up close, otherwise keeps its distance,
    now and then stepping in; its moves are held for a random reaction time."""
    P, reach = C["scripted"], C["attacks"]
    me, foe = g["fighters"][1], g["fighters"][0]
    dist = abs(foe["x"] - me["x"])
    toward = A.RIGHT if foe["x"] > me["x"] else A.LEFT
    away = A.LEFT if toward == A.RIGHT else A.RIGHT
    threat = attack_of(foe["state"])
    if threat is not None and dist <= reach[threat]["reach"] + P["threat_margin"]:
        if me["state"] == BLOCK or chance(g, P["block_chance"]):
            return commit(g, A.BLOCK, 1)
        return commit(g, A.NOOP, 1)  # too slow this frame
    if dist <= reach["punch"]["reach"]:
        return commit(g, A.PUNCH, 1)
    if chance(g, P["approach_chance"]):
        return commit(g, toward, 2 + rng_next(g) % (P["approach_frames"] - 1))
    react = 1 + rng_next(g) % P["reaction_frames"]
    return commit(g, away if dist < P["keep_distance"] else A.NOOP, react)


def step(C: dict[str, Any], g: Game, action: int) -> None:
    """One env step: the agent's action held for frames_per_step frames against the opponent."""
    g["dealt"] = [0, 0]
    for _ in range(C["frames_per_step"]):
        if g["done"]:
            break
        step_frame(C, g, (int(action), opponent_action(C, g)))


def snapshot(g: Game) -> Game:
    return copy.deepcopy(g)
