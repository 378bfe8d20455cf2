"""Gomoku's rules: wins in every direction and place, exact five, draws, illegal moves, masks and planes."""

from __future__ import annotations

import numpy as np
import pytest

from framework_plugins.gomoku.kernels import BLACK, DRAW, ONGOING, WHITE, WIN, winning_move, wins
from framework_plugins.gomoku.rules import GameState, Gomoku

DIRECTIONS = {"horizontal": (1, 0), "vertical": (0, 1), "diagonal": (1, 1), "anti-diagonal": (1, -1)}


def all_lines(size: int, n: int, dx: int, dy: int) -> list[list[int]]:
    """Every run of n cells along (dx, dy) that fits on the board, as flat actions."""
    lines = []
    for y in range(size):
        for x in range(size):
            end_x, end_y = x + (n - 1) * dx, y + (n - 1) * dy
            if 0 <= end_x < size and 0 <= end_y < size:
                lines.append([(y + i * dy) * size + (x + i * dx) for i in range(n)])
    return lines


def board_with(size: int, black: list[int] | None = None, white: list[int] | None = None) -> np.ndarray:
    board = np.zeros(size * size, dtype=np.int8)
    board[black or []] = BLACK
    board[white or []] = WHITE
    return board


def stones(size: int, cells: list[int], player: int) -> np.ndarray:
    return board_with(size, cells) if player == BLACK else board_with(size, None, cells)


def interleaved(black: list[int], white: list[int]) -> list[int]:
    """Black's and white's moves in turn (black first); black may have one more."""
    assert len(white) <= len(black) <= len(white) + 1
    moves = [m for pair in zip(black, white, strict=False) for m in pair]
    return moves + black[len(white) :]


def xy(game: Gomoku, *cells: tuple[int, int]) -> list[int]:
    return [game.from_xy(x, y) for x, y in cells]


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("player", [BLACK, WHITE])
def test_every_line_of_five_on_the_board_wins_whichever_stone_completes_it(
    direction: str, player: int
) -> None:
    size, n = 9, 5
    params = Gomoku(size, n).params
    dx, dy = DIRECTIONS[direction]
    lines = all_lines(size, n, dx, dy)
    # The lines checked touch all four edges, and the corners a line of this direction can reach.
    covered = {cell for line in lines for cell in line}
    edges = {
        "top": range(size),
        "bottom": range(size * (size - 1), size * size),
        "left": range(0, size * size, size),
        "right": range(size - 1, size * size, size),
    }
    for edge, cells in edges.items():
        assert covered & set(cells), f"no {direction} line touches the {edge} edge"
    corners = {0, size - 1, size * (size - 1), size * size - 1}
    reachable = {(1, 0): corners, (0, 1): corners, (1, 1): {0, size * size - 1}}
    assert covered & corners == reachable.get((dx, dy), {size - 1, size * (size - 1)})
    for line in lines:
        for last in line:
            others = [c for c in line if c != last]
            assert wins(stones(size, others, player), last, player, params), f"{others} + {last}"
            assert not wins(stones(size, others[1:], player), last, player, params), f"{others[1:]} + {last}"


def test_a_line_does_not_wrap_around_the_board_edge() -> None:
    params = Gomoku(9, 5).params
    # Five consecutive flat cells 7..11 are (7,0) (8,0) (0,1) (1,1) (2,1): not a row.
    assert not wins(board_with(9, [7, 8, 10, 11]), 9, BLACK, params)
    # Steps of 10 (one diagonal step) from (6,0): (7,1) (8,2) then (0,4) (1,5) past the right edge.
    assert not wins(board_with(9, [6, 16, 36, 46]), 26, BLACK, params)
    # Steps of 8 (one anti-diagonal step) from (2,0): (1,1) (0,2) then (8,2) (7,3) past the left edge.
    assert not wins(board_with(9, [2, 10, 26, 34]), 18, BLACK, params)


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("top edge from the top-left corner", [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]),
        ("bottom edge to the bottom-right corner", [(4, 8), (5, 8), (6, 8), (7, 8), (8, 8)]),
        ("left edge from the top-left corner", [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]),
        ("right edge to the bottom-right corner", [(8, 4), (8, 5), (8, 6), (8, 7), (8, 8)]),
        ("diagonal from the top-left corner", [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]),
        ("diagonal to the bottom-right corner", [(4, 4), (5, 5), (6, 6), (7, 7), (8, 8)]),
        ("anti-diagonal from the top-right corner", [(8, 0), (7, 1), (6, 2), (5, 3), (4, 4)]),
        ("anti-diagonal to the bottom-left corner", [(4, 4), (3, 5), (2, 6), (1, 7), (0, 8)]),
        ("horizontal in the middle", [(2, 4), (3, 4), (4, 4), (5, 4), (6, 4)]),
    ],
)
@pytest.mark.parametrize("last", [0, 2, 4], ids=["end", "middle", "other-end"])
def test_a_game_ends_with_the_winner_when_a_move_completes_five(
    name: str, line: list[tuple[int, int]], last: int
) -> None:
    game = Gomoku(9, 5)
    cells = xy(game, *line)
    order = [c for i, c in enumerate(cells) if i != last] + [cells[last]]
    # The other side's stones: scattered, off the line, never four in a row.
    spare = [c for c in xy(game, (2, 1), (6, 3), (1, 6), (7, 6), (3, 7), (5, 1), (6, 7)) if c not in cells]
    assert len(spare) >= 5
    for winner in (BLACK, WHITE):
        moves = interleaved(order, spare[:4]) if winner == BLACK else interleaved(spare[:5], order)
        state = GameState.from_moves(game, moves[:-1])
        assert state.outcome == ONGOING and not state.done and state.winner == 0
        assert state.play(moves[-1]) == WIN
        assert state.done and state.outcome == WIN and state.winner == winner


def test_a_row_longer_than_the_board_is_refused_naming_both_values() -> None:
    with pytest.raises(ValueError) as refused:
        Gomoku(board_size=3, n_in_row=5)
    assert str(refused.value) == (
        "n_in_row=5 does not fit on a 3x3 board (board_size=3): it must be from 3 to board_size"
    )


def test_freestyle_six_in_a_row_wins() -> None:
    game = Gomoku(9, 5, "freestyle")
    row = xy(game, (0, 4), (1, 4), (2, 4), (4, 4), (5, 4))
    state = GameState.from_moves(game, interleaved(row, xy(game, (0, 0), (2, 0), (4, 0), (6, 0), (8, 0))))
    assert state.play(game.from_xy(3, 4)) == WIN and state.winner == BLACK


def test_exact_six_in_a_row_does_not_win_and_the_game_goes_on() -> None:
    game = Gomoku(9, 5, "exact")
    row = xy(game, (0, 4), (1, 4), (2, 4), (4, 4), (5, 4))
    state = GameState.from_moves(game, interleaved(row, xy(game, (0, 0), (2, 0), (4, 0), (6, 0), (8, 0))))
    assert state.play(game.from_xy(3, 4)) == ONGOING
    assert not state.done and state.winner == 0 and state.legal.sum() == 81 - 11
    assert not wins(
        board_with(9, xy(game, *[(x, 2) for x in range(7)])), game.from_xy(3, 2), BLACK, game.params
    )


def test_exact_five_wins_and_winning_move_skips_overlines() -> None:
    game = Gomoku(9, 5, "exact")
    row = xy(game, (0, 4), (1, 4), (3, 4), (4, 4))
    state = GameState.from_moves(game, interleaved(row, xy(game, (0, 0), (2, 0), (4, 0), (6, 0))))
    assert state.play(game.from_xy(2, 4)) == WIN and state.winner == BLACK
    # X X X _ X X: filling the gap makes six, which does not win; neither end makes a five.
    board = board_with(9, xy(game, (0, 6), (1, 6), (2, 6), (4, 6), (5, 6)))
    assert winning_move(board, BLACK, game.params) == -1
    assert winning_move(board, BLACK, Gomoku(9, 5, "freestyle").params) == game.from_xy(3, 6)
    # A move that makes six one way and exactly five another way wins.
    board = board_with(9, xy(game, (0, 1), (1, 1), (2, 1), (4, 1), (5, 1), (3, 2), (3, 3), (3, 4), (3, 5)))
    assert wins(board, game.from_xy(3, 1), BLACK, game.params)


def test_a_full_board_without_a_line_is_a_draw() -> None:
    game = Gomoku(6, 3)
    # Stripes where no three cells in any direction share a colour (pairs at most).
    cells = [(x, y) for y in range(6) for x in range(6)]
    black = [game.from_xy(x, y) for x, y in cells if (x + 2 * y) % 4 < 2]
    white = [game.from_xy(x, y) for x, y in cells if (x + 2 * y) % 4 >= 2]
    moves = interleaved(black, white)
    state = GameState.from_moves(game, moves[:-1])
    assert state.outcome == ONGOING and state.legal.sum() == 1
    assert state.play(moves[-1]) == DRAW
    assert state.done and state.winner == 0 and not state.legal.any()


def test_a_line_completed_on_the_last_empty_cell_is_a_win_not_a_draw() -> None:
    game = Gomoku(3, 3)
    # X X X / O O X / X O O, black's last move the top middle.
    state = GameState.from_moves(game, [0, 3, 2, 4, 5, 7, 6, 8])
    assert state.outcome == ONGOING
    assert state.play(1) == WIN and state.winner == BLACK


def test_illegal_moves_raise_and_leave_the_state_unchanged() -> None:
    game = Gomoku(9, 5)
    state = GameState.from_moves(game, [40, 41])
    before = (state.board.copy(), state.legal.copy(), list(state.moves), state.to_play)
    for bad in (40, 41, -1, 81, 1000):
        with pytest.raises(ValueError, match="not legal"):
            state.play(bad)
        assert np.array_equal(state.board, before[0]) and np.array_equal(state.legal, before[1])
        assert state.moves == before[2] and state.to_play == before[3]
    with pytest.raises(ValueError, match="off the"):
        game.from_xy(9, 0)
    with pytest.raises(ValueError, match="off the"):
        game.from_xy(0, -1)


def test_a_move_after_the_game_is_over_raises() -> None:
    game = Gomoku(9, 5)
    state = GameState.from_moves(game, interleaved([0, 1, 2, 3, 4], [9, 10, 11, 12]))
    assert state.done
    with pytest.raises(ValueError, match="over"):
        state.play(40)
    assert len(state.moves) == 9


def test_legal_mask_is_the_empty_cells_while_ongoing_and_all_false_after_the_end() -> None:
    game = Gomoku(6, 4)
    rng = np.random.default_rng(0)
    for _ in range(20):
        state = game.new_state()
        while not state.done:
            np.testing.assert_array_equal(state.legal, state.board == 0)
            state.play(int(rng.choice(np.flatnonzero(state.legal))))
        assert state.legal.dtype == bool and not state.legal.any()


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("missing", [0, 2, 4], ids=["first", "middle", "last"])
def test_winning_move_finds_the_one_cell_that_completes_a_line(direction: str, missing: int) -> None:
    size, params = 9, Gomoku(9, 5).params
    dx, dy = DIRECTIONS[direction]
    lines = all_lines(size, 5, dx, dy)
    for line in (lines[0], lines[len(lines) // 2], lines[-1]):
        for player in (BLACK, WHITE):
            board = stones(size, [c for i, c in enumerate(line) if i != missing], player)
            # The opponent blocks the cells just beyond both ends, so the gap is the only win.
            for end, step in ((line[0], -1), (line[-1], 1)):
                x, y = end % size + step * dx, end // size + step * dy
                if 0 <= x < size and 0 <= y < size:
                    board[y * size + x] = -player
            assert winning_move(board, player, params) == line[missing], f"{line}, {player}"
            assert winning_move(board, -player, params) == -1


def test_winning_move_is_minus_one_without_a_win() -> None:
    game = Gomoku(9, 5)
    params = game.params
    assert winning_move(np.zeros(81, dtype=np.int8), BLACK, params) == -1
    # A four blocked at both ends (the edge, then a black stone) has no win.
    board = board_with(9, xy(game, (4, 4)), xy(game, (0, 4), (1, 4), (2, 4), (3, 4)))
    assert winning_move(board, WHITE, params) == -1
    # Threes are not wins yet, for either side.
    board = board_with(9, xy(game, (1, 7), (2, 7), (3, 7)), xy(game, (2, 2), (3, 3), (4, 4)))
    assert winning_move(board, BLACK, params) == -1 and winning_move(board, WHITE, params) == -1


def test_planes_are_from_the_view_of_the_side_to_move() -> None:
    game = Gomoku(9, 5)
    state = game.new_state()
    planes = state.planes()
    assert planes.shape == (4, 9, 9) and planes.dtype == np.float32
    assert not planes[:3].any() and (planes[3] == 1).all()

    state.play(game.from_xy(2, 3))  # black
    planes = state.planes()  # white to move
    assert not planes[0].any()
    assert planes[1].sum() == 1 and planes[1, 3, 2] == 1
    assert planes[2].sum() == 1 and planes[2, 3, 2] == 1
    assert not planes[3].any()

    state.play(game.from_xy(7, 1))  # white
    planes = state.planes()  # black to move
    assert planes[0].sum() == 1 and planes[0, 3, 2] == 1
    assert planes[1].sum() == 1 and planes[1, 1, 7] == 1
    assert planes[2].sum() == 1 and planes[2, 1, 7] == 1
    assert (planes[3] == 1).all()

    state.play(game.from_xy(0, 8))  # black
    planes = state.planes()  # white to move
    np.testing.assert_array_equal(planes[0].ravel(), state.board == WHITE)
    np.testing.assert_array_equal(planes[1].ravel(), state.board == BLACK)
    assert planes[2].sum() == 1 and planes[2, 8, 0] == 1
    assert not planes[3].any()


def test_copy_is_independent_of_the_original() -> None:
    game = Gomoku(9, 5)
    state = GameState.from_moves(game, [40, 41])
    other = state.copy()
    other.play(42)
    assert state.moves == [40, 41] and state.board[42] == 0 and state.legal[42] and state.to_play == BLACK
    assert other.moves == [40, 41, 42] and other.board[42] == BLACK and other.to_play == WHITE
    state.play(0)
    assert other.board[0] == 0 and other.legal[0] and len(other.moves) == 3
    np.testing.assert_array_equal(state.copy().planes(), state.planes())


def test_unknown_rule_and_sizes_out_of_range_raise() -> None:
    with pytest.raises(ValueError, match="freestyle, exact"):
        Gomoku(9, 5, "renju")
    with pytest.raises(ValueError, match="n_in_row"):
        Gomoku(9, 10)
    with pytest.raises(ValueError, match="board_size"):
        Gomoku(2, 3)
