"""The Python twin reproduces the JavaScript rules exactly (golden trajectories from Node)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from framework_plugins.fighter import rules
from framework_plugins.fighter.rules import A, S
from tests.conftest import require_tool

GOLDEN_JS = Path(rules.__file__).parent / "golden.js"
C = rules.load_constants()


def scripted(*segments: tuple[int, int]) -> list[int]:
    """(action, repeats) segments → a flat action list."""
    return [action for action, n in segments for _ in range(n)]


def scenarios() -> list[dict]:
    out = []
    rng = np.random.default_rng(1234)
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
