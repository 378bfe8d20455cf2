"""Search trees as named arrays over a batch of games (mctx's layout); `steps` walks them.

Tree `b` of a `Tree` holds nodes 0..n_nodes[b]-1, node 0 its root; `tree.visits[b, n]` is node
n's visit count, `tree.prior[b, n, a]` the prior of its move a, `tree.children[b, n, a]` the node
that move leads to (-1: not created). Values are stored from the view of the player who moved
*into* the node, so a parent picks the child with the best value as is. Kernels are small pure
functions of the tree, the search's `SearchParams`, the game's kernels (`GameKernels`) and, for the
leaves waiting for an evaluation, `leaves.Leaves`: nothing per node is a Python object.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

UNEXPANDED, EXPANDED, TERMINAL = 0, 1, 2
ONGOING, WIN, DRAW = 0, 1, 2


class Tree(NamedTuple):
    """B trees of at most N nodes each over A actions; per tree, its root position."""

    parent: np.ndarray
    """[B, N] int32: the node's parent (-1 for a root)."""
    action: np.ndarray
    """[B, N] int32: the move from its parent into the node (-1 for a root)."""
    visits: np.ndarray
    """[B, N] int32: simulations backed up through the node."""
    pending_visits: np.ndarray
    """[B, N] int32: leaves under the node waiting for their evaluation (virtual visits)."""
    state: np.ndarray
    """[B, N] int8: UNEXPANDED, EXPANDED or TERMINAL."""
    value_sum: np.ndarray
    """[B, N] float32: the sum of backed-up values, from the view of the player who moved into it."""
    terminal_value: np.ndarray
    """[B, N] float32: a terminal node's value, same view."""
    children: np.ndarray
    """[B, N, A] int32: the child each move leads to (-1: not created)."""
    prior: np.ndarray
    """[B, N, A] float32: the policy's prior of each move (0 for occupied cells)."""
    n_nodes: np.ndarray
    """[B] int32: nodes in use."""
    root_board: np.ndarray
    """[B, A] int8: each root's board (0 empty, +1 / -1 the players' stones)."""
    root_player: np.ndarray
    """[B] int8: the player to move at the root."""
    root_moves: np.ndarray
    """[B] int32: moves played before the root."""
    root_last: np.ndarray
    """[B] int32: the last move played (-1: none)."""
    noised: np.ndarray
    """[B] bool: the root's priors hold Dirichlet noise."""
    raw_value: np.ndarray
    """[B, N] float32: the network's value of an expanded node (a terminal one's value), from the
    view of the player who moved into it (a Gumbel search's completed Q values read it)."""
    target: np.ndarray
    """[B] int32: the simulations this search gives the tree (its root's visits, less its expansion)."""
    gumbel: np.ndarray
    """[B, A] float32: a Gumbel root's noise on each move (0: none), drawn at the search's start."""
    considered_visits: np.ndarray
    """[B, N] int32: a Gumbel root's schedule: the visits a move must have for simulation s to go to it."""
    forced: np.ndarray
    """[B, N] int32: the one move of a node whose player to move must stop the opponent's win
    (`forced_blocks`), or of a root that wins by force (`forced_wins`); -1 for none."""

    @property
    def n_trees(self) -> int:
        return int(self.visits.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.visits.shape[1])

    @property
    def n_actions(self) -> int:
        return int(self.children.shape[2])


#: Each field's dtype, shape in (B, N, A) and fill: one place, for new_tree and grown. A node's row
#: of children and priors ([B, N, A]: most of a tree's bytes) is written whole when the node is
#: expanded (`expand`, `reset_tree`) and read only then, so it is left zero: pages that the OS maps
#: as the search touches them. A tree sized for a timed search's 4x headroom costs neither the
#: time to fill it (a second for 800k nodes on 15x15, inside the turn) nor the memory it never uses.
_LAYOUT: dict[str, tuple[type, str, int]] = {
    "parent": (np.int32, "BN", -1),
    "action": (np.int32, "BN", -1),
    "visits": (np.int32, "BN", 0),
    "pending_visits": (np.int32, "BN", 0),
    "state": (np.int8, "BN", UNEXPANDED),
    "value_sum": (np.float32, "BN", 0),
    "terminal_value": (np.float32, "BN", 0),
    "children": (np.int32, "BNA", 0),
    "prior": (np.float32, "BNA", 0),
    "n_nodes": (np.int32, "B", 0),
    "root_board": (np.int8, "BA", 0),
    "root_player": (np.int8, "B", 1),
    "root_moves": (np.int32, "B", 0),
    "root_last": (np.int32, "B", -1),
    "noised": (np.bool_, "B", False),
    "raw_value": (np.float32, "BN", 0),
    "target": (np.int32, "B", 0),
    "gumbel": (np.float32, "BA", 0),
    "considered_visits": (np.int32, "BN", 0),
    "forced": (np.int32, "BN", -1),
}


def new_tree(n_trees: int, capacity: int, n_actions: int) -> Tree:
    """`n_trees` empty trees of `capacity` nodes over `n_actions` actions."""
    sizes = {"B": n_trees, "N": capacity, "A": n_actions}
    return Tree(
        **{
            name: _filled(tuple(sizes[d] for d in dims), fill, dtype)
            for name, (dtype, dims, fill) in _LAYOUT.items()
        }
    )


def _filled(shape: tuple[int, ...], fill: int, dtype: type) -> np.ndarray:
    # np.zeros asks the OS for zeroed pages (mapped on first touch); np.full writes every byte.
    return np.zeros(shape, dtype=dtype) if fill == 0 else np.full(shape, fill, dtype=dtype)


def grown(tree: Tree, capacity: int, n_trees: int) -> Tree:
    """A copy of `tree` with room for `capacity` nodes in each of `n_trees` trees (the new ones empty)."""
    other = new_tree(max(n_trees, tree.n_trees), max(capacity, tree.capacity), tree.n_actions)
    for name, (_, dims, _) in _LAYOUT.items():
        old, new = getattr(tree, name), getattr(other, name)
        assert len(dims) == old.ndim
        if dims == "BNA":  # the rows of the nodes in use only: the others are written when expanded
            for b, used in enumerate(tree.n_nodes.tolist()):
                new[b, :used] = old[b, :used]
        else:
            new[tuple(slice(0, n) for n in old.shape)] = old
    return other


class SearchParams(NamedTuple):
    """The numbers PUCT selection reads."""

    c_puct: float
    """Q + c_puct · P · sqrt(N_parent) / (1 + N_child)."""
    fpu_value: float
    """An unvisited move's value, from the mover's view (when fpu_from_parent is off)."""
    fpu_from_parent: bool
    """An unvisited move is worth its parent's value less fpu_reduction instead."""
    fpu_reduction: float
    virtual_loss: float
    """What a pending visit counts as on its path: a visit that lost this much."""
    detect_wins: bool
    """A leaf whose player to move wins at once is scored without the network."""
    leaves_per_tree: int
    """Leaves one tree may have waiting at once (1: the leaves of all trees go as one batch)."""
    forced_blocks: bool
    """With detect_wins: a node whose opponent can win at once has the block as its only move, and
    two such wins to stop are a lost position, without the network."""
    forced_wins: bool
    """A node whose player to move has a win the opponent cannot stop (the game's `forced_win`)
    is scored as won for that player without the network, and a root's such win is its only move."""
    draw_contempt: float
    """The root's player counts a draw as a loss of this much, its opponent as a win of as much."""
    gumbel: bool
    """A Gumbel root (sequential halving over the considered moves) and mctx's deterministic
    selection below it, instead of PUCT."""
    c_visit: float
    """Gumbel: σ(q) = (c_visit + the most visits of a move) · c_scale · q, q rescaled to [0, 1]."""
    c_scale: float


# -- kernels -----------------------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def draw_value(params: SearchParams, depth: int) -> float:
    """A draw's value at `depth` below the root, from the view of the player who moved into it:
    -draw_contempt for the root's player (who moves into the odd depths), +draw_contempt for its
    opponent."""
    return -params.draw_contempt if depth % 2 == 1 else params.draw_contempt


@nb.njit(cache=True)
def reset_tree(tree: Tree, b: int) -> None:
    """Tree b becomes a single unexpanded root (its position set apart)."""
    tree.parent[b, 0] = -1
    tree.action[b, 0] = -1
    tree.visits[b, 0] = 0
    tree.pending_visits[b, 0] = 0
    tree.state[b, 0] = UNEXPANDED
    tree.value_sum[b, 0] = 0.0
    tree.children[b, 0, :] = -1
    tree.forced[b, 0] = -1
    tree.n_nodes[b] = 1


@nb.njit(cache=True)
def root_child_visits(tree: Tree) -> np.ndarray:
    """Visit counts of each root's children, [B, A] (0 for moves never tried)."""
    n_trees, n_actions = tree.children.shape[0], tree.children.shape[2]
    out = np.zeros((n_trees, n_actions), dtype=np.float32)
    for b in range(n_trees):
        if tree.state[b, 0] != EXPANDED:
            continue
        for a in range(n_actions):
            c = tree.children[b, 0, a]
            if c >= 0:
                out[b, a] = tree.visits[b, c]
    return out
