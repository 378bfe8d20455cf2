"""A tree's memory: sized for many nodes, it takes memory as its nodes are expanded; grown, it keeps
every node in use, so that a search over it visits as one over a tree made at its size."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from framework_plugins.boardgames.search import SearchRequest
from framework_plugins.gomoku.rules import GameState
from framework_plugins.mcts.tree import grown, new_tree
from tests.mcts.test_sequential import GAME, index_logits, make_engine, most_visited_line, position

#: Values that depend on the position (so that kept statistics change where a search goes next).
WEIGHTS = np.random.default_rng(0).normal(size=(4, *GAME.board_shape)).astype(np.float32)


def varied() -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.tanh((planes * WEIGHTS).sum(axis=(1, 2, 3))).astype(np.float32)
        return np.tile(index_logits(GAME), (len(planes), 1)), values

    return evaluate


def resident_mb() -> float:
    """This process's resident memory."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_tree_sized_for_many_nodes_takes_memory_as_they_are_expanded_not_as_it_is_sized() -> None:
    # 400k nodes over 15x15's 225 moves: 720 MB of children and priors, as a timed Gomocup search
    # sizes its tree with 4x headroom; its other fields are ~30 bytes a node.
    before = resident_mb()
    tree = new_tree(1, 400_000, 225)
    assert resident_mb() - before < 40
    tree.n_nodes[0] = 1000
    tree.children[0, :1000] = 7
    bigger = grown(tree, 800_000, 1)
    assert resident_mb() - before < 100
    assert bigger.capacity == 800_000 and (bigger.children[0, :1000] == 7).all()
    assert (bigger.parent[0] == -1).all() and (bigger.forced[0] == -1).all()  # fields that start at -1 do


def test_a_search_in_a_grown_tree_visits_as_one_in_a_tree_made_at_its_size() -> None:
    """A small search, then a larger one from the position two moves on along its most visited line
    (that subtree kept): the tree grows between them. The same two searches in a tree first made
    large (by a search of another position) visit the same, move for move at the root."""
    first = position([(4, 4)], [])
    growing = make_engine(evaluator_factory=varied, num_simulations=8, reuse_tree=True)
    growing.search([first], SearchRequest(simulations=400))
    small = growing.tree
    assert small is not None and small.capacity == 402
    move, reply, kept = most_visited_line(growing, first)
    assert kept > 0
    later = GameState.from_moves(GAME, [*first.moves, move, reply])
    found = growing.search([later], SearchRequest(simulations=3000))
    assert growing.tree is not None and growing.tree.capacity > small.capacity

    sized = make_engine(evaluator_factory=varied, num_simulations=8, reuse_tree=True)
    sized.search([position([(0, 0)], [])], SearchRequest(simulations=3000))
    sized.search([first], SearchRequest(simulations=400))
    expected = sized.search([later], SearchRequest(simulations=3000))
    assert sized.tree is not None and sized.tree.capacity == growing.tree.capacity
    np.testing.assert_array_equal(found.visits, expected.visits)
    # The kept subtree counted (its visits less the one that expanded it, which is no child's).
    assert found.simulations == expected.simulations == 3000 - (kept - 1)
