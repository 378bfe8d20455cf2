"""Fixed Gomoku opponents: random, a heuristic that wins, blocks and extends, pure MCTS, and an
alpha-beta search over a pattern evaluation (`alphabeta.py`).

Pure MCTS is the yardstick of the Gomoku AlphaZero literature (junxiaosong/AlphaZero_Gomoku):
UCT with a uniform prior (c_puct 5), every legal move expanded at a leaf, a random rollout to the
end of the game as the leaf's value, the most-visited move played, no tree kept between moves.
Each opponent draws its randomness from its own seeded generator, so a match repeats by seed.
"""

from __future__ import annotations

import re
from typing import Protocol

import numba as nb
import numpy as np

from .kernels import DRAW, ONGOING, WIN, apply_move, line_lengths, wins
from .rules import GameState, Gomoku

#: `mcts` plays with this many rollouts per move unless the name says: mcts1000, mcts5000.
DEFAULT_ROLLOUTS = 1000
#: `alphabeta` searches this many plies unless the name says: alphabeta1, alphabeta4.
DEFAULT_DEPTH = 2
PURE_MCTS_C_PUCT = 5.0


class Opponent(Protocol):
    name: str

    def act(self, state: GameState) -> int: ...


def make_opponent(name: str, game: Gomoku, seed: int) -> Opponent:
    """`random`, `heuristic`, `mcts` (1,000 rollouts a move), `mcts<N>` (N rollouts), `alphabeta`
    (two plies) or `alphabeta<D>` (D plies)."""
    match = re.fullmatch(r"alphabeta(\d*)", name)
    if match:
        from .alphabeta import AlphaBeta

        return AlphaBeta(game, int(match.group(1) or DEFAULT_DEPTH), seed=seed, name=name)
    match = re.fullmatch(r"mcts(\d*)", name)
    if match:
        rollouts = int(match.group(1)) if match.group(1) else DEFAULT_ROLLOUTS
        if rollouts < 1:
            raise ValueError(f"opponent {name!r}: pure MCTS needs at least 1 rollout per move")
        return PureMCTS(game, rollouts, seed=seed, name=name)
    if name == "random":
        return RandomOpponent(game, seed=seed)
    if name == "heuristic":
        return HeuristicOpponent(game, seed=seed)
    raise ValueError(
        f"Unknown Gomoku opponent {name!r}; choose random, heuristic, mcts (1,000 rollouts a move), "
        "mcts<N> (N rollouts a move, e.g. mcts5000), alphabeta (2 plies) or alphabeta<D> (D plies, 1 to 6)"
    )


class RandomOpponent:
    """A uniformly random legal move."""

    def __init__(self, game: Gomoku, *, seed: int) -> None:
        self.name = "random"
        self.rng = np.random.default_rng(seed)

    def act(self, state: GameState) -> int:
        return int(self.rng.choice(np.flatnonzero(state.legal)))


class HeuristicOpponent:
    """Wins when it can, blocks the opponent's win, else extends its own lines (and cuts the other's)."""

    def __init__(self, game: Gomoku, *, seed: int) -> None:
        self.name = "heuristic"
        self.rng = np.random.default_rng(seed)

    def act(self, state: GameState) -> int:
        noise = self.rng.random(state.board.size)
        return int(heuristic_move(state.board, state.to_play, state.game.params, noise))


class PureMCTS:
    """UCT with random rollouts: `rollouts` playouts per move."""

    def __init__(self, game: Gomoku, rollouts: int, *, seed: int, name: str = "") -> None:
        self.name = name or f"mcts{rollouts}"
        self.rollouts = rollouts
        self.rng = np.random.default_rng(seed)
        size = rollouts + 1
        self._child = np.empty((size, game.n_actions), dtype=np.int32)
        self._visits = np.empty((size, game.n_actions), dtype=np.int32)
        self._value = np.empty((size, game.n_actions), dtype=np.float64)

    def act(self, state: GameState) -> int:
        seed = int(self.rng.integers(2**31))
        return int(
            pure_mcts_move(
                state.board,
                state.to_play,
                len(state.moves),
                state.game.params,
                self.rollouts,
                PURE_MCTS_C_PUCT,
                seed,
                self._child,
                self._visits,
                self._value,
            )
        )


@nb.njit(cache=True)
def heuristic_move(board: np.ndarray, player: int, params: np.ndarray, noise: np.ndarray) -> int:
    size = params[0]
    n = board.size
    # 1. Win now. 2. Stop the opponent's win.
    for who in (player, -player):
        for a in range(n):
            if board[a] == 0 and wins(board, a, who, params):
                return a
    # 3. Extend: long lines of our own, and cells the opponent would like, near the stones.
    best, best_score = -1, -1.0
    empty = True
    for a in range(n):
        if board[a] != 0:
            empty = False
    if empty:
        return (size // 2) * size + size // 2
    for a in range(n):
        if board[a] != 0 or not _near_stone(board, a, size):
            continue
        score = noise[a]
        for length in line_lengths(board, a, player, size):
            score += 4.0 ** min(length, 6)
        for length in line_lengths(board, a, -player, size):
            score += 0.8 * 4.0 ** min(length, 6)
        if score > best_score:
            best, best_score = a, score
    return best


@nb.njit(cache=True)
def _near_stone(board: np.ndarray, a: int, size: int) -> bool:
    x, y = a % size, a // size
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            u, v = x + dx, y + dy
            if 0 <= u < size and 0 <= v < size and board[v * size + u] != 0:
                return True
    return False


@nb.njit(cache=True)
def rollout(board: np.ndarray, player: int, n_moves: int, params: np.ndarray) -> int:
    """Random moves to the end of the game from `board` (`player` to move): the winner, 0 for a draw."""
    n = board.size
    empty = np.empty(n, dtype=np.int64)
    k = 0
    for a in range(n):
        if board[a] == 0:
            empty[k] = a
            k += 1
    while k > 0:
        i = np.random.randint(k)
        a = empty[i]
        k -= 1
        empty[i] = empty[k]
        outcome = apply_move(board, a, player, n_moves, params)
        n_moves += 1
        if outcome == WIN:
            return player
        if outcome == DRAW:
            return 0
        player = -player
    return 0


@nb.njit(cache=True)
def pure_mcts_move(
    root_board: np.ndarray,
    root_player: int,
    root_moves: int,
    params: np.ndarray,
    rollouts: int,
    c_puct: float,
    seed: int,
    child: np.ndarray,
    visits: np.ndarray,
    value: np.ndarray,
) -> int:
    """One move of pure MCTS. Edge statistics (visits, value from the mover's view) live per node row."""
    np.random.seed(seed)
    n = root_board.size
    n_nodes = 1
    node_visits = np.zeros(child.shape[0], dtype=np.int64)
    expanded = np.zeros(child.shape[0], dtype=np.bool_)
    n_legal = np.zeros(child.shape[0], dtype=np.int64)
    path = np.empty(n + 1, dtype=np.int64)
    path_action = np.empty(n + 1, dtype=np.int64)
    board = np.empty_like(root_board)
    for _ in range(rollouts):
        board[:] = root_board
        player, moves, node, depth, outcome = root_player, root_moves, 0, 0, ONGOING
        while expanded[node]:
            # UCT over the legal edges; prior 1/n_legal as in the reference.
            best, best_score = -1, -np.inf
            sqrt_n = np.sqrt(node_visits[node])
            prior = 1.0 / n_legal[node]
            for a in range(n):
                if board[a] != 0:
                    continue
                q = value[node, a] / visits[node, a] if visits[node, a] > 0 else 0.0
                score = q + c_puct * prior * sqrt_n / (1 + visits[node, a])
                if score > best_score:
                    best, best_score = a, score
            path[depth], path_action[depth] = node, best
            depth += 1
            outcome = apply_move(board, best, player, moves, params)
            moves += 1
            player = -player
            if child[node, best] < 0:
                child[node, best] = n_nodes
                n_nodes += 1
            node = child[node, best]
            if outcome != ONGOING:
                break
        if outcome == ONGOING and not expanded[node] and n_nodes < child.shape[0]:
            expanded[node] = True
            k = 0
            for a in range(n):
                child[node, a] = -1
                visits[node, a] = 0
                value[node, a] = 0.0
                if board[a] == 0:
                    k += 1
            n_legal[node] = k
        if outcome == WIN:
            winner = -player  # the side that just moved
        elif outcome == DRAW:
            winner = 0
        else:
            winner = rollout(board, player, moves, params)
        node_visits[node] += 1
        for i in range(depth):
            parent, a = path[i], path_action[i]
            node_visits[parent] += 1
            visits[parent, a] += 1
            # The edge's value is from the view of the side that played it (to move at `parent`).
            mover = root_player if i % 2 == 0 else -root_player
            if winner == mover:
                value[parent, a] += 1.0
            elif winner == -mover:
                value[parent, a] -= 1.0
    best, most = -1, -1
    for a in range(n):
        if root_board[a] == 0 and expanded[0] and visits[0, a] > most:
            best, most = a, visits[0, a]
    return best
