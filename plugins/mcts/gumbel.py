"""A Gumbel root: Gumbel-top-k sampling with sequential halving, and completed-Q policy targets
(Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022; mctx's
`gumbel_muzero_policy` is the reference).

At the root, simulation s goes to a move whose visits equal the schedule's `considered_visits[s]`:
the best of them by g(a) + logit(a) + σ(q̂(a)), g the root's Gumbel noise. The schedule gives the
first m simulations one to each of the m moves best by g + logit (Gumbel-top-k: a sample without
replacement from the policy), then halves the moves it considers, phase by phase, keeping the best.
Below the root a move is chosen deterministically: the one whose visit share lags most behind
the improved policy π' = softmax(logit + σ(q̂)).

q̂ is a move's completed Q: its mean value where visited, else the node's mixed value (its network
value mixed with its visited moves' values, weighted by their priors), rescaled to [0, 1] over the
node's moves; σ(q̂) = (c_visit + the most visits of a move) · c_scale · q̂. After the search the
root's π' is the policy target, and the move played is the best by g + logit + σ(q̂) among the
most visited.

Values are read as the tree stores them (tree.py): a child's mean value is from the view of the
player to move at its parent, a node's raw value from the view of the player who moved into it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from .tree import SearchParams, Tree

#: What q̂'s rescaling divides by at least (a node whose moves all have one value).
RESCALE_EPSILON = 1e-8
#: The log-prior of a move whose prior is 0.
LOG_FLOOR = -1e9


def considered_visits(considered: int, simulations: int) -> np.ndarray:
    """The sequential-halving schedule: entry s is the visit count the moves still considered
    have when simulation s chooses among them, for `considered` moves and `simulations` simulations.

    Each phase gives every considered move the same number of visits, about
    simulations / (log2(considered) · moves considered), then keeps the better half (at least two).
    """
    if considered <= 1:
        return np.arange(simulations, dtype=np.int32)
    phases = math.ceil(math.log2(considered))
    schedule: list[int] = []
    visits, moves = 0, considered
    while len(schedule) < simulations:
        for _ in range(max(1, simulations // (phases * moves))):
            schedule += [visits] * moves
            visits += 1
        moves = max(2, moves // 2)
    return np.array(schedule[:simulations], dtype=np.int32)


@nb.njit(cache=True, inline="always")
def _log_prior(tree: Tree, b: int, node: int, a: int) -> float:
    p = tree.prior[b, node, a]
    return math.log(p) if p > 0.0 else LOG_FLOOR


@nb.njit(cache=True)
def mixed_value(tree: Tree, b: int, node: int, board: np.ndarray) -> float:
    """The node's value from its player to move's view: its network value, mixed with the mean
    values of its visited moves weighted by their priors (what an unvisited move's Q completes to)."""
    raw = -tree.raw_value[b, node]
    visits, mass, weighted = 0, 0.0, 0.0
    for a in range(board.size):
        c = tree.children[b, node, a]
        if board[a] != 0 or c < 0 or tree.visits[b, c] == 0:
            continue
        p = max(tree.prior[b, node, a], 1e-30)
        visits += tree.visits[b, c]
        mass += p
        weighted += p * tree.value_sum[b, c] / tree.visits[b, c]
    if visits == 0:
        return raw
    return (raw + visits * weighted / mass) / (visits + 1)


@nb.njit(cache=True, inline="always")
def _completed_q(tree: Tree, b: int, node: int, a: int, mixed: float) -> float:
    c = tree.children[b, node, a]
    if c >= 0 and tree.visits[b, c] > 0:
        return tree.value_sum[b, c] / tree.visits[b, c]
    return mixed


@nb.njit(cache=True)
def _sigma_terms(
    tree: Tree, params: SearchParams, b: int, node: int, board: np.ndarray
) -> tuple[float, float, float]:
    """(mixed value, lowest completed Q, σ's factor per unit of Q above it) at a node."""
    mixed = mixed_value(tree, b, node, board)
    low, high, most = np.inf, -np.inf, 0
    for a in range(board.size):
        if board[a] != 0:
            continue
        q = _completed_q(tree, b, node, a, mixed)
        low, high = min(low, q), max(high, q)
        c = tree.children[b, node, a]
        if c >= 0:
            most = max(most, tree.visits[b, c])
    factor = (params.c_visit + most) * params.c_scale / max(high - low, RESCALE_EPSILON)
    return mixed, low, factor


@nb.njit(cache=True, inline="always")
def _load(tree: Tree, b: int, node: int, a: int) -> int:
    """A move's visits, its pending ones counted (they are on their way)."""
    c = tree.children[b, node, a]
    return tree.visits[b, c] + tree.pending_visits[b, c] if c >= 0 else 0


@nb.njit(cache=True)
def gumbel_root_action(tree: Tree, params: SearchParams, b: int, board: np.ndarray) -> int:
    """The root's move for the next simulation: among the moves with the schedule's visit count,
    the best by g + logit + σ(q̂) (no move has it: the least visited, best first)."""
    mixed, low, factor = _sigma_terms(tree, params, b, 0, board)
    s = 0
    for a in range(board.size):
        if board[a] == 0:
            s += _load(tree, b, 0, a)
    due = tree.considered_visits[b, min(s, tree.target[b] - 1)]
    best, best_score = -1, -np.inf
    spare, spare_load, spare_score = -1, 1 << 30, -np.inf
    for a in range(board.size):
        if board[a] != 0:
            continue
        score = (
            tree.gumbel[b, a]
            + _log_prior(tree, b, 0, a)
            + factor * (_completed_q(tree, b, 0, a, mixed) - low)
        )
        load = _load(tree, b, 0, a)
        if load == due and score > best_score:
            best, best_score = a, score
        if load < spare_load or (load == spare_load and score > spare_score):
            spare, spare_load, spare_score = a, load, score
    return best if best >= 0 else spare


@nb.njit(cache=True)
def gumbel_interior_action(tree: Tree, params: SearchParams, b: int, node: int, board: np.ndarray) -> int:
    """The move below the root: argmax π'(a) − N(a) / (1 + Σ N), π' = softmax(logit + σ(q̂))."""
    mixed, low, factor = _sigma_terms(tree, params, b, node, board)
    top, total = -np.inf, 0
    for a in range(board.size):
        if board[a] != 0:
            continue
        z = _log_prior(tree, b, node, a) + factor * (_completed_q(tree, b, node, a, mixed) - low)
        top = max(top, z)
        total += _load(tree, b, node, a)
    norm = 0.0
    for a in range(board.size):
        if board[a] == 0:
            norm += math.exp(
                _log_prior(tree, b, node, a) + factor * (_completed_q(tree, b, node, a, mixed) - low) - top
            )
    best, best_score = -1, -np.inf
    for a in range(board.size):
        if board[a] != 0:
            continue
        z = _log_prior(tree, b, node, a) + factor * (_completed_q(tree, b, node, a, mixed) - low)
        score = math.exp(z - top) / norm - _load(tree, b, node, a) / (1.0 + total)
        if score > best_score:
            best, best_score = a, score
    return best


@nb.njit(cache=True)
def gumbel_root_result(tree: Tree, params: SearchParams, b: int, policy: np.ndarray) -> int:
    """After the search: root b's improved policy π' written to `policy` (0 off the empty cells),
    and the move to play, the best by g + logit + σ(q̂) among the most visited."""
    board = tree.root_board[b]
    forced = tree.forced[b, 0]
    if forced >= 0:  # the root's only move: a forced win's first, or the block of the opponent's win
        policy[:] = 0.0
        policy[forced] = 1.0
        return forced
    mixed, low, factor = _sigma_terms(tree, params, b, 0, board)
    top, most = -np.inf, 0
    for a in range(board.size):
        policy[a] = 0.0
        if board[a] != 0:
            continue
        policy[a] = _log_prior(tree, b, 0, a) + factor * (_completed_q(tree, b, 0, a, mixed) - low)
        top = max(top, policy[a])
        c = tree.children[b, 0, a]
        if c >= 0:
            most = max(most, tree.visits[b, c])
    norm = 0.0
    best, best_score = -1, -np.inf
    for a in range(board.size):
        if board[a] != 0:
            continue
        score = tree.gumbel[b, a] + policy[a]
        c = tree.children[b, 0, a]
        if ((c >= 0 and tree.visits[b, c] == most) or most == 0) and score > best_score:
            best, best_score = a, score
        policy[a] = math.exp(policy[a] - top)
        norm += policy[a]
    for a in range(board.size):
        policy[a] /= norm
    return best
