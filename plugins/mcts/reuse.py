"""A tree kept from one move to the next (`search.reuse_tree`): the node the moves played since lead
to, and the subtree under it made the new tree, renumbered in place."""

from __future__ import annotations

import numba as nb
import numpy as np

from .tree import EXPANDED, Tree


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
