"""search=sequential refuses what it cannot search: a finished game, an evaluator that answers the
wrong number of rows, and config values out of their ranges (naming the key); the edges are accepted."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from framework.errors import ConfigError
from framework_plugins.gomoku.rules import GameState, Gomoku
from tests.mcts.test_sequential import GAME, Evaluator, Recorder, make_engine


def test_searching_a_finished_game_raises() -> None:
    recorder = Recorder()
    won = GameState.from_moves(GAME, [0, 9, 1, 10, 2, 11, 3, 12, 4])
    assert won.done
    draw = GameState.from_moves(Gomoku(3, 3), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert draw.done and draw.winner == 0
    with pytest.raises(ValueError, match="finished"):
        make_engine(evaluator_factory=recorder.factory).search([GAME.new_state(), won])
    with pytest.raises(ValueError, match="finished"):
        make_engine(Gomoku(3, 3), recorder.factory).search([draw])
    assert recorder.batches == []  # refused before anything was evaluated


def wrong_sizes(n_policies: int, n_values: int, after: int = 0) -> Callable[[], Evaluator]:
    """An evaluator that answers `after` calls right, then with extra/missing rows."""

    def make() -> Evaluator:
        calls = []

        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            calls.append(1)
            n = len(planes)
            extra = (n_policies, n_values) if len(calls) > after else (0, 0)
            return np.zeros((n + extra[0], 81), np.float32), np.zeros(n + extra[1], np.float32)

        return evaluate

    return make


@pytest.mark.parametrize(
    ("n_policies", "n_values", "after"),
    [(1, 1, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 3), (1, 0, 3)],
    ids=["both-extra", "a-policy-missing", "a-value-extra", "a-value-missing-later", "a-policy-extra-later"],
)
def test_an_evaluator_returning_the_wrong_batch_size_raises(
    n_policies: int, n_values: int, after: int
) -> None:
    engine = make_engine(evaluator_factory=wrong_sizes(n_policies, n_values, after), num_simulations=20)
    with pytest.raises(RuntimeError, match="the evaluator returned"):
        engine.search([GAME.new_state(), GameState.from_moves(GAME, [40])])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_simulations", 0),
        ("num_simulations", -5),
        ("c_puct", 0.0),
        ("c_puct", -1.0),
        ("dirichlet_epsilon", -0.1),
        ("dirichlet_epsilon", 1.5),
        ("fpu_value", -1.5),
        ("fpu_value", 2.0),
        ("fpu_value", 1.01),
        ("dirichlet_epsilon", 1.01),
        ("dirichlet_alpha", 0.0),
    ],
)
def test_the_constructor_refuses_bad_config_values_naming_the_key(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=rf"search\.{key}={value}") as error:
        make_engine(**{key: value})
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_simulations", 1),
        ("c_puct", 0.01),
        ("dirichlet_epsilon", 0.0),
        ("dirichlet_epsilon", 1.0),
        ("fpu_value", -1.0),
        ("fpu_value", 1.0),
        ("fpu_value", None),
    ],
)
def test_the_constructor_accepts_values_at_the_edges_of_their_ranges(key: str, value: object) -> None:
    engine = make_engine(**{"num_simulations": 1, key: value})
    assert engine.search([GAME.new_state()]).visits.sum() == 1
