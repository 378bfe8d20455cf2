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


def test_fighters_face_each_other_and_move_with_their_position() -> None:
    left = agent_pixels(drawing.draw(C, game_with(S.PUNCH, x=300, facing=1)))
    right = agent_pixels(drawing.draw(C, game_with(S.PUNCH, x=700, facing=1)))
    flipped = agent_pixels(drawing.draw(C, game_with(S.PUNCH, x=300, facing=-1)))
    cols = lambda mask: np.flatnonzero(mask.any(axis=0))  # noqa: E731
    assert cols(right).mean() - cols(left).mean() == pytest.approx(0.4 * 400, abs=4)
    assert cols(left).max() > cols(flipped).max()  # the punch reaches toward where it faces


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
