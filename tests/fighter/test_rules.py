"""The Python twin reproduces the JavaScript rules exactly (golden trajectories from Node)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter import rules
from framework_plugins.fighter.protocol import decode, encode, pack_game
from framework_plugins.fighter.rules import A, S
from tests.conftest import require_tool

GOLDEN_JS = Path(rules.__file__).parent / "golden.js"
C = rules.load_constants()


def scripted(*segments: tuple[int, int]) -> list[int]:
    """(action, repeats) segments → a flat action list."""
    return [action for action, n in segments for _ in range(n)]


#: What a patient player does: wait, poke, block, back off, come back with everything, then
#: corner the opponent and stand there.
PATIENT = scripted(
    (A.NOOP, 40), (A.RIGHT, 10), (A.KICK, 8), (A.BLOCK, 20), (A.LEFT, 25), (A.CROUCH, 10),
    (A.SPECIAL, 30), (A.RIGHT, 20), (A.PUNCH, 40), (A.JUMP, 5), (A.KICK, 60), (A.RIGHT, 100),
    (A.NOOP, 80),
)  # fmt: skip
#: Seeds the scripted opponents' randomness is compared over, the player's actions fixed.
SCRIPTED_SEEDS = (11, 12, 13, 14, 15, 2**32 - 1)


def scenarios() -> list[dict]:
    out = []
    rng = np.random.default_rng(1234)
    for opponent in ("aggressive", "defensive"):  # the same actions: only the seed differs
        out += [{"seed": seed, "opponent": opponent, "actions": PATIENT} for seed in SCRIPTED_SEEDS]
    for opponent in C["opponents"]:
        for seed in (0, 7, 2**31 - 1):
            # uniformly random play, and "sticky" random play that holds actions like a policy
            out.append({"seed": seed, "opponent": opponent, "actions": rng.integers(0, 9, 450).tolist()})
            sticky = np.repeat(rng.integers(0, 9, 90), rng.integers(1, 10, 90))[:450]
            out.append({"seed": seed + 1, "opponent": opponent, "actions": sticky.tolist()})
        # approach and fight: walking, jumping, blocking, every attack, the special's cooldown
        out.append({
            "seed": 3, "opponent": opponent,
            "actions": scripted(
                (A.RIGHT, 15), (A.PUNCH, 6), (A.KICK, 6), (A.SPECIAL, 3), (A.SPECIAL, 3), (A.BLOCK, 10),
                (A.JUMP, 1), (A.RIGHT, 8), (A.CROUCH, 10), (A.SPECIAL, 40), (A.KICK, 30), (A.LEFT, 200),
                (A.PUNCH, 120),
            ),
        })  # fmt: skip
    return out


def javascript(cases: list[dict]) -> list[list[dict]]:
    node = require_tool("node")  # Node.js runs the authoritative JavaScript rules
    out = subprocess.run(
        [node, str(GOLDEN_JS)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def python(case: dict) -> list[dict]:
    g = rules.new_game(C, case["seed"], case["opponent"])
    states = [rules.snapshot(g)]
    for action in case["actions"]:
        rules.step(C, g, action)
        states.append(rules.snapshot(g))
        if g["done"]:
            break
    return states


def test_python_twin_matches_javascript_state_for_state() -> None:
    cases = scenarios()
    golden = javascript(cases)
    assert len(golden) == len(cases)
    for case, expected in zip(cases, golden, strict=True):
        actual = python(case)
        assert len(actual) == len(expected), (case["opponent"], case["seed"])
        for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert a == e, f"{case['opponent']} seed {case['seed']}: first difference at step {step}"


def test_golden_scenarios_exercise_every_state_and_outcome() -> None:
    """The comparison above means little unless the trajectories cover the whole state machine."""
    seen_states, winners, damage = set(), set(), 0
    for case in scenarios():
        for g in python(case):
            seen_states.update(f["state"] for f in g["fighters"])
            damage += sum(g["dealt"])
        winners.add(g["winner"])
    assert seen_states == set(range(len(C["states"])))
    assert {0, 1} <= winners
    assert damage > 0


@pytest.mark.parametrize("opponent", ["aggressive", "defensive"])
def test_a_scripted_opponent_plays_each_seed_its_own_way_and_repeats_it(opponent: str) -> None:
    rounds = [python({"seed": seed, "opponent": opponent, "actions": PATIENT}) for seed in SCRIPTED_SEEDS]
    fighters = [[g["fighters"][1] for g in states] for states in rounds]
    assert all(a != b for i, a in enumerate(fighters) for b in fighters[i + 1 :])
    again = python({"seed": SCRIPTED_SEEDS[0], "opponent": opponent, "actions": PATIENT})
    assert again == rounds[0]


def decisions(opponent: str) -> set[tuple[str, int]]:
    """Every (kind of action, frames held) the scripted opponent chose over the golden scenarios:
    rules.step's loop, with the opponent's choice looked at before each frame is played."""
    seen = set()
    for case in scenarios():
        if case["opponent"] != opponent:
            continue
        g = rules.new_game(C, case["seed"], opponent)
        for action in case["actions"]:
            for _ in range(C["frames_per_step"]):
                if g["done"]:
                    break
                me, foe = g["fighters"][1], g["fighters"][0]
                toward = A.RIGHT if foe["x"] > me["x"] else A.LEFT
                fresh = g["held"] == 0
                chosen = rules.opponent_action(C, g)
                if fresh:
                    kind = "toward" if chosen == toward else "away" if chosen in (A.LEFT, A.RIGHT) else ""
                    seen.add((kind or A(chosen).name.lower(), g["held"] + 1))
                rules.step_frame(C, g, (action, chosen))
            if g["done"]:
                break
    return seen


def test_golden_scenarios_exercise_every_random_choice_of_the_scripted_opponents() -> None:
    """Each branch that draws from the rng must run in the trajectories both languages play."""
    P = C["scripted"]
    chose = decisions("aggressive")
    kinds = {kind for kind, _ in chose}
    assert {"toward", "away", "noop", "special", "block", "punch", "kick"} <= kinds
    assert {frames for kind, frames in chose if kind == "toward"} >= set(range(1, P["reaction_frames"] + 1))
    assert max(frames for kind, frames in chose if kind == "noop") > P["reaction_frames"]  # a hesitation
    assert max(frames for kind, frames in chose if kind == "away") > 1  # a retreat
    chose = decisions("defensive")
    kinds = {kind for kind, _ in chose}
    assert {"toward", "away", "noop", "block", "punch"} <= kinds
    assert ("noop", 1) in chose  # a block too late
    assert max(frames for kind, frames in chose if kind == "toward") > P["reaction_frames"]  # stepping in


def test_every_golden_state_fits_the_wire_format() -> None:
    """Whatever an opponent holds (hold, held) stays within what a result message may carry."""
    for case in scenarios():
        games = [pack_game(g) for g in python(case)]
        for start in range(0, len(games), 64):  # as many games as a message may carry
            message = {"type": "result", "episode": 0, "step": 1, "games": games[start : start + 64]}
            decode(encode(message), allowed=("result",))


def test_aggressive_beats_a_random_player_almost_always() -> None:
    """Its randomness must not make it harmless: an untrained agent still loses."""
    rng = np.random.default_rng(0)
    wins = 0
    for seed in range(40):
        g = rules.new_game(C, seed, "aggressive")
        while not g["done"]:
            rules.step(C, g, int(rng.integers(0, len(C["actions"]))))
        wins += g["winner"] == 0
    assert wins <= 2


def test_idle_round_times_out_as_a_draw() -> None:
    g = rules.new_game(C, 0, "idle")
    steps = 0
    while not g["done"]:
        rules.step(C, g, A.NOOP)
        steps += 1
    assert steps == C["round_frames"] // C["frames_per_step"]
    assert g["winner"] == -1 and g["fighters"][0]["hp"] == C["max_hp"]


def test_a_blocked_attack_deals_chip_damage_only() -> None:
    g = rules.new_game(C, 0, "idle")
    g["fighters"][1]["x"] = g["fighters"][0]["x"] + 90
    g["fighters"][1]["state"] = int(S.BLOCK)
    for _ in range(12):
        rules.step_frame(C, g, (A.KICK, A.BLOCK))
    assert g["fighters"][1]["hp"] == C["max_hp"] - C["attacks"]["kick"]["chip"]


def test_unknown_opponent_lists_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown opponent 'boss'; valid: idle, random, aggressive, defensive"
    ):
        rules.new_game(C, 0, "boss")
