"""An alpha-beta Gomoku player with a pattern evaluation: the classical engine a Gomoku player
measures a program against.

The evaluation counts every window of `n_in_row` cells along the four directions. A window that
holds stones of one colour only is worth `WEIGHTS[k]` to that colour for its `k` stones, so an
open three (three windows hold all three stones) outweighs a closed one (one window), and a four
outweighs any three. Placing a stone changes only the windows through its cell, so the search
keeps the evaluation move by move.

The search is negamax with alpha-beta pruning over the cells within two of a stone:
- a move that wins at once is played;
- when the opponent has a winning cell, the only moves looked at are the cells that stop it (two
  such cells: the position is lost);
- the other moves are ordered threat first (a cell's worth to the player plus its worth to the
  opponent, so fours, blocks of fours and open threes come first) and the best `width` searched;
- a leaf is the evaluation from the side to move, once it cannot win at once and has at most one
  of the opponent's wins to stop (two: lost, seen at any depth, so that a four-three is found
  three plies ahead).

`alphabeta<depth>` plays a depth-ply search; ties between moves of equal value are broken by the
player's seeded noise, so that games from the same opening differ with the seed.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import P_N_IN_ROW, P_SIZE, wins
from .rules import GameState, Gomoku

#: A won position's value; a win found `ply` moves ahead is worth WIN - ply (sooner is better).
WIN = 1.0e9
#: The most plies `alphabeta<depth>` searches.
MAX_DEPTH = 6
#: Moves searched at each node below the root, best first (the root searches all of them).
DEFAULT_WIDTH = 12
#: A cell's worth to the opponent counts this much in the move order (a block is a little less
#: urgent than an attack of the same size: the player to move gets there first).
DEFENCE = 0.9

_DX = np.array([1, 0, 1, 1], dtype=np.int64)
_DY = np.array([0, 1, 1, -1], dtype=np.int64)


def weights(n_in_row: int) -> np.ndarray:
    """The worth of a window holding k stones of one colour only, k = 0..n_in_row: eight times the
    worth of one stone fewer (more than the windows a stone can add to), a whole row a win."""
    w = np.zeros(n_in_row + 1, dtype=np.float64)
    for k in range(1, n_in_row):
        w[k] = 8.0 ** (k - 1)
    w[n_in_row] = WIN / 16
    return w


@nb.njit(cache=True, inline="always")
def _window_worth(black: int, white: int, w: np.ndarray) -> float:
    """A window's worth to Black (+1): positive for Black's stones alone, negative for White's."""
    if white == 0:
        return w[black]
    if black == 0:
        return -w[white]
    return 0.0


@nb.njit(cache=True, inline="always")
def _window_stones(
    board: np.ndarray, sx: int, sy: int, dx: int, dy: int, size: int, n: int
) -> tuple[int, int]:
    """(Black's, White's) stones in the n cells from (sx, sy) along (dx, dy)."""
    black = 0
    white = 0
    for j in range(n):
        c = board[(sy + j * dy) * size + sx + j * dx]
        if c == 1:
            black += 1
        elif c == -1:
            white += 1
    return black, white


@nb.njit(cache=True)
def move_delta(board: np.ndarray, a: int, player: int, params: np.ndarray, w: np.ndarray) -> float:
    """How much `player`'s stone at the empty cell `a` changes the evaluation (Black's view)."""
    size, n = params[P_SIZE], params[P_N_IN_ROW]
    x, y = a % size, a // size
    delta = 0.0
    for d in range(4):
        dx, dy = _DX[d], _DY[d]
        for k in range(n):  # the windows through (x, y): they start k cells before it
            sx, sy = x - k * dx, y - k * dy
            ex, ey = sx + (n - 1) * dx, sy + (n - 1) * dy
            if not (0 <= sx < size and 0 <= sy < size and 0 <= ex < size and 0 <= ey < size):
                continue
            black, white = _window_stones(board, sx, sy, dx, dy, size, n)
            before = _window_worth(black, white, w)
            if player == 1:
                black += 1
            else:
                white += 1
            delta += _window_worth(black, white, w) - before
    return delta


@nb.njit(cache=True)
def evaluate(board: np.ndarray, params: np.ndarray, w: np.ndarray) -> float:
    """The pattern evaluation of a whole board, from Black's view."""
    size, n = params[P_SIZE], params[P_N_IN_ROW]
    total = 0.0
    for d in range(4):
        dx, dy = _DX[d], _DY[d]
        for sy in range(size):
            for sx in range(size):
                ex, ey = sx + (n - 1) * dx, sy + (n - 1) * dy
                if not (0 <= ex < size and 0 <= ey < size):
                    continue
                black, white = _window_stones(board, sx, sy, dx, dy, size, n)
                total += _window_worth(black, white, w)
    return total


@nb.njit(cache=True)
def candidates(board: np.ndarray, params: np.ndarray) -> np.ndarray:
    """The empty cells within two of a stone (the centre on an empty board)."""
    size = params[P_SIZE]
    near = np.zeros(board.size, dtype=np.bool_)
    stones = 0
    for a in range(board.size):
        if board[a] == 0:
            continue
        stones += 1
        x, y = a % size, a // size
        for v in range(max(y - 2, 0), min(y + 3, size)):
            for u in range(max(x - 2, 0), min(x + 3, size)):
                near[v * size + u] = True
    if stones == 0:
        out = np.empty(1, dtype=np.int64)
        out[0] = (size // 2) * size + size // 2
        return out
    count = 0
    for a in range(board.size):
        if near[a] and board[a] == 0:
            count += 1
    out = np.empty(count, dtype=np.int64)
    i = 0
    for a in range(board.size):
        if near[a] and board[a] == 0:
            out[i] = a
            i += 1
    return out


@nb.njit(cache=True)
def _ordered(
    board: np.ndarray,
    cells: np.ndarray,
    player: int,
    params: np.ndarray,
    w: np.ndarray,
    noise: np.ndarray,
    width: int,
) -> np.ndarray:
    """The `width` most urgent of `cells` for `player`, most urgent first."""
    urgency = np.empty(cells.size, dtype=np.float64)
    for i in range(cells.size):
        a = cells[i]
        attack = player * move_delta(board, a, player, params, w)
        defence = -player * move_delta(board, a, -player, params, w)
        urgency[i] = attack + DEFENCE * defence + noise[a]
    order = np.argsort(-urgency)
    keep = min(width, cells.size)
    out = np.empty(keep, dtype=np.int64)
    for i in range(keep):
        out[i] = cells[order[i]]
    return out


@nb.njit(cache=True)
def _forced(board: np.ndarray, cells: np.ndarray, player: int, params: np.ndarray) -> tuple[int, int]:
    """(a cell where `player` wins at once or -1, how many such cells: stopped only if one)."""
    first = -1
    count = 0
    for i in range(cells.size):
        if wins(board, cells[i], player, params):
            if first < 0:
                first = cells[i]
            count += 1
    return first, count


@nb.njit(cache=True)
def alphabeta_move(
    board: np.ndarray,
    player: int,
    depth: int,
    params: np.ndarray,
    w: np.ndarray,
    noise: np.ndarray,
    width: int,
) -> int:
    """`player`'s move by a `depth`-ply alpha-beta search (the board is left as it was).

    Negamax kept on explicit per-ply arrays rather than by recursion: numba's disk cache cannot
    hold a recursive function."""
    cells = candidates(board, params)
    win, _ = _forced(board, cells, player, params)
    if win >= 0:
        return win
    block, threats = _forced(board, cells, -player, params)
    if threats >= 1:  # one: the only move; two or more: lost, block one anyway
        return block
    plies = depth + 1
    moves = np.empty((plies, board.size), dtype=np.int64)
    n_moves = np.zeros(plies, dtype=np.int64)
    next_move = np.zeros(plies, dtype=np.int64)
    played = np.zeros(plies, dtype=np.int64)
    alpha = np.empty(plies, dtype=np.float64)
    beta = np.empty(plies, dtype=np.float64)
    best = np.empty(plies, dtype=np.float64)
    score = np.empty(plies, dtype=np.float64)  # each node's evaluation, Black's view
    empty = np.empty(plies, dtype=np.int64)
    empty[0] = 0
    for a in range(board.size):
        if board[a] == 0:
            empty[0] += 1
    score[0] = evaluate(board, params, w)
    root = _ordered(board, cells, player, params, w, noise, cells.size)
    n_moves[0] = root.size
    moves[0, : root.size] = root
    alpha[0], beta[0], best[0] = -2.0 * WIN, 2.0 * WIN, -2.0 * WIN
    best_move = root[0]
    ply = 0
    while True:
        to_move = player if ply % 2 == 0 else -player
        if next_move[ply] < n_moves[ply]:
            a = moves[ply, next_move[ply]]
            next_move[ply] += 1
            child = ply + 1
            score[child] = score[ply] + move_delta(board, a, to_move, params, w)
            empty[child] = empty[ply] - 1
            board[a] = to_move
            played[ply] = a
            # The child node, its player -to_move to move: a value at once, or its moves.
            opponent = -to_move
            leaf = True
            value = 0.0  # a full board: a draw
            if empty[child] > 0:
                child_cells = candidates(board, params)
                child_win, _ = _forced(board, child_cells, opponent, params)
                child_block, child_threats = _forced(board, child_cells, to_move, params)
                if child_win >= 0:
                    value = WIN - child
                elif child_threats >= 2:  # two wins to stop: lost, at any depth
                    value = -(WIN - child - 1)
                elif child == depth:
                    value = opponent * score[child]
                else:
                    leaf = False
                    if child_threats == 1:
                        n_moves[child] = 1
                        moves[child, 0] = child_block
                    else:
                        order = _ordered(board, child_cells, opponent, params, w, noise, width)
                        n_moves[child] = order.size
                        moves[child, : order.size] = order
                    next_move[child] = 0
                    alpha[child], beta[child], best[child] = -beta[ply], -alpha[ply], -2.0 * WIN
            if not leaf:
                ply = child
                continue
            board[a] = 0
            value = -value
        else:  # the node is searched: its value goes to its parent
            if ply == 0:
                break
            value = -best[ply]
            ply -= 1
            a = played[ply]
            board[a] = 0
        if value > best[ply]:
            best[ply] = value
            if ply == 0:
                best_move = a
        if value > alpha[ply]:
            alpha[ply] = value
        if alpha[ply] >= beta[ply]:
            next_move[ply] = n_moves[ply]  # a cut: the rest cannot change the parent's choice
    return best_move


class AlphaBeta:
    """`alphabeta<depth>`: a depth-ply alpha-beta search over a pattern evaluation."""

    def __init__(
        self, game: Gomoku, depth: int, *, seed: int, width: int = DEFAULT_WIDTH, name: str = ""
    ) -> None:
        if not 1 <= depth <= MAX_DEPTH:
            raise ValueError(f"opponent alphabeta{depth}: the depth is 1 to {MAX_DEPTH} plies")
        self.name = name or f"alphabeta{depth}"
        self.depth = depth
        self.width = width
        self.rng = np.random.default_rng(seed)
        self._weights = weights(game.n_in_row)

    def act(self, state: GameState) -> int:
        # Below one stone's worth: it only breaks ties.
        noise = self.rng.random(state.board.size) * 0.01
        board = np.ascontiguousarray(state.board, dtype=np.int8).copy()
        return int(
            alphabeta_move(
                board, state.to_play, self.depth, state.game.params, self._weights, noise, self.width
            )
        )


def engine_positions(
    game: Gomoku, games: int, *, black: int = 1, white: int = 1, seed: int = 0
) -> list[GameState]:
    """Every position of `games` games between `alphabeta<black>` and `alphabeta<white>` (seeded), each
    from one of the game's random 2-stone openings: positions where fours and threes come and go,
    for checking and timing what reads them."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(games):
        state = GameState.from_moves(game, game.random_opening(rng, 2))
        players = {
            1: AlphaBeta(game, black, seed=seed + g),
            -1: AlphaBeta(game, white, seed=seed + games + g),
        }
        while not state.done:
            out.append(state.copy())
            state.play(players[state.to_play].act(state))
    return out
