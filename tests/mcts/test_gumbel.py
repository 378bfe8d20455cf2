"""search.root=gumbel: Gumbel-top-k moves at the root, sequential halving over them, the completed-Q
policy target and the halving's winner as the move (Danihelka et al. 2022; mctx's gumbel_muzero_policy)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from framework.errors import ConfigError
from framework_plugins.boardgames import SearchRequest
from framework_plugins.gomoku.rules import GameState
from framework_plugins.mcts.gumbel import considered_visits
from framework_plugins.mcts.puct import PuctSearch
from tests.mcts.test_search_values import TACTICS
from tests.mcts.test_sequential import (
    GAME,
    Evaluator,
    index_logits,
    make_engine,
    position,
    softmax_over_empty,
)

#: The cell a leaf's last move was played on (the planes' third plane marks it).
LAST_MOVE_PLANE = 2


def evaluator(logits: np.ndarray, value_after: dict[int, float] | None = None) -> Callable[[], Evaluator]:
    """Fixed logits; a leaf's value from its mover's view is `value_after[last move]` (else 0)."""

    def make() -> Evaluator:
        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(planes)
            values = np.zeros(n, dtype=np.float32)
            for i, p in enumerate(planes):
                last = int(p[LAST_MOVE_PLANE].argmax()) if p[LAST_MOVE_PLANE].any() else -1
                values[i] = (value_after or {}).get(last, 0.0)
            return np.tile(logits.astype(np.float32), (n, 1)), values

        return evaluate

    return make


def gumbel_engine(factory: Callable[[], Evaluator], **cfg: object) -> PuctSearch:
    return make_engine(evaluator_factory=factory, root="gumbel", **cfg)


def test_the_schedule_halves_the_considered_moves_phase_by_phase() -> None:
    # 4 moves, 10 simulations: one visit each, then the better two get the rest.
    assert considered_visits(4, 10).tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 3, 3]
    schedule = considered_visits(16, 64)
    assert len(schedule) == 64
    runs = np.unique(schedule, return_counts=True)[1].tolist()
    assert runs == [16] + [8] * 2 + [4] * 4 + [2] * 8  # 16, then 8, 4 and 2 moves, log2(16) phases
    assert considered_visits(1, 5).tolist() == [0, 1, 2, 3, 4]  # one move gets every simulation


def test_a_gumbel_root_spends_its_simulations_by_sequential_halving() -> None:
    engine = gumbel_engine(evaluator(index_logits(GAME)), num_simulations=10, gumbel_considered=4)
    found = engine.search([GAME.new_state()])
    counts = found.visits[0]
    # No noise: the 4 moves best by prior (the highest cells), then the best 2 of them by value.
    assert np.flatnonzero(counts).tolist() == [77, 78, 79, 80]
    assert counts[[77, 78, 79, 80]].tolist() == [1, 1, 4, 4]
    assert found.chosen_moves.tolist() == [80]


def test_sequential_halving_keeps_the_considered_move_whose_value_is_best() -> None:
    # Cell 77 has the lowest prior of the four considered, and leaves its opponent at -0.9.
    factory = evaluator(index_logits(GAME), value_after={77: -0.9})
    engine = gumbel_engine(factory, num_simulations=10, gumbel_considered=4)
    state = GAME.new_state()
    found = engine.search([state])
    assert found.visits[0][77] == 4 and found.chosen_moves[0] == 77
    policy = found.policy_targets[0]
    prior = softmax_over_empty(index_logits(GAME), state.board)
    assert policy.argmax() == 77 and policy[77] > 5 * prior[77]  # its mass moves to the good move
    assert policy.sum() == pytest.approx(1.0, abs=1e-5)


def test_the_policy_target_is_the_prior_where_every_move_is_worth_the_same() -> None:
    engine = gumbel_engine(evaluator(index_logits(GAME)), num_simulations=32)
    state = GameState.from_moves(GAME, [40, 41])
    found = engine.search([state])
    expected = softmax_over_empty(index_logits(GAME), state.board)
    np.testing.assert_allclose(found.policy_targets[0], expected, atol=1e-5)


def test_with_one_considered_move_the_root_plays_a_sample_of_the_policy() -> None:
    """Gumbel-max: with noise, the move is drawn from the policy, however few the simulations."""
    logits = np.full(GAME.n_actions, -50.0)
    logits[:3] = np.log([0.6, 0.3, 0.1])
    engine = gumbel_engine(evaluator(logits), num_simulations=2, gumbel_considered=1, seed=3)
    draws = []
    for _ in range(4):
        draws.append(engine.search([GAME.new_state()] * 500, SearchRequest(add_noise=True)).chosen_moves)
    chosen = np.concatenate(draws)
    frequencies = np.bincount(chosen, minlength=3)[:3] / len(chosen)
    np.testing.assert_allclose(frequencies, [0.6, 0.3, 0.1], atol=0.04)
    # Without noise the search is deterministic: the policy's best move.
    assert engine.search([GAME.new_state()] * 3).chosen_moves.tolist() == [0, 0, 0]


@pytest.mark.parametrize("name", list(TACTICS))
def test_a_gumbel_root_that_considers_every_move_solves_the_tactic(name: str) -> None:
    black, white, answer = TACTICS[name]
    engine = gumbel_engine(evaluator(np.zeros(GAME.n_actions)), num_simulations=200, gumbel_considered=81)
    found = engine.search([position(black, white)])
    assert GAME.to_xy(int(found.chosen_moves[0])) == answer


def test_each_search_starts_a_new_tree_and_counts_only_its_own_simulations() -> None:
    engine = gumbel_engine(evaluator(index_logits(GAME)), num_simulations=24)
    state = GAME.new_state()
    found = engine.search([state])
    first = found.visits[0]
    state.play(int(found.chosen_moves[0]))
    assert engine.search([state]).visits[0].sum() == first.sum() == 24


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_each_root_gets_its_own_simulations_and_noise(root: str) -> None:
    engine = make_engine(root=root, num_simulations=30, seed=1)
    states = [GAME.new_state(), GameState.from_moves(GAME, [40]), GameState.from_moves(GAME, [10])]
    counts = engine.search(
        states, SearchRequest(add_noise=[False, True, False], simulations=[5, 30, 12])
    ).visits
    assert counts.sum(axis=1).tolist() == [5, 30, 12]
    quiet = make_engine(root=root, num_simulations=30, seed=2)
    alone = quiet.search([states[0], states[2]], SearchRequest(simulations=[5, 12])).visits
    np.testing.assert_array_equal(counts[[0, 2]], alone)  # the roots without noise are searched as without


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        (
            "root",
            "gumbal",
            "search.root='gumbal' is not valid; choose one of puct, gumbel. Did you mean gumbel?",
        ),
        ("gumbel_considered", 0, "search.gumbel_considered=0 must be >= 1"),
        ("gumbel_c_scale", 0.0, "search.gumbel_c_scale=0 must be > 0"),
    ],
)
def test_bad_gumbel_settings_are_refused_by_name(key: str, value: object, said: str) -> None:
    with pytest.raises(ConfigError) as error:
        make_engine(**{key: value})
    assert str(error.value) == said
