"""The replay videos' frames (drawing.py): the fighters posed by state, the round's figures."""

from __future__ import annotations

import numpy as np
import pytest

from framework_plugins.fighter import drawing, rules
from framework_plugins.fighter.rules import S

C = rules.load_constants()


def game_with(state0: int = S.IDLE, **fighter0: int) -> dict:
    g = rules.new_game(C, 0, "idle")
    g["fighters"][0].update(state=int(state0), **fighter0)
    return g


def agent_pixels(img: np.ndarray) -> np.ndarray:
    return np.all(img == drawing.COLORS[0], axis=-1)


def test_a_frame_is_an_rgb_image_of_the_size_asked() -> None:
    img = drawing.draw(C, game_with(), height=120, width=300)
    assert img.shape == (120, 300, 3) and img.dtype == np.uint8


@pytest.mark.parametrize("state", [s for s in S if s != S.IDLE])
def test_every_state_has_a_pose_of_its_own(state: S) -> None:
    idle, posed = agent_pixels(drawing.draw(C, game_with())), agent_pixels(drawing.draw(C, game_with(state)))
    assert posed.sum() > 100 and (idle != posed).sum() > 30


def test_a_knocked_out_fighter_lies_on_the_floor() -> None:
    rows = np.flatnonzero(agent_pixels(drawing.draw(C, game_with(S.KO))).any(axis=1))
    standing = np.flatnonzero(agent_pixels(drawing.draw(C, game_with())).any(axis=1))
    assert np.ptp(rows) < np.ptp(standing) / 2


def columns(img: np.ndarray) -> np.ndarray:
    return np.flatnonzero(agent_pixels(img).any(axis=0))


def test_fighters_face_each_other_and_move_with_their_position() -> None:
    # (clear of the opponent, who stands at 700)
    drawn = {x: columns(drawing.draw(C, game_with(S.PUNCH, x=x, facing=1))) for x in (100, 300, 500)}
    at = {x: cols.mean() for x, cols in drawn.items()}
    flipped = columns(drawing.draw(C, game_with(S.PUNCH, x=300, facing=-1)))
    assert at[500] - at[300] == pytest.approx(at[300] - at[100], abs=2) and at[500] - at[100] > 0.3 * 400
    assert drawn[300].max() > flipped.max()  # the punch reaches toward where it faces


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("wall", ["left", "right"])
def test_a_fighter_against_a_wall_is_drawn_whole(state: S, wall: str) -> None:
    half = C["fighter_width"] // 2
    x, facing = (half, 1) if wall == "left" else (C["stage_width"] - half, -1)  # facing the stage
    # Knocked out, it may lie either way: its back to the wall too.
    for faces in (facing, -facing) if state == S.KO else (facing,):
        cols = columns(drawing.draw(C, game_with(state, x=x, facing=faces), width=400))
        assert cols.min() > 0 and cols.max() < 400 - 1


def test_health_bars_show_the_health_left() -> None:
    full = drawing.draw(C, game_with(hp=100))
    half = drawing.draw(C, game_with(hp=50))
    bar = lambda img: int(np.all(img[10:16, :200] == drawing.HP, axis=-1).any(axis=0).sum())  # noqa: E731
    assert bar(full) == pytest.approx(2 * bar(half), abs=2)


def test_a_landed_blow_sparks_and_an_ended_round_shows_its_winner() -> None:
    g = game_with(S.PUNCH)
    plain = drawing.draw(C, g)
    g["dealt"] = [5, 0]
    assert (
        np.all(drawing.draw(C, g) == drawing.SPARK, axis=-1).sum()
        > np.all(plain == drawing.SPARK, axis=-1).sum()
    )
    g.update(done=True, winner=1)
    band = drawing.draw(C, g)[int(200 * 0.48)]
    assert np.all(band == drawing.COLORS[1], axis=-1).all()
