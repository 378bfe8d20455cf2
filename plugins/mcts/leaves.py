"""Leaves waiting for their evaluation, and the kernels of a search's turn: select leaves (PUCT,
pending visits under virtual loss), finish the evaluated ones (expand, back up, free their slot).

A waiting leaf lives in a slot of `Leaves`: its tree, position, path and depth. Its path carries
one pending (virtual) visit per node until its evaluation comes back or is given up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numba as nb
import numpy as np

from .game_calls import GameKernels, call_encode
from .steps import backup, expand, select_leaf
from .tree import UNEXPANDED, SearchParams, Tree, draw_value

if TYPE_CHECKING:
    from framework_plugins.boardgames import BoardGame


class Leaves(NamedTuple):
    """Room for L leaves waiting for their evaluation, each in a slot: its tree, position, path."""

    tree_index: np.ndarray
    """[L] int64: the slot's tree."""
    board: np.ndarray
    """[L, A] int8: the leaf's position."""
    path: np.ndarray
    """[L, A + 2] int64: the nodes from the root to the leaf."""
    depth: np.ndarray
    """[L] int64: the leaf's depth (path[depth] is the leaf)."""
    planes: np.ndarray
    """[L, planes...] float32: the planes of the leaves taken by the last selection, in order."""
    taken: np.ndarray
    """[L] int64: the slots of the leaves taken by the last selection, in order."""
    free: np.ndarray
    """[L] int64: free slots (the first n_free[0]); in a walk (walk.py: slot b is tree b's), the
    slots of the leaves a turn took, in tree order."""
    n_free: np.ndarray
    """[1] int64."""
    blocked: np.ndarray
    """[B] bool: trees stopped for this selection by a collision; in a walk, trees that took a leaf."""

    @property
    def capacity(self) -> int:
        return int(self.tree_index.shape[0])


def at_least(leaves: Leaves | None, n: int, n_trees: int, game: BoardGame) -> Leaves:
    """`leaves` if they hold `n` leaves of `n_trees` trees, else new ones that do."""
    if leaves is None or leaves.capacity < n or leaves.blocked.size < n_trees:
        shape = (game.n_planes, *game.board_shape)
        leaves = new_leaves(max(n, 1), max(n_trees, 1), game.n_actions, shape)
    return leaves


def new_leaves(capacity: int, n_trees: int, n_actions: int, plane_shape: tuple[int, ...]) -> Leaves:
    return Leaves(
        tree_index=np.zeros(capacity, dtype=np.int64),
        board=np.zeros((capacity, n_actions), dtype=np.int8),
        path=np.zeros((capacity, n_actions + 2), dtype=np.int64),
        depth=np.zeros(capacity, dtype=np.int64),
        planes=np.zeros((capacity, *plane_shape), dtype=np.float32),
        taken=np.zeros(capacity, dtype=np.int64),
        free=np.arange(capacity, dtype=np.int64),
        n_free=np.array([capacity], dtype=np.int64),
        blocked=np.zeros(n_trees, dtype=np.bool_),
    )


def free_all(leaves: Leaves) -> None:
    leaves.free[:] = np.arange(leaves.capacity)
    leaves.n_free[0] = leaves.capacity


@nb.njit(cache=True)
def select_leaves(
    tree: Tree,
    params: SearchParams,
    game: GameKernels,
    leaves: Leaves,
    active: np.ndarray,
    budget: int,
) -> tuple[int, int, int]:
    """Leaves to evaluate, one per active tree in turn, until `budget` are taken or no tree can give one.

    A tree gives leaves while its root's visits (less its expansion) plus its pending visits are
    below its `tree.target`, and it has fewer than `params.leaves_per_tree` waiting. A leaf whose value is
    known is backed up at once; a leaf that is already waiting (a collision) stops its tree for
    this call. A taken leaf gets a free slot, a pending visit on every node of its path, and its
    planes in `leaves.planes[k]` (`leaves.taken[k]` its slot). Returns (k, simulations backed up
    here, trees not yet at target).
    """
    k, backed = 0, 0
    leaves.blocked[:] = False
    progress = True
    while progress and k < budget and leaves.n_free[0] > 0:
        progress = False
        for b in range(active.size):
            if k >= budget or leaves.n_free[0] == 0:
                break
            waiting = tree.pending_visits[b, 0]
            if not active[b] or leaves.blocked[b] or waiting >= params.leaves_per_tree:
                continue
            if tree.visits[b, 0] - 1 + waiting >= tree.target[b]:
                continue
            slot = leaves.free[leaves.n_free[0] - 1]
            depth, player, last, value = select_leaf(
                tree, params, game, b, leaves.board[slot], leaves.path[slot]
            )
            if not np.isnan(value):
                backup(tree, b, leaves.path[slot], depth, value)
                backed += 1
                progress = True
                continue
            leaf = leaves.path[slot, depth]
            if tree.pending_visits[b, leaf] > 0:
                leaves.blocked[b] = True
                continue
            leaves.n_free[0] -= 1
            for d in range(depth + 1):
                tree.pending_visits[b, leaves.path[slot, d]] += 1
            leaves.tree_index[slot] = b
            leaves.depth[slot] = depth
            call_encode(game.encode, leaves.board[slot], player, last, game.params, leaves.planes[k])
            leaves.taken[k] = slot
            k += 1
            progress = True
    unfinished = 0
    for b in range(active.size):
        if active[b] and tree.visits[b, 0] - 1 < tree.target[b]:
            unfinished += 1
    return k, backed, unfinished


@nb.njit(cache=True)
def release_leaves(tree: Tree, leaves: Leaves, slots: np.ndarray) -> int:
    """Take the leaves' pending visits off their paths (never below 0); returns how many were
    already 0 (a bookkeeping error: 0 when all is well)."""
    clamped = 0
    for i in range(slots.size):
        s = slots[i]
        b = leaves.tree_index[s]
        for d in range(leaves.depth[s] + 1):
            node = leaves.path[s, d]
            if tree.pending_visits[b, node] > 0:
                tree.pending_visits[b, node] -= 1
            else:
                clamped += 1
    return clamped


@nb.njit(cache=True)
def finish_leaves(
    tree: Tree,
    params: SearchParams,
    leaves: Leaves,
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    draws: np.ndarray,
) -> int:
    """Evaluated leaves: pending visits off their paths, the leaf expanded (illegal moves masked),
    its value backed up (less its draw probability's contempt, `draws`: zeros from a network
    without one). Returns release_leaves' count of pending visits already at 0."""
    clamped = release_leaves(tree, leaves, slots)
    for i in range(slots.size):
        s = slots[i]
        b, depth = leaves.tree_index[s], leaves.depth[s]
        leaf = leaves.path[s, depth]
        # The value from the view of whoever moved into the leaf: a draw counts draw_value.
        value = draws[i] * draw_value(params, depth) - values[i]
        if tree.state[b, leaf] == UNEXPANDED:
            expand(tree, b, leaf, leaves.board[s], logits[i])
            tree.raw_value[b, leaf] = value
        backup(tree, b, leaves.path[s], depth, value)
    return clamped


@nb.njit(cache=True)
def finish_and_select(
    tree: Tree,
    params: SearchParams,
    game: GameKernels,
    leaves: Leaves,
    active: np.ndarray,
    budget: int,
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    draws: np.ndarray,
) -> tuple[int, int, int, int]:
    """One turn of a search's loop in one call: the evaluated leaves in `slots` finished and their
    slots freed, then `select_leaves`. Returns (k, simulations backed up, trees not yet at target,
    pending visits that were already 0 when taken back)."""
    clamped = finish_leaves(tree, params, leaves, slots, logits, values, draws)
    n = leaves.n_free[0]
    for i in range(slots.size):
        leaves.free[n + i] = slots[i]
    leaves.n_free[0] = n + slots.size
    k, backed, unfinished = select_leaves(tree, params, game, leaves, active, budget)
    return k, backed + slots.size, unfinished, clamped
