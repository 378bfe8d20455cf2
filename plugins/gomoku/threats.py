"""Victory by continuous fours (VCF): a win the opponent can only delay by blocking four after four.

The attacker plays a four (a stone after which it would win at one cell); the defender must block
that cell; the attacker plays another four, and so on, until a move leaves two winning cells (a
double four, or a four made open), which one block cannot stop. A line of play fails where a block
wins for the defender or makes the defender a four: the attacker must block it, which continues
the sequence only where the block is itself a four. Every answer of the defender is forced, so a
sequence found is a proven win, whatever the network thinks of the position.

`forced_win(board, player, params)` is the first move of such a win for `player` to move (a move
that wins at once included), or -1: none within `MAX_FOURS` fours and `MAX_TRIES` moves tried. The
search is a depth-first walk over explicit per-ply arrays (numba's disk cache holds no recursive
function); the attacker's fours at a node are found from the n-cell windows that hold n - 2 of its
stones and none of the defender's, so a position without them costs one pass over the windows.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import BOARD_PTR, P_N_IN_ROW, P_SIZE, PARAMS_PTR, winning_move, wins

#: The most fours one sequence may play (a longer one is not looked for).
MAX_FOURS = 12
#: The most attacking moves one call tries, over all sequences (bounds a call's time: a few
#: milliseconds at worst).
MAX_TRIES = 1000

_DX = np.array([1, 0, 1, 1], dtype=np.int64)
_DY = np.array([0, 1, 1, -1], dtype=np.int64)


@nb.njit(cache=True)
def four_cells(board: np.ndarray, player: int, params: np.ndarray, out: np.ndarray) -> int:
    """The empty cells where a stone of `player` may make a four (those of the windows of n cells
    holding n - 2 of its stones and no other), into `out`; returns how many. A superset where
    overlines do not win (`exact`): a four is confirmed by `wins`."""
    size, n = params[P_SIZE], params[P_N_IN_ROW]
    marked = np.zeros(board.size, dtype=np.bool_)
    count = 0
    for d in range(4):
        dx, dy = _DX[d], _DY[d]
        for y0 in range(size):
            for x0 in range(size):
                x1, y1 = x0 + (n - 1) * dx, y0 + (n - 1) * dy
                if not (0 <= x1 < size and 0 <= y1 < size):
                    continue
                mine, other = 0, 0
                for k in range(n):
                    stone = board[(y0 + k * dy) * size + x0 + k * dx]
                    if stone == player:
                        mine += 1
                    elif stone != 0:
                        other += 1
                if other != 0 or mine != n - 2:
                    continue
                for k in range(n):
                    a = (y0 + k * dy) * size + x0 + k * dx
                    if board[a] == 0 and not marked[a]:
                        marked[a] = True
                        out[count] = a
                        count += 1
    return count


@nb.njit(cache=True)
def wins_through(board: np.ndarray, a: int, player: int, params: np.ndarray) -> tuple[int, int]:
    """After `player`'s stone at `a`: (how many cells on a line through `a` now win for `player`,
    counted up to 2; the first of them or -1)."""
    size, n = params[P_SIZE], params[P_N_IN_ROW]
    x, y = a % size, a // size
    first, count = -1, 0
    for d in range(4):
        for sign in (-1, 1):
            for k in range(1, n):
                u, v = x + sign * k * _DX[d], y + sign * k * _DY[d]
                if not (0 <= u < size and 0 <= v < size):
                    break
                c = v * size + u
                if board[c] == -player:
                    break
                if board[c] == 0 and c != first and wins(board, c, player, params):
                    if first < 0:
                        first = c
                    count += 1
                    if count >= 2:
                        return count, first
    return count, first


@nb.njit(cache=True)
def forced_win(board: np.ndarray, player: int, params: np.ndarray) -> int:
    """The first move of a win by continuous fours for `player` (to move), or -1 (the board is
    left as it was)."""
    win = winning_move(board, player, params)
    if win >= 0:
        return win
    cells = board.size
    candidates = np.empty((MAX_FOURS, cells), dtype=np.int64)
    n_candidates = np.zeros(MAX_FOURS, dtype=np.int64)
    next_candidate = np.zeros(MAX_FOURS, dtype=np.int64)
    attack = np.empty(MAX_FOURS, dtype=np.int64)
    block = np.empty(MAX_FOURS, dtype=np.int64)
    # The defender's win, if it has one, is the attacker's only move (two: the attacker has lost).
    threat = winning_move(board, -player, params)
    if threat >= 0:
        board[threat] = player
        second = winning_move(board, -player, params)
        board[threat] = 0
        if second >= 0:
            return -1
        candidates[0, 0] = threat
        n_candidates[0] = 1
    else:
        n_candidates[0] = four_cells(board, player, params, candidates[0])
    ply, tries, found = 0, 0, -1
    while True:
        if next_candidate[ply] >= n_candidates[ply]:
            if ply == 0:
                break
            ply -= 1
            board[attack[ply]] = 0
            board[block[ply]] = 0
            continue
        a = candidates[ply, next_candidate[ply]]
        next_candidate[ply] += 1
        tries += 1
        if tries > MAX_TRIES:
            break
        board[a] = player
        threats, answer = wins_through(board, a, player, params)
        if threats >= 2:
            found = attack[0] if ply > 0 else a
            board[a] = 0
            break
        if threats == 0 or ply + 1 >= MAX_FOURS:
            board[a] = 0
            continue
        board[answer] = -player  # the defender's only move
        counters, counter = wins_through(board, answer, -player, params)
        if counters >= 2 or wins(board, answer, -player, params):
            board[answer] = 0
            board[a] = 0
            continue
        attack[ply], block[ply] = a, answer
        ply += 1
        next_candidate[ply] = 0
        if counters == 1:  # the block made a four: the attacker must stop it, with a four of its own
            candidates[ply, 0] = counter
            n_candidates[ply] = 1
        else:
            n_candidates[ply] = four_cells(board, player, params, candidates[ply])
    for p in range(ply):  # take back what the walk still has on the board
        board[attack[p]] = 0
        board[block[p]] = 0
    return found


@nb.cfunc(nb.types.int64(BOARD_PTR, nb.types.int64, PARAMS_PTR), cache=True)
def forced_win_c(board_ptr, player, params_ptr):  # type: ignore[no-untyped-def]
    params = nb.carray(params_ptr, (3,))
    board = nb.carray(board_ptr, (params[P_SIZE] * params[P_SIZE],))
    return forced_win(board, player, params)
