"""search=sequential (a PuctSearch evaluating in the run's process): visit budgets, noise at the
start node only, subtree reuse per game slot, tactics, value signs and terminal leaves without the
network (its refusals: test_sequential_refusals.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from framework_plugins.boardgames import SearchRequest
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.mcts.config import SequentialConfig
from framework_plugins.mcts.engines import local_search, uniform_evaluator
from framework_plugins.mcts.puct import PuctSearch
from framework_plugins.mcts.tree import EXPANDED

GAME = Gomoku(9, 5)
Evaluator = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def position(black: list[tuple[int, int]], white: list[tuple[int, int]], game: Gomoku = GAME) -> GameState:
    """The position with these stones, reached by alternate moves (black first)."""
    assert len(white) <= len(black) <= len(white) + 1
    b, w = [game.from_xy(*c) for c in black], [game.from_xy(*c) for c in white]
    state = GameState.from_moves(game, [m for pair in zip(b, w, strict=False) for m in pair] + b[len(w) :])
    assert not state.done
    return state


def make_engine(
    game: Gomoku = GAME,
    evaluator_factory: Callable[[], Evaluator] | None = None,
    seed: int = 0,
    **cfg: object,
) -> PuctSearch:
    factory = evaluator_factory or uniform_evaluator(game)
    return local_search(SequentialConfig(**cfg), game=game, evaluator_factory=factory, seed=seed)  # type: ignore[arg-type]


def index_logits(game: Gomoku) -> np.ndarray:
    """A fixed, non-uniform policy: the logit of a cell grows with its index."""
    return 0.05 * np.arange(game.n_actions, dtype=np.float32)


def index_evaluator(game: Gomoku = GAME) -> Callable[[], Evaluator]:
    def make() -> Evaluator:
        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(planes)
            return np.tile(index_logits(game), (n, 1)), np.zeros(n, dtype=np.float32)

        return evaluate

    return make


class Recorder:
    """A uniform evaluator (or `value_of` planes) that keeps every batch of planes it is given."""

    def __init__(self, game: Gomoku = GAME, value_of: Callable[[np.ndarray], float] | None = None) -> None:
        self.game = game
        self.value_of = value_of
        self.batches: list[np.ndarray] = []
        self.made = 0

    def factory(self) -> Evaluator:
        self.made += 1
        return self.evaluate

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert planes.dtype == np.float32 and planes.shape[1:] == (4, *self.game.board_shape)
        self.batches.append(planes.copy())
        values = [self.value_of(p) if self.value_of else 0.0 for p in planes]
        return np.zeros((len(planes), self.game.n_actions), np.float32), np.array(values, np.float32)

    @property
    def positions(self) -> np.ndarray:
        return np.concatenate(self.batches)


def softmax_over_empty(logits: np.ndarray, board: np.ndarray) -> np.ndarray:
    p = np.where(board == 0, np.exp(logits.astype(np.float64) - logits[board == 0].max()), 0.0)
    return p / p.sum()


def board_at(engine: PuctSearch, b: int, node: int) -> np.ndarray:
    """The position at a node of tree b: the root's board and the actions down to the node."""
    forest = engine.tree
    assert forest is not None
    actions = []
    while node != 0:
        actions.append(int(forest.action[b, node]))
        node = int(forest.parent[b, node])
    board, player = forest.root_board[b].copy(), int(forest.root_player[b])
    for a in reversed(actions):
        assert board[a] == 0
        board[a] = player
        player = -player
    return board


def child(engine: PuctSearch, b: int, node: int, action: int) -> int:
    assert engine.tree is not None
    return int(engine.tree.children[b, node, action])


def child_visits(engine: PuctSearch, b: int, node: int) -> np.ndarray:
    forest = engine.tree
    assert forest is not None
    kids = forest.children[b, node]
    return np.where(kids >= 0, forest.visits[b, np.maximum(kids, 0)], 0)


def tree_of(engine: PuctSearch, state: GameState) -> int:
    """The tree whose root is `state`'s position (the engine picks a tree slot per root)."""
    forest = engine.tree
    assert forest is not None
    same = [
        b
        for b in range(forest.n_trees)
        if np.array_equal(forest.root_board[b], state.board)
        and forest.root_moves[b] == len(state.moves)
        and forest.root_player[b] == state.to_play
    ]
    assert len(same) == 1, f"{len(same)} trees have the root {state}"
    return same[0]


def most_visited_line(engine: PuctSearch, state: GameState) -> tuple[int, int, int]:
    """After a search of `state`: its most visited move, the most visited reply to it, and the visits
    of the grandchild they lead to."""
    b = tree_of(engine, state)
    move = int(child_visits(engine, b, 0).argmax())
    reply = int(child_visits(engine, b, child(engine, b, 0, move)).argmax())
    grandchild = child(engine, b, child(engine, b, 0, move), reply)
    assert engine.tree is not None
    return move, reply, int(engine.tree.visits[b, grandchild])


def spy_on_roots(monkeypatch: pytest.MonkeyPatch, engine: PuctSearch) -> list[dict[str, np.ndarray]]:
    """Record each tree's root (visits, children's visits, priors) once placed and expanded, before
    any noise and any new simulation."""
    seen: list[dict[str, np.ndarray]] = []
    expand_roots = engine._expand_roots

    def spy(forest, active):  # type: ignore[no-untyped-def]
        expand_roots(forest, active)
        seen.append(
            {
                "visits": forest.visits[:, 0].copy(),
                "children": np.stack([child_visits(engine, b, 0) for b in range(forest.n_trees)]),
                "prior": forest.prior[:, 0].copy(),
            }
        )

    monkeypatch.setattr(engine, "_expand_roots", spy)
    return seen


def has_line(stones: np.ndarray, n: int) -> bool:
    """Whether a [size, size] board of booleans has n in a row in any direction."""
    size = stones.shape[0]
    m = size - n + 1
    rows, cols = np.ones((size, m), bool), np.ones((m, size), bool)
    diagonals, anti_diagonals = np.ones((m, m), bool), np.ones((m, m), bool)
    for i in range(n):
        rows &= stones[:, i : i + m]
        cols &= stones[i : i + m, :]
        diagonals &= stones[i : i + m, i : i + m]
        anti_diagonals &= stones[i : i + m, n - 1 - i : n - 1 - i + m]
    return bool(rows.any() or cols.any() or diagonals.any() or anti_diagonals.any())


#: Black to move; black blocks white's four at (5, 4), which makes black's column-5 four that white
#: must block at (5, 5): a forced line, so the grandchild after those two moves gets most visits.
FORCED = ([(0, 4), (5, 1), (5, 2), (5, 3), (8, 8)], [(1, 4), (2, 4), (3, 4), (4, 4), (5, 0)])
FORCED_MOVES = (GAME.from_xy(5, 4), GAME.from_xy(5, 5))


# -- the visit budget ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"fpu_value": None},
        {"fpu_value": -1.0, "c_puct": 0.5},
        {"detect_wins": False, "reuse_tree": False},
    ],
    ids=["defaults", "fpu-from-parent", "pessimistic-fpu", "no-win-detection"],
)
def test_visit_counts_sum_to_num_simulations_for_every_root_of_a_batch(cfg: dict[str, object]) -> None:
    roots = [
        GAME.new_state(),
        GameState.from_moves(GAME, [40]),
        position(*FORCED),
        position([(1, 2), (2, 2), (3, 2), (4, 2)], [(0, 2), (6, 6), (2, 7)]),  # white to move
    ]
    engine = make_engine(num_simulations=64, **cfg)
    found = engine.search(roots)
    counts = found.visits
    assert counts.shape == (4, 81)
    assert counts.sum(axis=1).tolist() == [64] * 4
    assert engine.simulations == 4 * 64
    assert found.values.shape == (4,)


def test_a_single_simulation_visits_a_single_move() -> None:
    counts = make_engine(num_simulations=1).search([GAME.new_state(), position(*FORCED)]).visits
    assert counts.sum(axis=1).tolist() == [1, 1]
    assert (np.count_nonzero(counts, axis=1) == 1).all()


def test_occupied_cells_get_no_visits_and_no_prior() -> None:
    # The index evaluator prefers the highest cells most: occupy them.
    black, white = [(8, 8), (6, 8), (4, 8), (8, 6)], [(7, 8), (5, 8), (3, 8)]
    roots = [position(black, white), position(*FORCED)]
    engine = make_engine(evaluator_factory=index_evaluator(), num_simulations=200)
    counts = engine.search(roots).visits
    assert engine.tree is not None
    for i, root in enumerate(roots):
        occupied = root.board != 0
        assert counts[i, occupied].sum() == 0 and counts[i].sum() == 200
        assert (engine.tree.prior[tree_of(engine, root), 0, occupied] == 0).all()
    # The preferred empty cell, not an occupied one, gets the most visits.
    assert counts[0].argmax() == GAME.from_xy(2, 8)


def test_an_empty_batch_returns_no_counts() -> None:
    counts = make_engine().search([]).visits
    assert counts.shape == (0, 81)


# -- Dirichlet noise -------------------------------------------------------------------------------


def assert_mixed_once(prior: np.ndarray, policy: np.ndarray, eps: float) -> None:
    """prior = (1 − eps) · policy + eps · noise for one noise vector ≥ 0 that sums to 1."""
    noise_part = prior.astype(np.float64) - (1 - eps) * policy
    assert noise_part.min() >= -1e-6, "a prior is below (1 - eps) * policy: noise mixed in more than once"
    assert noise_part.sum() == pytest.approx(eps, abs=1e-5)


def assert_non_root_priors_are_the_policy(engine: PuctSearch, b: int) -> None:
    """Every expanded node below the root of tree b has the index evaluator's softmax as its priors."""
    forest = engine.tree
    assert forest is not None
    expanded = [n for n in range(1, int(forest.n_nodes[b])) if forest.state[b, n] == EXPANDED]
    assert len(expanded) > 20, "precondition: a tree with many expanded nodes"
    for node in expanded:
        expected = softmax_over_empty(index_logits(GAME), board_at(engine, b, node))
        np.testing.assert_allclose(
            forest.prior[b, node], expected, rtol=1e-5, atol=1e-7, err_msg=f"node {node}"
        )


def test_noise_changes_the_root_priors_and_no_other_node_s() -> None:
    root = position([(4, 4), (5, 5)], [(4, 5), (3, 3)])
    engine = make_engine(evaluator_factory=index_evaluator(), num_simulations=200, dirichlet_epsilon=0.25)
    engine.search([root], SearchRequest(add_noise=True))
    forest = engine.tree
    assert forest is not None
    b = tree_of(engine, root)
    policy = softmax_over_empty(index_logits(GAME), root.board)
    prior = forest.prior[b, 0]
    assert np.abs(prior - policy).max() > 0.01
    assert prior.sum() == pytest.approx(1.0, abs=1e-5) and (prior[root.board != 0] == 0).all()
    assert_mixed_once(prior, policy, 0.25)
    assert_non_root_priors_are_the_policy(engine, b)


def test_without_noise_the_root_priors_are_the_evaluators_softmax() -> None:
    root = position([(4, 4), (5, 5)], [(4, 5), (3, 3)])
    engine = make_engine(evaluator_factory=index_evaluator(), num_simulations=50)
    engine.search([root])
    assert engine.tree is not None
    expected = softmax_over_empty(index_logits(GAME), root.board)
    np.testing.assert_allclose(engine.tree.prior[tree_of(engine, root), 0], expected, rtol=1e-5, atol=1e-7)


def test_noise_goes_into_the_kept_root_after_a_move_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = make_engine(evaluator_factory=index_evaluator(), num_simulations=300, dirichlet_alpha=0.3)
    seen = spy_on_roots(monkeypatch, engine)
    state = position(*FORCED)
    engine.search([state], SearchRequest(add_noise=True))
    for move in FORCED_MOVES:
        state.play(move)
    engine.search([state], SearchRequest(add_noise=True))
    b = tree_of(engine, state)
    assert seen[1]["visits"][b] > 100, "precondition: the kept subtree is large"
    policy = softmax_over_empty(index_logits(GAME), state.board)
    # The kept root arrives with the network's priors (it was not the start node before)...
    np.testing.assert_allclose(seen[1]["prior"][b], policy, rtol=1e-5, atol=1e-7)
    assert engine.tree is not None
    prior = engine.tree.prior[b, 0].copy()
    # ...and leaves noised, once.
    assert np.abs(prior - policy).max() > 0.01
    assert_mixed_once(prior, policy, 0.25)
    # The nodes under it, kept or new, are not noised.
    assert_non_root_priors_are_the_policy(engine, b)
    # Searching the same position again does not noise it again.
    engine.search([state], SearchRequest(add_noise=True))
    np.testing.assert_array_equal(engine.tree.prior[tree_of(engine, state), 0], prior)


# -- refusals and cleanup --------------------------------------------------------------------------


def test_close_drops_the_trees_and_the_service_keeps_its_one_evaluator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    engine = make_engine(evaluator_factory=recorder.factory, num_simulations=100)
    seen = spy_on_roots(monkeypatch, engine)
    state = position(*FORCED)
    engine.search([state])
    assert engine.tree is not None and recorder.made == 1
    engine.close()
    assert engine.tree is None
    for move in FORCED_MOVES:
        state.play(move)
    counts = engine.search([state]).visits
    assert recorder.made == 1  # the evaluator is the inference service's, made once
    assert seen[1]["visits"][tree_of(engine, state)] == 1  # and a fresh tree
    assert counts.sum() == 100


def test_the_same_seed_gives_the_same_noised_search() -> None:
    root = position([(4, 4)], [])
    runs = [
        make_engine(evaluator_factory=index_evaluator(), seed=s, num_simulations=100)
        .search([root], SearchRequest(add_noise=True))
        .visits
        for s in (3, 3, 4)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
