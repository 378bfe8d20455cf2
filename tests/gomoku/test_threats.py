"""Victory by continuous fours: the solver against a plain recursive one, and positions by hand."""

from __future__ import annotations

import numpy as np
import pytest

from framework_plugins.gomoku.alphabeta import engine_positions
from framework_plugins.gomoku.kernels import BLACK, WHITE, wins
from framework_plugins.gomoku.rules import Gomoku
from framework_plugins.gomoku.threats import MAX_FOURS, forced_win


def winning_cells(board: np.ndarray, player: int, game: Gomoku) -> list[int]:
    return [int(a) for a in np.flatnonzero(board == 0) if wins(board, int(a), player, game.params)]


def wins_by_fours(board: np.ndarray, player: int, game: Gomoku, fours: int = MAX_FOURS) -> bool:
    """The definition, walked plainly: `player` (to move) wins at once, or plays a four (no other
    move, where the opponent has a win to stop) after which one cell wins, the opponent's only
    answer, and wins by fours from there; or a move after which two cells win."""
    if winning_cells(board, player, game):
        return True
    threats = winning_cells(board, -player, game)
    if len(threats) >= 2 or fours == 0:
        return False
    for a in threats or [int(c) for c in np.flatnonzero(board == 0)]:
        board[a] = player
        mine = winning_cells(board, player, game)
        won = len(mine) >= 2
        if len(mine) == 1 and not wins(board, mine[0], -player, game.params):
            board[mine[0]] = -player
            won = wins_by_fours(board, player, game, fours - 1)
            board[mine[0]] = 0
        board[a] = 0
        if won:
            return True
    return False


@pytest.mark.parametrize("rule", ["freestyle", "exact"])
def test_the_solver_finds_exactly_the_wins_by_fours_the_definition_finds(rule: str) -> None:
    game = Gomoku(9, 5, rule)
    found = 0
    for state in engine_positions(game, 6, seed=7):
        for player in (BLACK, WHITE):
            board = state.board.copy()
            move = forced_win(board, player, game.params)
            np.testing.assert_array_equal(board, state.board)  # the board is left as it was
            assert (move >= 0) == wins_by_fours(board, player, game), f"{player}\n{state.render()}"
            if move < 0:
                continue
            found += 1
            # The move itself starts the win: it wins, or it is a four after which the win goes on.
            assert board[move] == 0
            board[move] = player
            mine = winning_cells(board, player, game)
            threats = winning_cells(state.board, -player, game)
            assert (
                wins(board, move, player, game.params)
                or len(mine) >= 2
                or (
                    len(mine) == 1
                    and not wins(board, mine[0], -player, game.params)
                    and set(threats) <= {move}
                    and wins_by_fours(_with(board, mine[0], -player), player, game)
                )
            ), f"{player} plays {game.to_xy(move)}\n{state.render()}"
    assert found >= 20  # the sample holds wins by fours, not only positions without


def _with(board: np.ndarray, a: int, player: int) -> np.ndarray:
    out = board.copy()
    out[a] = player
    return out


def board_of(game: Gomoku, black: list[tuple[int, int]], white: list[tuple[int, int]]) -> np.ndarray:
    board = np.zeros(game.n_actions, dtype=np.int8)
    for cells, colour in ((black, BLACK), (white, WHITE)):
        for x, y in cells:
            board[game.from_xy(x, y)] = colour
    return board


GAME = Gomoku(9, 5)


def test_a_four_three_is_found_two_fours_ahead() -> None:
    # Black: a three on row 1 closed at its left end, and two stones of column 4 below (4, 1).
    # (4, 1) makes a four (wins at (5, 1)) and an open three; after the block, (4, 4) or (4, 0)
    # makes an open four.
    board = board_of(GAME, [(1, 1), (2, 1), (3, 1), (4, 2), (4, 3)], [(0, 1), (8, 8), (8, 7), (0, 8), (7, 8)])
    assert forced_win(board, BLACK, GAME.params) == GAME.from_xy(4, 1)
    assert forced_win(board, WHITE, GAME.params) == -1


def test_an_open_three_wins_by_making_an_open_four() -> None:
    board = board_of(GAME, [(3, 4), (4, 4), (5, 4)], [(0, 0), (8, 0), (0, 8)])
    assert forced_win(board, BLACK, GAME.params) in (GAME.from_xy(2, 4), GAME.from_xy(6, 4))


def test_a_win_at_once_is_the_answer_and_the_opponents_four_comes_first() -> None:
    four = [(1, 4), (2, 4), (3, 4), (4, 4)]
    board = board_of(GAME, four, [(0, 4), (7, 7), (7, 6), (0, 0)])
    assert forced_win(board, BLACK, GAME.params) == GAME.from_xy(5, 4)
    # White to move with black's four to stop, and an open three of its own: the block is not a
    # four, so no win by fours (the open three would need a move white does not have).
    board = board_of(GAME, four, [(0, 4), (6, 1), (6, 2), (6, 3)])
    assert forced_win(board, WHITE, GAME.params) == -1
    # Two fours of black's to stop: lost.
    board = board_of(GAME, [*four, (8, 0), (8, 1), (8, 2), (8, 3)], [(0, 4), (6, 1), (6, 2), (6, 3), (7, 8)])
    assert forced_win(board, WHITE, GAME.params) == -1


def test_a_block_that_makes_a_four_must_be_answered_first() -> None:
    # Black's (4, 2) is a four on row 2 (wins at (5, 2)) and an open three on column 4. Alone, white's
    # block at (5, 2) leaves black an open four to make: a win.
    black = [(1, 2), (2, 2), (3, 2), (5, 1), (4, 3), (4, 4)]
    board = board_of(GAME, black, [(0, 2), (8, 8)])
    assert forced_win(board, BLACK, GAME.params) == GAME.from_xy(4, 2)
    # With white's three on column 5 below (5, 2), the block makes white a four (wins at (5, 6)):
    # black must stop it there, which is no four of black's, and the win is gone.
    board = board_of(GAME, black, [(0, 2), (8, 8), (5, 3), (5, 4), (5, 5)])
    assert winning_cells(board, WHITE, GAME) == []
    assert forced_win(board, BLACK, GAME.params) == -1
    assert not wins_by_fours(board, BLACK, GAME)
