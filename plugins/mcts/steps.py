"""One simulation's steps over a `Tree`: pick a move (PUCT, or Gumbel's at a Gumbel search), walk
down to a leaf, expand it, back its value up; a root's noise and its forced moves.

Small numba kernels of the tree, the search's `SearchParams` and the game's kernels (`GameKernels`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .game_calls import GameKernels, call_apply_move, call_forced_win, call_winning_move
from .gumbel import gumbel_interior_action, gumbel_root_action
from .tree import EXPANDED, ONGOING, TERMINAL, UNEXPANDED, WIN, SearchParams, Tree, draw_value

#: forced_block's answer for a position whose player to move cannot stop the opponent's win.
LOST = -2


@nb.njit(cache=True)
def puct_action(tree: Tree, params: SearchParams, b: int, node: int, board: np.ndarray) -> int:
    """The move PUCT picks at an expanded node (pending visits counted, under virtual loss)."""
    n_actions = board.size
    sqrt_n = np.sqrt(max(tree.visits[b, node] + tree.pending_visits[b, node], 1))
    fpu = params.fpu_value
    if params.fpu_from_parent and tree.visits[b, node] > 0:
        # KataGo's first-play urgency: the parent's value, less a reduction that grows with the
        # policy mass of the moves already visited (a node that has found its moves looks less
        # at the others).
        visited = 0.0
        for a in range(n_actions):
            c = tree.children[b, node, a]
            if c >= 0 and tree.visits[b, c] + tree.pending_visits[b, c] > 0:
                visited += tree.prior[b, node, a]
        parent = -tree.value_sum[b, node] / tree.visits[b, node]
        fpu = parent - params.fpu_reduction * np.sqrt(visited)
    best, best_score = -1, -np.inf
    for a in range(n_actions):
        if board[a] != 0:
            continue
        c = tree.children[b, node, a]
        n, q = 0, fpu
        if c >= 0:
            n = tree.visits[b, c] + tree.pending_visits[b, c]
            if n > 0:
                q = (tree.value_sum[b, c] - params.virtual_loss * tree.pending_visits[b, c]) / n
        score = q + params.c_puct * tree.prior[b, node, a] * sqrt_n / (1 + n)
        if score > best_score:
            best, best_score = a, score
    return best


@nb.njit(cache=True)
def select_leaf(
    tree: Tree, params: SearchParams, game: GameKernels, b: int, board: np.ndarray, path: np.ndarray
) -> tuple[int, int, int, float]:
    """Descend tree b by PUCT from its root to a leaf, creating the leaf if new.

    Leaves `board` as the leaf's position and `path[:depth+1]` as the nodes from the root.
    Returns (depth, player to move at the leaf, last move, value): value is the leaf's value from
    its mover's view when it is known without a network (terminal, or the player to move wins at
    once), else NaN.
    """
    board[:] = tree.root_board[b]
    player, moves, last = int(tree.root_player[b]), int(tree.root_moves[b]), int(tree.root_last[b])
    node, depth = 0, 0
    path[0] = 0
    while tree.state[b, node] == EXPANDED:
        if tree.forced[b, node] >= 0:
            best = tree.forced[b, node]
        elif not params.gumbel:
            best = puct_action(tree, params, b, node, board)
        elif node == 0:
            best = gumbel_root_action(tree, params, b, board)
        else:
            best = gumbel_interior_action(tree, params, b, node, board)
        child = tree.children[b, node, best]
        if child < 0:
            child = tree.n_nodes[b]
            if child >= tree.visits.shape[1]:
                raise RuntimeError("search tree is full")
            tree.n_nodes[b] += 1
            tree.parent[b, child] = node
            tree.action[b, child] = best
            tree.visits[b, child] = 0
            tree.pending_visits[b, child] = 0
            tree.state[b, child] = UNEXPANDED
            tree.value_sum[b, child] = 0.0
            tree.forced[b, child] = -1
            tree.children[b, node, best] = child
        outcome = call_apply_move(game.apply_move, board, best, player, moves, game.params)
        moves += 1
        last = best
        player = -player
        node = child
        depth += 1
        path[depth] = node
        if outcome != ONGOING and tree.state[b, node] == UNEXPANDED:
            tree.state[b, node] = TERMINAL
            tree.terminal_value[b, node] = 1.0 if outcome == WIN else draw_value(params, depth)
            tree.raw_value[b, node] = tree.terminal_value[b, node]
    if tree.state[b, node] == TERMINAL:
        return depth, player, last, tree.terminal_value[b, node]
    if params.detect_wins and call_winning_move(game.winning_move, board, player, game.params) >= 0:
        # The player to move wins next move whatever: a lost position for whoever moved here.
        tree.state[b, node] = TERMINAL
        tree.terminal_value[b, node] = -1.0
        tree.raw_value[b, node] = -1.0
        return depth, player, last, -1.0
    if params.forced_wins and call_forced_win(game.forced_win, board, player, game.params) >= 0:
        # A win by force for the player to move (Gomoku: continuous fours): lost for whoever moved here.
        tree.state[b, node] = TERMINAL
        tree.terminal_value[b, node] = -1.0
        tree.raw_value[b, node] = -1.0
        return depth, player, last, -1.0
    if params.detect_wins and params.forced_blocks:
        threat = forced_block(game, board, player)
        if threat == LOST:
            # The opponent has two wins to stop: won for whoever moved here.
            tree.state[b, node] = TERMINAL
            tree.terminal_value[b, node] = 1.0
            tree.raw_value[b, node] = 1.0
            return depth, player, last, 1.0
        tree.forced[b, node] = threat
    return depth, player, last, np.nan


@nb.njit(cache=True)
def forced_block(game: GameKernels, board: np.ndarray, player: int) -> int:
    """The cell `player` (to move, with no win of its own) must play to stop the opponent's win
    next move; -1 when there is none, LOST when one block cannot stop it."""
    threat = call_winning_move(game.winning_move, board, -player, game.params)
    if threat < 0:
        return -1
    board[threat] = player
    other = call_winning_move(game.winning_move, board, -player, game.params)
    board[threat] = 0
    return LOST if other >= 0 else threat


@nb.njit(cache=True)
def mark_forced_root(tree: Tree, params: SearchParams, game: GameKernels, b: int) -> None:
    """Root b's only move where it has one: the first move of its win by force (`forced_wins`),
    else its forced block, as select_leaf finds a leaf's (a root is expanded outside it)."""
    tree.forced[b, 0] = -1
    blocks = params.detect_wins and params.forced_blocks
    if not (params.forced_wins or blocks):
        return
    board = tree.root_board[b].copy()
    player = int(tree.root_player[b])
    if params.forced_wins:
        win = call_forced_win(game.forced_win, board, player, game.params)
        if win >= 0:
            tree.forced[b, 0] = win
            return
    if not blocks:
        return
    if call_winning_move(game.winning_move, board, player, game.params) >= 0:
        return  # it wins at once rather than blocks
    threat = forced_block(game, board, player)
    if threat >= 0:
        tree.forced[b, 0] = threat


@nb.njit(cache=True)
def backup(tree: Tree, b: int, path: np.ndarray, depth: int, value: float) -> None:
    """Add a leaf's value (from its mover's view) along the path, flipping sides at each level."""
    for d in range(depth, -1, -1):
        node = path[d]
        tree.visits[b, node] += 1
        tree.value_sum[b, node] += value
        value = -value


@nb.njit(cache=True)
def expand(tree: Tree, b: int, node: int, board: np.ndarray, logits: np.ndarray) -> None:
    """Expand a leaf: priors are the softmax of `logits` over its empty cells."""
    top = -np.inf
    for a in range(board.size):
        if board[a] == 0 and logits[a] > top:
            top = logits[a]
    total = 0.0
    for a in range(board.size):
        tree.children[b, node, a] = -1
        if board[a] == 0:
            p = np.exp(logits[a] - top)
            tree.prior[b, node, a] = p
            total += p
        else:
            tree.prior[b, node, a] = 0.0
    for a in range(board.size):
        tree.prior[b, node, a] /= total
    tree.state[b, node] = EXPANDED


@nb.njit(cache=True)
def expand_root(tree: Tree, b: int, logits: np.ndarray, value: float) -> None:
    """Expand root b with the network's answer for it (`value` from its player to move's view)."""
    expand(tree, b, 0, tree.root_board[b], logits)
    tree.visits[b, 0] += 1
    tree.value_sum[b, 0] -= value
    tree.raw_value[b, 0] = -value


@nb.njit(cache=True)
def add_noise(tree: Tree, b: int, noise: np.ndarray, eps: float) -> None:
    """Mix Dirichlet noise (one sample per empty cell, in cell order) into root b's priors."""
    j = 0
    board = tree.root_board[b]
    for a in range(board.size):
        if board[a] == 0:
            tree.prior[b, 0, a] = (1.0 - eps) * tree.prior[b, 0, a] + eps * noise[j]
            j += 1
