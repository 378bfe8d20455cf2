"""The roots of a search, all at once: placed in their trees, encoded for the network, expanded with
its answers, given their Gumbel noise and schedules, and read back after the search.

A self-play step searches hundreds of roots for a few dozen simulations each: a Python loop over
the roots, each step a compiled call that passes the tree's ~20 arrays (microseconds apiece), costs
as much as the tree itself there. Each kernel here takes every root of the call at once.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import gumbel
from .game_calls import GameKernels, call_encode
from .steps import expand_root, mark_forced_root
from .threads import Twins
from .tree import SearchParams, Tree, reset_tree


@nb.njit(cache=True, nogil=True)
def place_roots(
    tree: Tree,
    slots: np.ndarray,
    fresh: np.ndarray,
    boards: np.ndarray,
    players: np.ndarray,
    n_moves: np.ndarray,
    lasts: np.ndarray,
) -> None:
    """Root j goes to tree slots[j] (a new tree there where fresh[j], else its kept subtree): its
    board, player to move, moves played and last move."""
    for j in range(slots.size):
        b = slots[j]
        if fresh[j]:
            reset_tree(tree, b)
        tree.root_board[b] = boards[j]
        tree.root_player[b] = players[j]
        tree.root_moves[b] = n_moves[j]
        tree.root_last[b] = lasts[j]
        tree.noised[b] = False


@nb.njit(cache=True, nogil=True)
def encode_roots(tree: Tree, game: GameKernels, slots: np.ndarray, planes: np.ndarray) -> None:
    """The network's planes of the roots of trees `slots`, into planes[j]."""
    for j in range(slots.size):
        b = slots[j]
        board = tree.root_board[b]
        call_encode(game.encode, board, tree.root_player[b], tree.root_last[b], game.params, planes[j])


def _expand_roots(
    tree: Tree,
    params: SearchParams,
    game: GameKernels,
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    draws: np.ndarray,
    chunks: int,
) -> None:
    """Expand the roots of trees `slots` with the network's answers (values from their player to
    move's view, less its contempt for the draw), and mark each one's only move where it has one."""
    n = slots.size
    for c in nb.prange(chunks):
        for j in range(n * c // chunks, n * (c + 1) // chunks):
            b = slots[j]
            expand_root(tree, b, logits[j], values[j] - params.draw_contempt * draws[j])
            mark_forced_root(tree, params, game, b)


def _gumbel_results(
    tree: Tree, params: SearchParams, slots: np.ndarray, policies: np.ndarray, chosen: np.ndarray, chunks: int
) -> None:
    """After a Gumbel search: root j's improved policy into policies[j], its move to play into chosen[j]."""
    n = slots.size
    for c in nb.prange(chunks):
        for j in range(n * c // chunks, n * (c + 1) // chunks):
            chosen[j] = gumbel.gumbel_root_result(tree, params, slots[j], policies[j])


#: Each root's expansion checks its threats (forced blocks, wins) and a Gumbel root's result weighs
#: every move: microseconds a root, on the run's threads.
expand_roots = Twins(_expand_roots, "expand_roots")
gumbel_results = Twins(_gumbel_results, "gumbel_results")


class GumbelSchedules:
    """Sequential halving's schedules, one per (moves considered, simulations): made once each."""

    def __init__(self, considered: int) -> None:
        self.considered = considered
        self._made: dict[tuple[int, int], np.ndarray] = {}

    def draw(self, tree: Tree, slots: np.ndarray, noised: np.ndarray, rng: np.random.Generator) -> None:
        """Each root's Gumbel noise on its empty cells (0 where it has none) and its schedule."""
        legal = tree.root_board[slots] == 0
        noise = np.zeros(legal.shape, dtype=np.float32)
        if noised.any():
            noise[noised] = rng.gumbel(size=(int(noised.sum()), legal.shape[1]))
        noise[~legal] = 0.0
        tree.gumbel[slots] = noise
        counts = np.minimum(legal.sum(axis=1), self.considered)
        for b, m, target in zip(slots.tolist(), counts.tolist(), tree.target[slots].tolist(), strict=True):
            schedule = self._made.get((m, target))
            if schedule is None:
                schedule = self._made[(m, target)] = gumbel.considered_visits(m, target)
            tree.considered_visits[b, :target] = schedule
