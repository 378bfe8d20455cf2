"""The 8 board symmetries: a group of distinct permutations that move stones, policies and actions alike."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from framework_plugins.gomoku.kernels import BLACK, WHITE, wins
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.gomoku.symmetries import (
    N_SYMMETRIES,
    tables,
    transform_action,
    transform_planes,
    transform_policy,
)

SIZES = [6, 9]


def compose(first: int, then: int, size: int) -> np.ndarray:
    """The index table of symmetry `first` followed by `then`."""
    cells = np.arange(size * size)
    return transform_policy(transform_policy(cells, first, size), then, size)


@pytest.mark.parametrize("size", SIZES)
def test_the_eight_symmetries_are_distinct_permutations_and_zero_is_the_identity(size: int) -> None:
    index, inverse = tables(size)
    assert index.shape == inverse.shape == (N_SYMMETRIES, size * size) == (8, size * size)
    cells = np.arange(size * size)
    for k in range(8):
        np.testing.assert_array_equal(np.sort(index[k]), cells)
    assert len({tuple(row) for row in index}) == 8
    np.testing.assert_array_equal(index[0], cells)
    np.testing.assert_array_equal(transform_policy(cells, 0, size), cells)


@pytest.mark.parametrize("size", SIZES)
def test_the_symmetries_form_a_group_where_every_one_has_an_inverse(size: int) -> None:
    index, inverse = tables(size)
    cells = np.arange(size * size)
    as_tuples = {tuple(row): k for k, row in enumerate(index)}
    for k in range(8):
        # The inverse table undoes symmetry k, both ways round.
        np.testing.assert_array_equal(transform_policy(cells, k, size)[inverse[k]], cells)
        np.testing.assert_array_equal(cells[inverse[k]][index[k]], cells)
        # ...and it is itself one of the 8 symmetries.
        undo = as_tuples.get(tuple(inverse[k]))
        assert undo is not None, f"the inverse of symmetry {k} is not a symmetry"
        np.testing.assert_array_equal(compose(k, undo, size), cells)
    for first, then in itertools.product(range(8), repeat=2):
        assert tuple(compose(first, then, size)) in as_tuples, f"{first} then {then} is not a symmetry"


@pytest.mark.parametrize("size", SIZES)
def test_the_symmetries_are_the_rotations_and_reflections_of_the_square(size: int) -> None:
    grid = np.arange(size * size).reshape(size, size)
    expected = {tuple(np.rot90(g, r).ravel()) for g in (grid, grid.T) for r in range(4)}
    got = {tuple(transform_policy(grid.ravel(), k, size)) for k in range(8)}
    assert got == expected


@pytest.mark.parametrize("size", SIZES)
def test_a_stone_in_the_planes_a_policy_and_transform_action_land_on_the_same_cell(size: int) -> None:
    for a in range(size * size):
        planes = np.zeros((4, size, size), dtype=np.float32)
        planes[0].flat[a] = 1.0
        planes[3] = 1.0
        policy = np.zeros(size * size, dtype=np.float32)
        policy[a] = 1.0
        for k in range(8):
            moved_planes = transform_planes(planes, k)
            moved_policy = transform_policy(policy, k, size)
            target = transform_action(a, k, size)
            assert moved_planes.shape == planes.shape
            assert np.flatnonzero(moved_planes[0].ravel()).tolist() == [target]
            assert np.flatnonzero(moved_policy).tolist() == [target]
            assert (moved_planes[3] == 1).all() and not moved_planes[1:3].any()


def test_transforms_apply_to_batches_and_keep_the_stones_and_policy_aligned() -> None:
    game = Gomoku(9, 5)
    rng = np.random.default_rng(0)
    states = [GameState.from_moves(game, list(rng.permutation(81)[:n])) for n in (3, 8, 15)]
    batch = np.stack([s.planes() for s in states])
    policies = rng.random((3, 81)).astype(np.float32)
    for k in range(8):
        moved = transform_planes(batch, k)
        moved_policy = transform_policy(policies, k, 9)
        for i, state in enumerate(states):
            for a in np.flatnonzero(state.board):
                b = transform_action(int(a), k, 9)
                assert (
                    moved[i, :3].reshape(3, 81)[:, b].tolist() == batch[i, :3].reshape(3, 81)[:, a].tolist()
                )
            for a in range(81):
                assert moved_policy[i, transform_action(a, k, 9)] == policies[i, a]


@pytest.mark.parametrize("size", SIZES)
def test_a_winning_move_stays_winning_and_a_non_winning_one_stays_not(size: int) -> None:
    game = Gomoku(size, 4)
    params = game.params
    # White: an anti-diagonal three that the corner completes; black: X X _ X on the bottom edge.
    board = np.zeros(size * size, dtype=np.int8)
    for x, y in ((size - 2, 1), (size - 3, 2), (size - 4, 3)):
        board[game.from_xy(x, y)] = WHITE
    for x, y in ((0, size - 1), (1, size - 1), (3, size - 1)):
        board[game.from_xy(x, y)] = BLACK
    white_win, black_win = game.from_xy(size - 1, 0), game.from_xy(2, size - 1)
    near_miss = game.from_xy(4, size - 1)  # X X _ X X: the right-hand pair, two in a row, not four
    assert wins(board, white_win, WHITE, params) and wins(board, black_win, BLACK, params)
    assert not wins(board, near_miss, BLACK, params) and not wins(board, black_win, WHITE, params)
    for k in range(8):
        moved = transform_policy(board, k, size)
        assert np.count_nonzero(moved) == np.count_nonzero(board)
        assert wins(moved, transform_action(white_win, k, size), WHITE, params), f"symmetry {k}"
        assert wins(moved, transform_action(black_win, k, size), BLACK, params), f"symmetry {k}"
        assert not wins(moved, transform_action(black_win, k, size), WHITE, params), f"symmetry {k}"
        assert not wins(moved, transform_action(near_miss, k, size), BLACK, params), f"symmetry {k}"
