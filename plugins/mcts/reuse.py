"""A tree kept from one move to the next (`search.reuse_tree`): the slot whose last root a new root
follows from, the node the moves played since lead to, and the subtree under it made the new tree,
renumbered in place."""

from __future__ import annotations

import numba as nb
import numpy as np

from .tree import EXPANDED, Tree

#: How many moves a root may be past its slot's last root for the slot's subtree to be found.
MAX_MOVES_SINCE = 8


def assign_slots(
    kept: list[tuple[int, ...] | None], histories: list[tuple[int, ...]], *, reuse_tree: bool
) -> np.ndarray:
    """A distinct tree slot per root (`histories`: each root's moves): the one whose last root
    (`kept[slot]`, None: free) its moves follow from, else a free or stale one (cleared in `kept`)."""
    slots = np.full(len(histories), -1, dtype=np.int64)
    taken = np.zeros(len(kept), dtype=bool)
    if reuse_tree:
        # Games with the same history (the empty board, a shared opening) each keep their own tree.
        by_history: dict[tuple[int, ...], list[int]] = {}
        for s, h in enumerate(kept):
            if h is not None:
                by_history.setdefault(h, []).append(s)
        for i, moves in enumerate(histories):
            for since in range(min(len(moves), MAX_MOVES_SINCE) + 1):
                mine = [s for s in by_history.get(moves[: len(moves) - since], ()) if not taken[s]]
                if mine:
                    slots[i], taken[mine[0]] = mine[0], True
                    break
    # Free slots first, then those this call did not match (their games may have ended).
    spare = sorted(np.flatnonzero(~taken), key=lambda s: kept[s] is not None)
    for j in np.flatnonzero(slots < 0):
        free = int(spare.pop(0))
        slots[j] = free
        kept[free] = None
    return slots


def keep_subtrees(
    tree: Tree,
    slots: np.ndarray,
    kept: list[tuple[int, ...] | None],
    histories: list[tuple[int, ...]],
    *,
    reuse: bool,
    same_player: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Each slot's tree rerooted at its new root where that follows from its last (`reuse`; with
    `same_player`, only where the same player is to move), `kept` updated to the new roots.
    Returns (fresh: a new tree is needed, placed: the root changed), per root."""
    fresh = np.ones(len(slots), dtype=np.bool_)
    placed = np.ones(len(slots), dtype=np.bool_)
    for j, (b, moves) in enumerate(zip(slots.tolist(), histories, strict=True)):
        last = kept[b]
        kept[b] = moves
        if (
            reuse
            and last is not None
            and moves[: len(last)] == last
            and (not same_player or (len(moves) - len(last)) % 2 == 0)
        ):
            node = descend(tree, b, np.array(moves[len(last) :], dtype=np.int64))
            if node == 0:  # the same root: nothing changes
                placed[j] = fresh[j] = False
            elif node > 0:
                reroot(tree, b, node)
                fresh[j] = False
    return fresh, placed


@nb.njit(cache=True)
def descend(tree: Tree, b: int, actions: np.ndarray) -> int:
    """The node reached from root b by `actions` through expanded nodes, or -1."""
    node = 0
    for a in actions:
        if tree.state[b, node] != EXPANDED:
            return -1
        node = tree.children[b, node, a]
        if node < 0:
            return -1
    return node if tree.state[b, node] == EXPANDED else -1


@nb.njit(cache=True)
def reroot(tree: Tree, b: int, new_root: int) -> None:
    """Keep only the subtree under `new_root`, renumbered from 0 in the old order (so in place)."""
    count = tree.n_nodes[b]
    keep = np.zeros(count, dtype=np.bool_)
    keep[new_root] = True
    # Children are always numbered after their parents: one pass in order marks the subtree.
    for node in range(new_root + 1, count):
        parent = tree.parent[b, node]
        if parent >= 0 and keep[parent]:
            keep[node] = True
    new_index = np.full(count, -1, dtype=np.int32)
    kept = 0
    for node in range(count):
        if keep[node]:
            new_index[node] = kept
            kept += 1
    for node in range(count):
        j = new_index[node]
        if j < 0:
            continue
        parent = tree.parent[b, node]
        tree.parent[b, j] = new_index[parent] if node != new_root else -1
        tree.action[b, j] = tree.action[b, node]
        tree.visits[b, j] = tree.visits[b, node]
        tree.pending_visits[b, j] = tree.pending_visits[b, node]
        tree.state[b, j] = tree.state[b, node]
        tree.value_sum[b, j] = tree.value_sum[b, node]
        tree.terminal_value[b, j] = tree.terminal_value[b, node]
        tree.raw_value[b, j] = tree.raw_value[b, node]
        tree.forced[b, j] = tree.forced[b, node]
        # Only an expanded node's row of children is its own (a new node's row is stale until then).
        expanded = tree.state[b, node] == EXPANDED
        for a in range(tree.children.shape[2]):
            c = tree.children[b, node, a] if expanded else -1
            tree.children[b, j, a] = new_index[c] if c >= 0 else -1
            tree.prior[b, j, a] = tree.prior[b, node, a]
    tree.action[b, 0] = -1
    tree.n_nodes[b] = kept
