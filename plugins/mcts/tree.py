"""Search trees as arrays over a batch of games (mctx's layout), and their compiled kernels.

Tree `b` of a `Forest` holds nodes 0..n_nodes[b]-1, node 0 its root. Per node: parent, the
action that led to it, visits, pending visits (virtual visits of leaves waiting for their
evaluation), the sum of backed-up values and a state (unexpanded, expanded, terminal); per node
and action: the child's index (-1: not created) and the prior. Values are stored from the view
of the player who moved *into* the node, so a parent picks the child with the best value as is.

The game's rules come in as C kernels (`apply_move`, `encode`, `winning_move`, numba cfuncs over
pointers to the board, the game's `params` and the planes): the engine knows no game. The kernels
here take their addresses (`kernel_addresses`) and call them through a pointer: a function object
as an argument costs numba ~10 µs to convert on every call, an address nothing, and the compiled
kernels stay in numba's disk cache.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

UNEXPANDED, EXPANDED, TERMINAL = 0, 1, 2
ONGOING, WIN, DRAW = 0, 1, 2
# Columns of Forest.node_i.
PARENT, ACTION, VISITS, PENDING, STATE = 0, 1, 2, 3, 4


#: Indices of the game's kernels in the array of their addresses.
APPLY_MOVE, WINNING_MOVE, ENCODE = 0, 1, 2


def kernel_addresses(game: Any) -> np.ndarray:
    """The addresses of a game's C kernels [apply_move, winning_move, encode] (numba cfuncs, or
    ctypes function pointers of the same signatures)."""
    return np.array([_address(game.apply_move), _address(game.winning_move), _address(game.encode)], np.int64)


def _address(kernel: Any) -> int:
    address = getattr(kernel, "address", None)
    if address is None:
        try:
            address = ctypes.cast(kernel, ctypes.c_void_p).value
        except ctypes.ArgumentError:
            address = None
    if not address:
        raise TypeError(f"{kernel!r} is not a C function (a numba cfunc or a ctypes function pointer)")
    return int(address)


def _data(context: Any, builder: Any, array_type: Any, array: Any) -> Any:
    return context.make_array(array_type)(context, builder, array).data


def _call_apply_move(typingctx, address, board, action, player, n_moves, params):  # type: ignore[no-untyped-def]
    """`apply_move(board*, action, player, n_moves, params*) -> outcome` at `address`."""
    i64 = types.int64
    sig = i64(i64, board, i64, i64, i64, params)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[5], args[5])
        word = ir.IntType(64)
        fnty = ir.FunctionType(word, [board_p.type, word, word, word, params_p.type])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [board_p, args[2], args[3], args[4], params_p])

    return sig, codegen


call_apply_move: Any = intrinsic(_call_apply_move)


def _call_winning_move(typingctx, address, board, player, params):  # type: ignore[no-untyped-def]
    """`winning_move(board*, player, params*) -> action or -1` at `address`."""
    i64 = types.int64
    sig = i64(i64, board, i64, params)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[3], args[3])
        word = ir.IntType(64)
        fnty = ir.FunctionType(word, [board_p.type, word, params_p.type])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [board_p, args[2], params_p])

    return sig, codegen


call_winning_move: Any = intrinsic(_call_winning_move)


def _call_encode(typingctx, address, board, player, last, params, out):  # type: ignore[no-untyped-def]
    """`encode(board*, player, last_move, params*, out*)` at `address`."""
    i64 = types.int64
    sig = i64(i64, board, i64, i64, params, out)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[4], args[4])
        out_p = _data(context, builder, signature.args[5], args[5])
        word = ir.IntType(64)
        fnty = ir.FunctionType(word, [board_p.type, word, word, params_p.type, out_p.type])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [board_p, args[2], args[3], params_p, out_p])

    return sig, codegen


call_encode: Any = intrinsic(_call_encode)


def entry_point(dispatcher: Any, *args: Any) -> Callable[..., Any]:
    """The compiled function of a numba kernel for these arguments' types, to be called directly.

    A dispatcher types its arguments on every call, ~6 µs when one is a function (a game's
    kernel); the search calls its kernels once per simulation, so it resolves them once.
    """
    return dispatcher.compile(tuple(nb.typeof(arg) for arg in args))


class Forest:
    """B trees of at most `capacity` nodes each, over `n_actions` actions."""

    def __init__(self, n_trees: int, capacity: int, n_actions: int) -> None:
        self.n_actions = n_actions
        self.node_i = np.zeros((n_trees, capacity, 5), dtype=np.int32)
        self.value_sum = np.zeros((n_trees, capacity), dtype=np.float32)
        self.terminal_value = np.zeros((n_trees, capacity), dtype=np.float32)
        self.children = np.full((n_trees, capacity, n_actions), -1, dtype=np.int32)
        self.prior = np.zeros((n_trees, capacity, n_actions), dtype=np.float32)
        self.n_nodes = np.zeros(n_trees, dtype=np.int32)
        # The root position of each tree.
        self.root_board = np.zeros((n_trees, n_actions), dtype=np.int8)
        self.root_player = np.ones(n_trees, dtype=np.int8)
        self.root_moves = np.zeros(n_trees, dtype=np.int32)
        self.root_last = np.full(n_trees, -1, dtype=np.int32)
        self.noised = np.zeros(n_trees, dtype=np.bool_)

    @property
    def n_trees(self) -> int:
        return int(self.node_i.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.node_i.shape[1])

    def reset(self, b: int, board: np.ndarray, player: int, n_moves: int, last: int) -> None:
        """Tree `b` becomes a single unexpanded root at the given position."""
        reset_tree(self.node_i[b], self.value_sum[b], self.children[b])
        self.n_nodes[b] = 1
        self.set_root(b, board, player, n_moves, last)

    def set_root(self, b: int, board: np.ndarray, player: int, n_moves: int, last: int) -> None:
        """Tree `b`'s root position (its nodes as they are), not yet noised."""
        self.root_board[b] = board
        self.root_player[b] = player
        self.root_moves[b] = n_moves
        self.root_last[b] = last
        self.noised[b] = False

    def root_visits(self) -> np.ndarray:
        """Visit counts of each root's children, [B, A] (0 for moves never tried)."""
        return child_visits(self.node_i, self.children)

    def root_values(self) -> np.ndarray:
        """Each root's mean value from the view of its player to move, [B]."""
        visits = np.maximum(self.node_i[:, 0, VISITS], 1)
        return -self.value_sum[:, 0] / visits

    def grown(self, capacity: int, n_trees: int) -> Forest:
        """A copy with room for `capacity` nodes in each of `n_trees` trees (the new ones empty)."""
        other = Forest(max(n_trees, self.n_trees), max(capacity, self.capacity), self.n_actions)
        b, keep = self.n_trees, self.capacity
        other.node_i[:b, :keep] = self.node_i
        other.value_sum[:b, :keep] = self.value_sum
        other.terminal_value[:b, :keep] = self.terminal_value
        other.children[:b, :keep] = self.children
        other.prior[:b, :keep] = self.prior
        for name in ("n_nodes", "root_board", "root_player", "root_moves", "root_last", "noised"):
            getattr(other, name)[:b] = getattr(self, name)
        return other


@nb.njit(cache=True)
def reset_tree(node_i: np.ndarray, value_sum: np.ndarray, children: np.ndarray) -> None:
    node_i[0, :] = 0
    node_i[0, PARENT] = -1
    node_i[0, ACTION] = -1
    value_sum[0] = 0.0
    children[0, :] = -1


@nb.njit(cache=True)
def child_visits(node_i: np.ndarray, children: np.ndarray) -> np.ndarray:
    n_trees, n_actions = children.shape[0], children.shape[2]
    out = np.zeros((n_trees, n_actions), dtype=np.float32)
    for b in range(n_trees):
        if node_i[b, 0, STATE] != EXPANDED:
            continue
        for a in range(n_actions):
            c = children[b, 0, a]
            if c >= 0:
                out[b, a] = node_i[b, c, VISITS]
    return out


@nb.njit(cache=True)
def select_leaf(
    b: int,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    terminal_value: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    n_nodes: np.ndarray,
    root_board: np.ndarray,
    root_player: np.ndarray,
    root_moves: np.ndarray,
    root_last: np.ndarray,
    search_params: np.ndarray,
    game_params: np.ndarray,
    game_kernels: np.ndarray,
    board: np.ndarray,
    path: np.ndarray,
) -> tuple[int, int, int, int, float]:
    """Descend tree b by PUCT from its root to a leaf, creating the leaf if new.

    Leaves `board` as the leaf's position and `path[:depth+1]` as the nodes from the root.
    Returns (depth, player to move at the leaf, last move, n_moves, value): value is the leaf's
    value from its mover's view when it is known without a network (terminal, or the player to
    move wins at once), else NaN.
    """
    c_puct, fpu_reduction, virtual_loss = search_params[0], search_params[1], search_params[2]
    detect_wins, fpu_from_parent, fpu_value = search_params[3] > 0.0, search_params[4] > 0.0, search_params[5]
    board[:] = root_board[b]
    player, moves, last = int(root_player[b]), int(root_moves[b]), int(root_last[b])
    node, depth = 0, 0
    path[0] = 0
    n_actions = board.size
    while node_i[b, node, STATE] == EXPANDED:
        parent_n = node_i[b, node, VISITS] + node_i[b, node, PENDING]
        sqrt_n = np.sqrt(max(parent_n, 1))
        fpu = fpu_value
        if fpu_from_parent and node_i[b, node, VISITS] > 0:
            fpu = -value_sum[b, node] / node_i[b, node, VISITS] - fpu_reduction
        best, best_score = -1, -np.inf
        for a in range(n_actions):
            if board[a] != 0:
                continue
            c = children[b, node, a]
            n, q = 0, fpu
            if c >= 0:
                n = node_i[b, c, VISITS] + node_i[b, c, PENDING]
                if n > 0:
                    q = (value_sum[b, c] - virtual_loss * node_i[b, c, PENDING]) / n
            score = q + c_puct * prior[b, node, a] * sqrt_n / (1 + n)
            if score > best_score:
                best, best_score = a, score
        child = children[b, node, best]
        if child < 0:
            child = n_nodes[b]
            if child >= node_i.shape[1]:
                raise RuntimeError("search tree is full")
            n_nodes[b] += 1
            node_i[b, child, PARENT] = node
            node_i[b, child, ACTION] = best
            node_i[b, child, VISITS] = 0
            node_i[b, child, PENDING] = 0
            node_i[b, child, STATE] = UNEXPANDED
            value_sum[b, child] = 0.0
            children[b, node, best] = child
        outcome = call_apply_move(game_kernels[APPLY_MOVE], board, best, player, moves, game_params)
        moves += 1
        last = best
        player = -player
        node = child
        depth += 1
        path[depth] = node
        if outcome != ONGOING and node_i[b, node, STATE] == UNEXPANDED:
            node_i[b, node, STATE] = TERMINAL
            terminal_value[b, node] = 1.0 if outcome == WIN else 0.0
    if node_i[b, node, STATE] == TERMINAL:
        return depth, player, last, moves, terminal_value[b, node]
    if detect_wins and call_winning_move(game_kernels[WINNING_MOVE], board, player, game_params) >= 0:
        # The player to move wins next move whatever: a lost position for whoever moved here.
        node_i[b, node, STATE] = TERMINAL
        terminal_value[b, node] = -1.0
        return depth, player, last, moves, -1.0
    return depth, player, last, moves, np.nan


@nb.njit(cache=True)
def encode_root(
    game_kernels: np.ndarray,
    board: np.ndarray,
    player: int,
    last: int,
    game_params: np.ndarray,
    out: np.ndarray,
) -> None:
    call_encode(game_kernels[ENCODE], board, player, last, game_params, out)


@nb.njit(cache=True)
def backup(
    b: int, node_i: np.ndarray, value_sum: np.ndarray, path: np.ndarray, depth: int, value: float
) -> None:
    """Add a leaf's value (from its mover's view) along the path, flipping sides at each level."""
    for d in range(depth, -1, -1):
        node = path[d]
        node_i[b, node, VISITS] += 1
        value_sum[b, node] += value
        value = -value


@nb.njit(cache=True)
def expand(
    b: int,
    node: int,
    node_i: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    board: np.ndarray,
    logits: np.ndarray,
) -> None:
    """Expand a leaf: priors are the softmax of `logits` over its empty cells."""
    top = -np.inf
    for a in range(board.size):
        if board[a] == 0 and logits[a] > top:
            top = logits[a]
    total = 0.0
    for a in range(board.size):
        children[b, node, a] = -1
        if board[a] == 0:
            p = np.exp(logits[a] - top)
            prior[b, node, a] = p
            total += p
        else:
            prior[b, node, a] = 0.0
    for a in range(board.size):
        prior[b, node, a] /= total
    node_i[b, node, STATE] = EXPANDED


@nb.njit(cache=True)
def select_batch(
    active: np.ndarray,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    terminal_value: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    n_nodes: np.ndarray,
    root_board: np.ndarray,
    root_player: np.ndarray,
    root_moves: np.ndarray,
    root_last: np.ndarray,
    search_params: np.ndarray,
    game_params: np.ndarray,
    game_kernels: np.ndarray,
    boards: np.ndarray,
    paths: np.ndarray,
    depths: np.ndarray,
    planes: np.ndarray,
    pending_b: np.ndarray,
    target: int,
) -> tuple[int, int]:
    """One simulation's selection in every active tree that has not reached `target` visits.

    A leaf whose value is known is backed up here; the others' planes go to `planes[:k]` (their
    trees in `pending_b[:k]`) for one evaluation. Returns (k, trees that simulated).
    """
    k, n_active = 0, 0
    for b in range(active.size):
        # A root is done when its children's visits (its own visits less its expansion) reach the target.
        if not active[b] or node_i[b, 0, VISITS] - 1 >= target:
            continue
        n_active += 1
        depth, player, last, _, value = select_leaf(
            b,
            node_i,
            value_sum,
            terminal_value,
            children,
            prior,
            n_nodes,
            root_board,
            root_player,
            root_moves,
            root_last,
            search_params,
            game_params,
            game_kernels,
            boards[b],
            paths[b],
        )
        depths[b] = depth
        if np.isnan(value):
            call_encode(game_kernels[ENCODE], boards[b], player, last, game_params, planes[k])
            pending_b[k] = b
            k += 1
        else:
            backup(b, node_i, value_sum, paths[b], depth, value)
    return k, n_active


@nb.njit(cache=True)
def expand_batch(
    k: int,
    pending_b: np.ndarray,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    boards: np.ndarray,
    paths: np.ndarray,
    depths: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
) -> None:
    """Expand the k evaluated leaves and back up their values (network values: the mover-to-be's view)."""
    for i in range(k):
        b = pending_b[i]
        leaf = paths[b, depths[b]]
        expand(b, leaf, node_i, children, prior, boards[b], logits[i])
        backup(b, node_i, value_sum, paths[b], depths[b], -values[i])


@nb.njit(cache=True)
def add_noise(
    b: int, node_i: np.ndarray, prior: np.ndarray, board: np.ndarray, noise: np.ndarray, eps: float
) -> None:
    """Mix Dirichlet noise (one sample per empty cell, in cell order) into the root's priors."""
    j = 0
    for a in range(board.size):
        if board[a] == 0:
            prior[b, 0, a] = (1.0 - eps) * prior[b, 0, a] + eps * noise[j]
            j += 1


@nb.njit(cache=True)
def descend(b: int, node_i: np.ndarray, children: np.ndarray, actions: np.ndarray) -> int:
    """The node reached from the root by `actions` through expanded nodes, or -1."""
    node = 0
    for a in actions:
        if node_i[b, node, STATE] != EXPANDED:
            return -1
        node = children[b, node, a]
        if node < 0:
            return -1
    return node if node_i[b, node, STATE] == EXPANDED else -1


@nb.njit(cache=True)
def reroot(
    b: int,
    new_root: int,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    terminal_value: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    n_nodes: np.ndarray,
) -> None:
    """Keep only the subtree under `new_root`, renumbered from 0 in the old order (so in place)."""
    count = n_nodes[b]
    keep = np.zeros(count, dtype=np.bool_)
    keep[new_root] = True
    # Children are always numbered after their parents: one pass in order marks the subtree.
    for node in range(new_root + 1, count):
        parent = node_i[b, node, PARENT]
        if parent >= 0 and keep[parent]:
            keep[node] = True
    new_index = np.full(count, -1, dtype=np.int32)
    j = 0
    for node in range(count):
        if keep[node]:
            new_index[node] = j
            j += 1
    for node in range(count):
        j = new_index[node]
        if j < 0:
            continue
        node_i[b, j, :] = node_i[b, node, :]
        parent = node_i[b, node, PARENT]
        node_i[b, j, PARENT] = new_index[parent] if node != new_root else -1
        value_sum[b, j] = value_sum[b, node]
        terminal_value[b, j] = terminal_value[b, node]
        # Only an expanded node's row of children is its own (a new node's row is stale until then).
        expanded = node_i[b, node, STATE] == EXPANDED
        for a in range(children.shape[2]):
            c = children[b, node, a] if expanded else -1
            children[b, j, a] = new_index[c] if c >= 0 else -1
            prior[b, j, a] = prior[b, node, a]
    node_i[b, 0, ACTION] = -1
    n_nodes[b] = _count(keep)


@nb.njit(cache=True)
def _count(keep: np.ndarray) -> int:
    total = 0
    for k in keep:
        if k:
            total += 1
    return total


# -- the pipelined search's kernels (search=ray_async) ----------------------------------------------
# A leaf waiting for its evaluation lives in a slot: its tree, position, path and depth. Its path
# carries one pending (virtual) visit per node until the evaluation comes back or is given up.


@nb.njit(cache=True)
def select_async(
    active: np.ndarray,
    target: int,
    budget: int,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    terminal_value: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
    n_nodes: np.ndarray,
    root_board: np.ndarray,
    root_player: np.ndarray,
    root_moves: np.ndarray,
    root_last: np.ndarray,
    search_params: np.ndarray,
    game_params: np.ndarray,
    game_kernels: np.ndarray,
    free_slots: np.ndarray,
    n_free: np.ndarray,
    leaf_tree: np.ndarray,
    leaf_board: np.ndarray,
    leaf_path: np.ndarray,
    leaf_depth: np.ndarray,
    planes: np.ndarray,
    out_slots: np.ndarray,
    blocked: np.ndarray,
) -> tuple[int, int, int]:
    """Leaves to evaluate, one per active tree in turn, until `budget` are taken or no tree can give one.

    A tree gives leaves while its root's visits (less its expansion) plus its pending visits are
    below `target`. A leaf whose value is known is backed up at once; a leaf that is already
    waiting for its evaluation (a collision) stops its tree for this call. A taken leaf gets a
    free slot, a pending visit on every node of its path, and its planes in `planes[k]`
    (`out_slots[k]` its slot). Returns (k, simulations backed up here, trees not yet at target).
    """
    k, backed = 0, 0
    blocked[:] = False
    progress = True
    while progress and k < budget and n_free[0] > 0:
        progress = False
        for b in range(active.size):
            if k >= budget or n_free[0] == 0:
                break
            if not active[b] or blocked[b] or node_i[b, 0, VISITS] - 1 + node_i[b, 0, PENDING] >= target:
                continue
            slot = free_slots[n_free[0] - 1]
            depth, player, last, _, value = select_leaf(
                b,
                node_i,
                value_sum,
                terminal_value,
                children,
                prior,
                n_nodes,
                root_board,
                root_player,
                root_moves,
                root_last,
                search_params,
                game_params,
                game_kernels,
                leaf_board[slot],
                leaf_path[slot],
            )
            if not np.isnan(value):
                backup(b, node_i, value_sum, leaf_path[slot], depth, value)
                backed += 1
                progress = True
                continue
            leaf = leaf_path[slot, depth]
            if node_i[b, leaf, PENDING] > 0:
                blocked[b] = True
                continue
            n_free[0] -= 1
            for d in range(depth + 1):
                node_i[b, leaf_path[slot, d], PENDING] += 1
            leaf_tree[slot] = b
            leaf_depth[slot] = depth
            call_encode(game_kernels[ENCODE], leaf_board[slot], player, last, game_params, planes[k])
            out_slots[k] = slot
            k += 1
            progress = True
    unfinished = 0
    for b in range(active.size):
        if active[b] and node_i[b, 0, VISITS] - 1 < target:
            unfinished += 1
    return k, backed, unfinished


@nb.njit(cache=True)
def release_leaves(slots: np.ndarray, leaf_tree: np.ndarray, leaf_path: np.ndarray, leaf_depth: np.ndarray,
                   node_i: np.ndarray) -> int:  # fmt: skip
    """Take the leaves' pending visits off their paths (never below 0); returns how many were
    already 0 (a bookkeeping error: 0 when all is well)."""
    clamped = 0
    for i in range(slots.size):
        s = slots[i]
        b = leaf_tree[s]
        for d in range(leaf_depth[s] + 1):
            node = leaf_path[s, d]
            if node_i[b, node, PENDING] > 0:
                node_i[b, node, PENDING] -= 1
            else:
                clamped += 1
    return clamped


@nb.njit(cache=True)
def finish_leaves(
    slots: np.ndarray,
    logits: np.ndarray,
    values: np.ndarray,
    leaf_tree: np.ndarray,
    leaf_board: np.ndarray,
    leaf_path: np.ndarray,
    leaf_depth: np.ndarray,
    node_i: np.ndarray,
    value_sum: np.ndarray,
    children: np.ndarray,
    prior: np.ndarray,
) -> int:
    """Evaluated leaves: pending visits off their paths, the leaf expanded (illegal moves masked),
    its value backed up. Returns release_leaves' count of pending visits already at 0."""
    clamped = release_leaves(slots, leaf_tree, leaf_path, leaf_depth, node_i)
    for i in range(slots.size):
        s = slots[i]
        b, depth = leaf_tree[s], leaf_depth[s]
        leaf = leaf_path[s, depth]
        if node_i[b, leaf, STATE] == UNEXPANDED:
            expand(b, leaf, node_i, children, prior, leaf_board[s], logits[i])
        backup(b, node_i, value_sum, leaf_path[s], depth, -values[i])
    return clamped
