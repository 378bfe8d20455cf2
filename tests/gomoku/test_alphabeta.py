"""The alpha-beta opponent: tactics, speed on the 15x15 board, repeatability, and the ladder of fixed
opponents on 9x9, each rung beating the one below from random openings."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from framework_plugins.alphazero.matches import FixedPlayer, play_match
from framework_plugins.gomoku.alphabeta import evaluate, move_delta, weights
from framework_plugins.gomoku.kernels import BLACK, WHITE
from framework_plugins.gomoku.opponents import make_opponent
from framework_plugins.gomoku.rules import GameState, Gomoku
from tests.gomoku.test_opponents import play_game, position

NINE = Gomoku(9, 5)
FIFTEEN = Gomoku(15, 5)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("mover", [BLACK, WHITE])
def test_takes_its_win_before_blocking_the_opponents_four(depth: int, mover: int) -> None:
    own = [(1, 2), (2, 2), (3, 2), (4, 2)]  # the mover's four, blocked at (0, 2): it wins at (5, 2)
    other = [(3, 4), (3, 5), (3, 6), (3, 7)]  # the other side's open four
    if mover == BLACK:
        state = position(NINE, [*own, (8, 0)], [(0, 2), *other])
    else:
        state = position(NINE, [(0, 2), *other], own)
    assert state.to_play == mover
    assert make_opponent(f"alphabeta{depth}", NINE, 0).act(state) == NINE.from_xy(5, 2)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_blocks_a_four(depth: int) -> None:
    four = [(2, 1), (3, 2), (4, 3), (5, 4)]  # White's diagonal, blocked at (1, 0): (6, 5) wins
    state = position(NINE, [(1, 0), (7, 1), (0, 6), (8, 8)], four)
    assert make_opponent(f"alphabeta{depth}", NINE, 0).act(state) == NINE.from_xy(6, 5)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_blocks_an_open_three_at_one_of_its_ends(depth: int) -> None:
    # White's open three on row 4, (3..5, 4); Black, to move, has two scattered stones.
    state = position(NINE, [(1, 1), (7, 7), (1, 7)], [(3, 4), (4, 4), (5, 4)])
    for seed in range(3):
        move = make_opponent(f"alphabeta{depth}", NINE, seed).act(state)
        assert move in {NINE.from_xy(2, 4), NINE.from_xy(6, 4)}, NINE.to_xy(move)


def test_three_plies_find_a_four_three() -> None:
    # Black: (1..3, 4) closed by White at (0, 4), and (4, 2), (4, 3) on column 4. Black at (4, 4)
    # makes a four (White must answer at (5, 4)) and an open three that becomes an open four.
    black = [(1, 4), (2, 4), (3, 4), (4, 2), (4, 3)]
    white = [(0, 4), (8, 0), (8, 8), (0, 8), (7, 0)]
    state = position(NINE, black, white)
    assert state.to_play == BLACK
    assert make_opponent("alphabeta3", NINE, 0).act(state) == NINE.from_xy(4, 4)


def test_the_evaluation_kept_move_by_move_equals_the_whole_boards() -> None:
    rng = np.random.default_rng(0)
    w = weights(5)
    for game in (NINE, FIFTEEN):
        state = GameState(game)
        score = evaluate(state.board, game.params, w)
        assert score == 0.0
        while not state.done and len(state.moves) < 40:
            move = int(rng.choice(np.flatnonzero(state.legal)))
            score += move_delta(state.board, move, state.to_play, game.params, w)
            state.play(move)
            assert score == pytest.approx(evaluate(state.board, game.params, w))


def test_two_plies_answer_a_15x15_move_well_under_a_second() -> None:
    player = make_opponent("alphabeta2", FIFTEEN, 0)
    state = GameState.from_moves(FIFTEEN, FIFTEEN.random_opening(np.random.default_rng(1)))
    player.act(state)  # compiled
    times = []
    while not state.done and len(state.moves) < 40:
        start = time.perf_counter()
        move = player.act(state)
        times.append(time.perf_counter() - start)
        state.play(move)
    assert statistics.median(times) < 0.05 and max(times) < 0.5, times


def test_the_same_seed_plays_the_same_game_and_seeds_differ() -> None:
    def game(seed: int) -> list[int]:
        return play_game(
            make_opponent("alphabeta1", NINE, seed), make_opponent("alphabeta1", NINE, 50), NINE
        ).moves

    assert game(7) == game(7)
    assert len({tuple(game(seed)) for seed in range(4)}) > 1


def test_the_name_sets_the_depth_and_a_depth_out_of_range_is_refused() -> None:
    assert make_opponent("alphabeta", NINE, 0).depth == 2  # type: ignore[attr-defined]
    assert make_opponent("alphabeta4", NINE, 0).name == "alphabeta4"
    for name in ("alphabeta0", "alphabeta7"):
        with pytest.raises(ValueError, match="1 to 6 plies"):
            make_opponent(name, NINE, 0)


def test_random_openings_differ_and_leave_no_win_in_one() -> None:
    rng = np.random.default_rng(0)
    openings = {tuple(NINE.random_opening(rng)) for _ in range(20)}
    assert len(openings) > 15
    for opening in openings:
        state = GameState.from_moves(NINE, list(opening))
        assert len(opening) == 2 and not state.done and state.to_play == BLACK


def match(stronger: str, weaker: str, openings: int):  # type: ignore[no-untyped-def]
    first, second = FixedPlayer(make_opponent(stronger, NINE, 1)), FixedPlayer(make_opponent(weaker, NINE, 2))
    return play_match(NINE, first, second, 2 * openings, opening=NINE.random_opening, seed=3)


def test_a_match_plays_each_opening_with_both_colours() -> None:
    seen: list[list[int]] = []

    class Recording:
        name = "recording"

        def __init__(self) -> None:
            self.inner = FixedPlayer(make_opponent("random", NINE, 1))

        def moves(self, states: list[GameState]) -> list[int]:
            seen.extend(list(s.moves[:2]) for s in states if len(s.moves) in (2, 3))
            return self.inner.moves(states)

    result = play_match(NINE, FixedPlayer(make_opponent("heuristic", NINE, 0)), Recording(), 6, seed=0,
                        opening=NINE.random_opening)  # fmt: skip
    assert result.games == 6 and result.score == 1.0
    openings = {tuple(m) for m in seen}
    assert len(openings) == 3  # three openings, each played twice


# The ladder, weakest first (pure MCTS with 1,000 rollouts loses to the one-move heuristic on 9x9);
# each rung against the one below it, 6 openings (12 games) a pair.
LADDER = ["random", "mcts1000", "heuristic", "alphabeta1", "alphabeta2", "alphabeta3"]


@pytest.mark.parametrize(("stronger", "weaker"), list(zip(LADDER[1:], LADDER[:-1], strict=True)))
def test_each_rung_of_the_ladder_beats_the_one_below_on_9x9(stronger: str, weaker: str) -> None:
    result = match(stronger, weaker, 6)
    assert result.score > 0.5, f"{stronger} against {weaker}: {result}"
