"""Gomoku's compiled kernels on a flat board: a move, a win through it, a winning move, the planes.

A board is an int8 array of n*n cells (0 empty, +1 black, -1 white); action `a` is the cell at
row `a // n`, column `a % n`; (x, y) = (column, row) appear only at the edges (display,
protocols). Black moves first. A move is checked for a win through that move only.
"""

from __future__ import annotations

import numba as nb
import numpy as np

BLACK, WHITE = 1, -1
#: Outcomes of a move: the game goes on, the mover won, or the board filled up.
ONGOING, WIN, DRAW = 0, 1, 2
#: Input planes of a position, from the mover's view: own stones, opponent stones, last move,
#: and side to move (all ones when black is to move).
N_PLANES = 4
RULES = ("freestyle", "exact")

# Kernel parameters, one int64 array so that a kernel's signature is the same for every game.
P_SIZE, P_N_IN_ROW, P_EXACT = 0, 1, 2


@nb.njit(cache=True, inline="always")
def _run(board: np.ndarray, x: int, y: int, dx: int, dy: int, player: int, size: int) -> int:
    count = 0
    x, y = x + dx, y + dy
    while 0 <= x < size and 0 <= y < size and board[y * size + x] == player:
        count += 1
        x, y = x + dx, y + dy
    return count


@nb.njit(cache=True)
def line_lengths(board: np.ndarray, action: int, player: int, size: int) -> tuple[int, int, int, int]:
    """Lengths of `player`'s lines through `action` (counting it) along the four directions."""
    x, y = action % size, action // size
    h = 1 + _run(board, x, y, 1, 0, player, size) + _run(board, x, y, -1, 0, player, size)
    v = 1 + _run(board, x, y, 0, 1, player, size) + _run(board, x, y, 0, -1, player, size)
    d = 1 + _run(board, x, y, 1, 1, player, size) + _run(board, x, y, -1, -1, player, size)
    a = 1 + _run(board, x, y, 1, -1, player, size) + _run(board, x, y, -1, 1, player, size)
    return h, v, d, a


@nb.njit(cache=True)
def wins(board: np.ndarray, action: int, player: int, params: np.ndarray) -> bool:
    """Whether `player` at `action` makes a winning line (the stone need not be on the board)."""
    size, n_in_row, exact = params[P_SIZE], params[P_N_IN_ROW], params[P_EXACT]
    x, y = action % size, action // size
    for d in range(4):
        dx, dy = (1, 0, 1, 1)[d], (0, 1, 1, -1)[d]
        count = 1
        u, v = x + dx, y + dy
        while 0 <= u < size and 0 <= v < size and board[v * size + u] == player:
            count += 1
            u, v = u + dx, v + dy
        u, v = x - dx, y - dy
        while 0 <= u < size and 0 <= v < size and board[v * size + u] == player:
            count += 1
            u, v = u - dx, v - dy
        if count == n_in_row or (count > n_in_row and exact == 0):
            return True
    return False


@nb.njit(cache=True)
def winning_move(board: np.ndarray, player: int, params: np.ndarray) -> int:
    """An empty cell where `player` would win at once, or -1."""
    size = params[P_SIZE]
    for a in range(board.size):
        if board[a] != player:
            continue
        # A winning cell extends a line of the player's: it is next to one of their stones.
        x, y = a % size, a // size
        for v in range(max(y - 1, 0), min(y + 2, size)):
            for u in range(max(x - 1, 0), min(x + 2, size)):
                c = v * size + u
                if board[c] == 0 and wins(board, c, player, params):
                    return c
    return -1


@nb.njit(cache=True)
def apply_move(board: np.ndarray, action: int, player: int, n_moves: int, params: np.ndarray) -> int:
    """Place `player`'s stone at an empty `action`; the outcome (ONGOING, WIN or DRAW).

    `n_moves` is the number of stones on the board before this one.
    """
    board[action] = player
    if wins(board, action, player, params):
        return WIN
    if n_moves + 1 == board.size:
        return DRAW
    return ONGOING


@nb.njit(cache=True)
def encode(board: np.ndarray, player: int, last_move: int, params: np.ndarray, out: np.ndarray) -> None:
    """Write the N_PLANES input planes of a position, from the view of `player` (to move), to `out`."""
    size = params[P_SIZE]
    out[:] = 0.0
    for a in range(board.size):
        stone = board[a]
        if stone == player:
            out[0, a // size, a % size] = 1.0
        elif stone == -player:
            out[1, a // size, a % size] = 1.0
    if last_move >= 0:
        out[2, last_move // size, last_move % size] = 1.0
    if player == BLACK:
        out[3, :, :] = 1.0


# The kernels a search engine calls, as C functions: a C function's type is its signature, so an
# engine kernel that takes them compiles once for every game with these signatures and numba's
# disk cache keeps it (a jitted function passed as an argument is a new type in every process).
BOARD_PTR = nb.types.CPointer(nb.types.int8)
PARAMS_PTR = nb.types.CPointer(nb.types.int64)


@nb.cfunc(nb.types.int64(BOARD_PTR, nb.types.int64, nb.types.int64, nb.types.int64, PARAMS_PTR), cache=True)
def apply_move_c(board_ptr, action, player, n_moves, params_ptr):  # type: ignore[no-untyped-def]
    params = nb.carray(params_ptr, (3,))
    board = nb.carray(board_ptr, (params[P_SIZE] * params[P_SIZE],))
    return apply_move(board, action, player, n_moves, params)


@nb.cfunc(nb.types.int64(BOARD_PTR, nb.types.int64, PARAMS_PTR), cache=True)
def winning_move_c(board_ptr, player, params_ptr):  # type: ignore[no-untyped-def]
    params = nb.carray(params_ptr, (3,))
    board = nb.carray(board_ptr, (params[P_SIZE] * params[P_SIZE],))
    return winning_move(board, player, params)


@nb.cfunc(
    nb.types.int64(
        BOARD_PTR, nb.types.int64, nb.types.int64, PARAMS_PTR, nb.types.CPointer(nb.types.float32)
    ),
    cache=True,
)
def encode_c(board_ptr, player, last_move, params_ptr, out_ptr):  # type: ignore[no-untyped-def]
    params = nb.carray(params_ptr, (3,))
    size = params[P_SIZE]
    board = nb.carray(board_ptr, (size * size,))
    out = nb.carray(out_ptr, (N_PLANES, size, size))
    encode(board, player, last_move, params, out)
    return 0
