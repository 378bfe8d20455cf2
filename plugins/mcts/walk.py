"""A turn of a search whose trees have at most one leaf waiting each, over a range of trees, on
the run's CPU threads: finish the answered leaves, select the next, encode them.

With one leaf per tree (an in-process evaluation: no virtual loss), what a tree does in a turn
depends on nothing but its own arrays, so the trees of a range are walked in parallel (numba's
`prange`, on `numba.set_num_threads` threads of the calling thread) and each tree's leaf lives in
the `Leaves` slot of its own index: no shared free list. The leaves taken are encoded into
consecutive rows from the range's first index, in tree order, whatever the number of threads: the
same roots, seed and answers give the same visits on 1 thread or 16.

A tree selects until it takes a leaf for the network or reaches its target: a leaf whose value is
known (terminal, won at once) is backed up on the spot and the tree selects again, as
`leaves.select_leaves` does.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .game_calls import GameKernels, call_encode
from .leaves import Leaves
from .steps import backup, expand, select_leaf
from .threads import Twins
from .tree import UNEXPANDED, SearchParams, Tree, draw_value


@nb.njit(cache=True, nogil=True)
def finish_leaves(
    tree: Tree,
    params: SearchParams,
    leaves: Leaves,
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    draws: np.ndarray,
    first: int,
    end: int,
) -> int:
    """Answers first..end-1: each leaf's pending visits taken off (never below 0), the leaf expanded,
    its value backed up. Returns how many pending visits were already 0 (a bookkeeping error: 0)."""
    clamped = 0
    for i in range(first, end):
        s = slots[i]
        b, depth = leaves.tree_index[s], leaves.depth[s]
        for d in range(depth + 1):
            node = leaves.path[s, d]
            if tree.pending_visits[b, node] > 0:
                tree.pending_visits[b, node] -= 1
            else:
                clamped += 1
        leaf = leaves.path[s, depth]
        # From the view of whoever moved into the leaf: a draw counts draw_value.
        mover = draws[i] * draw_value(params, depth) - values[i]
        if tree.state[b, leaf] == UNEXPANDED:
            expand(tree, b, leaf, leaves.board[s], logits[i])
            tree.raw_value[b, leaf] = mover
        backup(tree, b, leaves.path[s], depth, mover)
    return clamped


@nb.njit(cache=True, nogil=True)
def select_trees(
    tree: Tree,
    params: SearchParams,
    game: GameKernels,
    leaves: Leaves,
    active: np.ndarray,
    first: int,
    end: int,
) -> int:
    """Each active tree b of first..end-1 selects until it takes a leaf for the network (into slot
    b, a pending visit on its path; leaves.blocked[b] set) or reaches its target. Returns the leaves
    backed up on the spot."""
    backed = 0
    for b in range(first, end):
        leaves.blocked[b] = False
        if not active[b]:
            continue
        while tree.visits[b, 0] - 1 + tree.pending_visits[b, 0] < tree.target[b]:
            depth, _, _, value = select_leaf(tree, params, game, b, leaves.board[b], leaves.path[b])
            if not np.isnan(value):
                backup(tree, b, leaves.path[b], depth, value)
                backed += 1
                continue
            for d in range(depth + 1):
                tree.pending_visits[b, leaves.path[b, d]] += 1
            leaves.tree_index[b] = b
            leaves.depth[b] = depth
            leaves.blocked[b] = True
            break
    return backed


@nb.njit(cache=True, nogil=True)
def encode_leaves(tree: Tree, game: GameKernels, leaves: Leaves, base: int, first: int, end: int) -> None:
    """The planes of the leaves in slots leaves.free[first..end-1], into leaves.planes[base + r]; a
    leaf's player to move and last move are its depth's and its node's."""
    for r in range(first, end):
        s = leaves.free[r]
        b, depth = leaves.tree_index[s], leaves.depth[s]
        player = tree.root_player[b] if depth % 2 == 0 else -tree.root_player[b]
        last = tree.action[b, leaves.path[s, depth]]
        call_encode(game.encode, leaves.board[s], player, last, game.params, leaves.planes[base + r])
        leaves.taken[base + r] = s


def _turn(
    tree: Tree,
    params: SearchParams,
    game: GameKernels,
    leaves: Leaves,
    active: np.ndarray,
    lo: int,
    hi: int,
    select: bool,
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    draws: np.ndarray,
    chunks: int,
) -> tuple[int, int, int, int]:
    """One turn for trees [lo, hi): the answered leaves in `slots` finished (all of them trees of the
    range), then (with `select`) a leaf taken from each active tree below its target, encoded into
    `leaves.planes[lo:lo+k]` (their slots in `leaves.taken[lo:lo+k]`, in tree order). The work goes
    in `chunks` contiguous parts to numba's threads, in two parallel regions (a launch costs
    microseconds; a call a part, not a tree: a call passes the ~30 arrays of the tree and the
    leaves), and allocates nothing (a search of one root turns once a simulation).
    Returns (k, simulations backed up, trees of the range not yet at target, pending visits already
    0 when taken back)."""
    n, m = hi - lo, slots.size
    # A part finishes the answers of its own trees (slot b is tree b's): a contiguous run of the
    # answers, which come in tree order; answers in another order are finished first, on this thread.
    ordered = True
    for i in range(1, m):
        if slots[i] < slots[i - 1]:
            ordered = False
    clamped = 0 if ordered else finish_leaves(tree, params, leaves, slots, logits, values, draws, 0, m)
    backed = 0
    for c in nb.prange(chunks):
        first, end = lo + n * c // chunks, lo + n * (c + 1) // chunks
        if ordered:
            a = 0 if c == 0 else int(np.searchsorted(slots, first))
            z = m if c == chunks - 1 else int(np.searchsorted(slots, end))
            clamped += finish_leaves(tree, params, leaves, slots, logits, values, draws, a, z)
        if select:
            backed += select_trees(tree, params, game, leaves, active, first, end)
    if not select:
        # Outside the parallel loop: numba's parallel lowering loses a write to a tuple's array
        # made in the loop's own body (a function called there writes through).
        for b in range(lo, hi):
            leaves.blocked[b] = False
    # The slots of the leaves taken, in tree order (a prefix sum), then their planes.
    k = 0
    for b in range(lo, hi):
        if leaves.blocked[b]:
            leaves.free[k] = b
            k += 1
    for c in nb.prange(chunks):
        encode_leaves(tree, game, leaves, lo, k * c // chunks, k * (c + 1) // chunks)
    unfinished = 0
    for b in range(lo, hi):
        if active[b] and tree.visits[b, 0] - 1 < tree.target[b]:
            unfinished += 1
    return k, backed + m, unfinished, clamped


#: The turn over the trees: its serial twin has its parts inlined, since a search of one root turns
#: once a simulation (~20 µs) and a call that passes the ~30 arrays of the tree and the leaves costs
#: microseconds.
turn = Twins(
    _turn, "turn", finish_leaves=finish_leaves, select_trees=select_trees, encode_leaves=encode_leaves
)
