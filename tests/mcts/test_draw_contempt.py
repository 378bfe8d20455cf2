"""search.draw_contempt: the root's player counts a draw as a loss of the contempt, at every depth of
the tree, from a network's draw probability and from a drawn end of the game alike; it plays for the
win over a sure draw; a tree is kept only for the same player to move."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from framework_plugins.boardgames import Evaluator
from framework_plugins.gomoku.rules import GameState, Gomoku
from tests.mcts.test_sequential import GAME, make_engine


def wdl_evaluator(
    value_of: Callable[[np.ndarray], float],
    draw_of: Callable[[np.ndarray], float],
    logits: np.ndarray | None = None,
    game: Gomoku = GAME,
) -> Callable[[], Evaluator]:
    """An evaluator with a draw probability (a win/draw/loss network's three arrays), and the same
    policy logits everywhere (uniform by default)."""
    policy = np.zeros(game.n_actions, np.float32) if logits is None else logits

    def make() -> Evaluator:
        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, ...]:
            n = len(planes)
            values = np.array([value_of(p) for p in planes], np.float32)
            draws = np.array([draw_of(p) for p in planes], np.float32)
            return np.tile(policy, (n, 1)), values, draws

        return evaluate

    return make


@pytest.mark.parametrize("root", ["puct", "gumbel"])
@pytest.mark.parametrize("contempt", [0.0, 0.25])
def test_a_sure_draw_anywhere_counts_the_contempt_against_the_roots_player(
    root: str, contempt: float
) -> None:
    # Every position is a sure draw (value 0, draw 1): the leaves at odd depths (the opponent to
    # move) and at even ones (the root's player to move) all count -contempt for the root's player,
    # whichever colour it is.
    sure_draw = wdl_evaluator(lambda p: 0.0, lambda p: 1.0)
    engine = make_engine(evaluator_factory=sure_draw, num_simulations=60, root=root, draw_contempt=contempt)
    found = engine.search([GAME.new_state(), GameState.from_moves(GAME, [40])])
    tree = engine.tree
    assert tree is not None and (tree.n_nodes[:2] > 30).all()  # leaves at many depths were evaluated
    np.testing.assert_allclose(found.values, [-contempt, -contempt], atol=1e-6)


def test_without_contempt_a_networks_draws_change_nothing() -> None:
    value_of = lambda p: float(np.tanh(0.1 * p[0].sum() - 0.13 * p[1].sum()))  # noqa: E731
    with_draws = make_engine(evaluator_factory=wdl_evaluator(value_of, lambda p: 0.6), num_simulations=80)
    without = make_engine(evaluator_factory=wdl_evaluator(value_of, lambda p: 0.0), num_simulations=80)
    states = [GameState.from_moves(GAME, [40, 41])]
    drawn, undrawn = with_draws.search(states), without.search(states)
    np.testing.assert_array_equal(drawn.visits, undrawn.visits)
    np.testing.assert_allclose(drawn.values, undrawn.values, atol=1e-6)


def test_a_drawn_end_of_the_game_counts_the_contempt() -> None:
    # 3x3, three in a row: X O X / X O O / O X X less its last cell; filling it draws.
    game = Gomoku(3, 3)
    draw = GameState.from_moves(game, [0, 1, 2, 4, 3, 5, 7, 6])
    engine = make_engine(game, num_simulations=30, draw_contempt=0.4)
    found = engine.search([draw])
    assert found.visits[0, 8] == 30
    # The root's own evaluation (0) is one visit, the drawn end the other 30.
    np.testing.assert_allclose(found.values, [30 * -0.4 / 31], atol=1e-6)
    # Two plies ahead: white must take cell 6 (cell 8 lets black complete the left column), and
    # black's reply draws: the draw is the root's player's loss of 0.4 there too.
    engine = make_engine(game, num_simulations=200, draw_contempt=0.4)
    counts = engine.search([GameState.from_moves(game, [0, 1, 2, 4, 3, 5, 7])]).visits
    assert counts[0].argmax() == 6
    tree = engine.tree
    assert tree is not None
    child = tree.children[0, 0, 6]
    # The child's value from white's view: its own evaluation (0), then the drawn end below it.
    n = tree.visits[0, child]
    np.testing.assert_allclose(tree.value_sum[0, child] / n, -0.4 * (n - 1) / n, atol=1e-6)


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_with_contempt_the_root_plays_for_the_win_over_a_sure_draw(root: str) -> None:
    # Black to move on the empty board. Black's stone in the centre is a sure draw (value 0, draw 1);
    # every other move leads to a position a little worse for black (0.1 for white to move, no
    # draws). Without contempt the draw is black's best move; with 0.3 a draw is worth -0.3 to
    # black, the others -0.1. The policy favours the centre (a Gumbel root considers it, and must
    # turn from it).
    centre = 40
    logits = np.zeros(GAME.n_actions, np.float32)
    logits[centre] = 1.0

    def black_holds_centre(planes: np.ndarray) -> bool:
        black = 0 if planes[3].all() else 1  # planes 0 and 1: the mover's stones, the other's
        return bool(planes[black, centre // 9, centre % 9])

    def value_of(planes: np.ndarray) -> float:
        if black_holds_centre(planes):
            return 0.0
        return -0.1 if planes[3].all() else 0.1  # plane 3: black to move

    def draw_of(planes: np.ndarray) -> float:
        return 1.0 if black_holds_centre(planes) else 0.0

    evaluator = wdl_evaluator(value_of, draw_of, logits)
    chosen = {}
    for contempt in (0.0, 0.3):
        engine = make_engine(
            evaluator_factory=evaluator, num_simulations=200, root=root, draw_contempt=contempt
        )
        found = engine.search([GAME.new_state()])
        chosen[contempt] = int(found.chosen_moves[0]) if root == "gumbel" else int(found.visits[0].argmax())
    assert chosen[0.0] == centre
    assert chosen[0.3] != centre


def test_with_contempt_a_tree_is_kept_for_the_same_player_to_move_only() -> None:
    # The tree of the last search is kept two moves on (the same player's view of a draw), not one.
    # A policy that follows 41 then 30, so that the searched tree holds both.
    logits = np.zeros(GAME.n_actions, np.float32)
    logits[[41, 30]] = 5.0, 4.0
    evaluator = wdl_evaluator(lambda p: 0.0, lambda p: 0.5, logits)

    def searched_after(moves: list[int], contempt: float) -> int:
        engine = make_engine(evaluator_factory=evaluator, num_simulations=100, draw_contempt=contempt)
        state = GameState.from_moves(GAME, [40])
        engine.search([state])
        for move in moves:
            state.play(move)
        before = engine.simulations
        engine.search([state])
        return engine.simulations - before

    assert searched_after([41], 0.0) < 100 and searched_after([41, 30], 0.0) < 100
    assert searched_after([41], 0.2) == 100  # the other player's view: searched afresh
    assert searched_after([41, 30], 0.2) < 100  # the same player's: its subtree kept
