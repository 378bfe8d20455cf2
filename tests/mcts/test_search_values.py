"""The search's tactics and values: wins found without the network, values backed up from each side's
view, and first-play urgency."""

from __future__ import annotations

import numpy as np
import pytest

from framework_plugins.gomoku.kernels import BLACK, WHITE, winning_move, wins
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.gomoku.threats import forced_win
from tests.mcts.test_sequential import FORCED, GAME, Recorder, has_line, make_engine, position

# -- tactics and values ----------------------------------------------------------------------------

TACTICS = {
    # name: (black, white, the move that must be chosen)
    "black wins on a row": ([(1, 2), (2, 2), (3, 2), (4, 2)], [(0, 2), (6, 6), (2, 7), (7, 1)], (5, 2)),
    "white wins on a column": (
        [(6, 2), (1, 1), (2, 7), (4, 4), (8, 8)],
        [(6, 3), (6, 4), (6, 5), (6, 6)],
        (6, 7),
    ),
    "black wins in the gap of a diagonal": (
        [(1, 1), (2, 2), (4, 4), (5, 5)],
        [(0, 8), (7, 1), (8, 3), (3, 6)],
        (3, 3),
    ),
    "white wins on an anti-diagonal to the edge": (
        [(0, 0), (1, 3), (2, 0), (7, 7), (3, 3)],
        [(8, 4), (7, 5), (6, 6), (5, 7)],
        (4, 8),
    ),
    "black blocks a four at the edge": (
        [(5, 0), (7, 2), (8, 8), (2, 2)],
        [(0, 6), (1, 6), (2, 6), (3, 6)],
        (4, 6),
    ),
    "white blocks a diagonal four": (
        [(2, 1), (3, 2), (4, 3), (5, 4), (4, 7)],
        [(1, 0), (7, 1), (0, 6), (8, 8)],
        (6, 5),
    ),
    "black blocks the gap of a four": (
        [(0, 0), (8, 0), (8, 8), (4, 0)],
        [(1, 5), (2, 5), (4, 5), (5, 5)],
        (3, 5),
    ),
    "black wins rather than blocks": (
        [(1, 2), (2, 2), (3, 2), (4, 2), (8, 0)],
        [(0, 2), (3, 4), (3, 5), (3, 6), (3, 7)],
        (5, 2),
    ),
    "white wins rather than blocks": (
        [(0, 2), (3, 4), (3, 5), (3, 6), (3, 7)],
        [(1, 2), (2, 2), (3, 2), (4, 2)],
        (5, 2),
    ),
}


def test_the_tactics_are_what_they_say() -> None:
    """The answer wins at once; or the opponent's only winning cell is the answer, and the mover has none."""
    for name, (black, white, answer) in TACTICS.items():
        state = position(black, white)
        mover, a = state.to_play, GAME.from_xy(*answer)
        assert mover == (BLACK if name.startswith("black") else WHITE), name
        opponent_wins = {
            c for c in np.flatnonzero(state.board == 0) if wins(state.board, c, -mover, GAME.params)
        }
        if "wins" in name:
            assert wins(state.board, a, mover, GAME.params), name
            assert bool(opponent_wins) == ("rather than blocks" in name), name
        else:
            assert winning_move(state.board, mover, GAME.params) == -1, name
            assert opponent_wins == {a}, name


@pytest.mark.parametrize("name", list(TACTICS))
def test_the_uniform_evaluator_solves_the_tactic_within_a_small_budget(name: str) -> None:
    black, white, answer = TACTICS[name]
    state = position(black, white)
    counts = make_engine(num_simulations=200).search([state]).visits[0]
    assert counts.argmax() == GAME.from_xy(*answer), f"{name}: chose {GAME.to_xy(int(counts.argmax()))}"
    assert counts[GAME.from_xy(*answer)] > 0.5 * 200


def test_tactics_are_solved_together_in_one_batch() -> None:
    states = [position(b, w) for b, w, _ in TACTICS.values()]
    counts = make_engine(num_simulations=200).search(states).visits
    chosen = [GAME.to_xy(int(a)) for a in counts.argmax(axis=1)]
    assert chosen == [answer for _, _, answer in TACTICS.values()]


@pytest.mark.parametrize("name", [n for n in TACTICS if "wins" in n])
def test_a_root_whose_mover_wins_at_once_is_worth_nearly_plus_one(name: str) -> None:
    black, white, _ = TACTICS[name]
    engine = make_engine(num_simulations=400)
    found = engine.search([position(black, white)])
    assert found.values[0] > 0.8


@pytest.mark.parametrize(
    ("black", "white"),
    [
        # Black to move, white has an open four on row 4: whatever black does, white wins.
        ([(0, 0), (8, 0), (0, 8), (8, 8)], [(2, 4), (3, 4), (4, 4), (5, 4)]),
        # White to move, black has two separate fours (each blocked at one end).
        (
            [(1, 1), (2, 1), (3, 1), (4, 1), (7, 3), (7, 4), (7, 5), (7, 6)],
            [(0, 1), (7, 2), (0, 8), (8, 8), (2, 6), (4, 6), (2, 8)],
        ),
    ],
    ids=["black-faces-an-open-four", "white-faces-two-fours"],
)
def test_a_root_whose_mover_cannot_stop_a_win_is_worth_nearly_minus_one(
    black: list[tuple[int, int]], white: list[tuple[int, int]]
) -> None:
    state = position(black, white)
    assert winning_move(state.board, state.to_play, GAME.params) == -1, "precondition: no win for the mover"
    engine = make_engine(num_simulations=400)
    found = engine.search([state])
    assert found.values[0] < -0.9


def test_root_values_are_from_the_view_of_each_roots_player_to_move() -> None:
    # A network that says black is ahead by 0.5 in every position (from the mover's view: +0.5 when
    # black is to move, -0.5 when white is); nothing ends within the budget.
    recorder = Recorder(value_of=lambda planes: 0.5 if planes[3].all() else -0.5)
    engine = make_engine(evaluator_factory=recorder.factory, num_simulations=40)
    found = engine.search(
        [GAME.new_state(), GameState.from_moves(GAME, [40]), GameState.from_moves(GAME, [40, 41])]
    )
    np.testing.assert_allclose(found.values, [0.5, -0.5, 0.5], atol=1e-6)


def test_terminal_leaves_are_backed_up_without_the_evaluator() -> None:
    # 3x3, three in a row: one empty cell left, and black's move there completes the top row.
    game = Gomoku(3, 3)
    win = GameState.from_moves(game, [0, 3, 2, 4, 5, 7, 6, 8])
    # X O X / X O O / O X X less its last cell: filling it draws.
    draw = GameState.from_moves(game, [0, 1, 2, 4, 3, 5, 7, 6])
    recorder = Recorder(game)
    engine = make_engine(game, recorder.factory, num_simulations=30)
    found = engine.search([win, draw])
    counts = found.visits
    assert len(recorder.positions) == 2  # the two roots, nothing else
    assert counts[0, 1] == 30 and counts[1, 8] == 30
    # The roots' own evaluations (0) count as one visit each.
    np.testing.assert_allclose(found.values, [30 / 31, 0.0], atol=1e-6)


def test_the_evaluator_never_sees_a_finished_position() -> None:
    recorder = Recorder()
    engine = make_engine(evaluator_factory=recorder.factory, num_simulations=200, detect_wins=False)
    engine.search([position(b, w) for b, w, _ in TACTICS.values()])
    positions = recorder.positions
    assert len(positions) > 100
    for planes in positions:
        assert not has_line(planes[0] > 0, 5) and not has_line(planes[1] > 0, 5)


def test_a_leaf_where_the_mover_wins_at_once_is_scored_without_the_evaluator() -> None:
    def mover_can_win(planes: np.ndarray) -> bool:
        board = (planes[0] - planes[1]).astype(np.int8).ravel()
        return bool(winning_move(board, 1, GAME.params) >= 0)

    roots = [position(*FORCED), position([(4, 4), (5, 5), (6, 6)], [(4, 5), (3, 3)])]
    recorder = Recorder()
    make_engine(evaluator_factory=recorder.factory, num_simulations=300).search(roots)
    first, rest = recorder.batches[0], np.concatenate(recorder.batches[1:])
    assert len(first) == len(roots) and len(rest) > 100
    assert not any(mover_can_win(p) for p in rest)
    # Without win detection such leaves go to the evaluator.
    recorder = Recorder()
    make_engine(evaluator_factory=recorder.factory, num_simulations=300, detect_wins=False).search(roots)
    assert any(mover_can_win(p) for p in np.concatenate(recorder.batches[1:]))


@pytest.mark.parametrize(("fpu_value", "most_singletons"), [(0.0, None), (None, 10)])
def test_a_side_that_is_behind_does_not_spread_its_visits_over_every_move(
    fpu_value: float | None, most_singletons: int | None
) -> None:
    """Every position the root's side reaches is worth -0.7 to it, and the policy favours three
    moves. With unvisited moves worth 0 (a draw), each looks better than any visited one: the search
    gives one visit to move after move (the play page saw 39 of 100). KataGo's first-play urgency (the
    parent's value less a reduction) keeps them below the visited ones."""
    favoured = np.array([10, 20, 30])

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits = np.zeros((len(planes), GAME.n_actions), np.float32)
        logits[:, favoured] = 2.0
        return logits, np.full(len(planes), 0.7, np.float32)  # good for the side to move at a leaf

    engine = make_engine(evaluator_factory=lambda: evaluate, num_simulations=100, fpu_value=fpu_value)
    counts = engine.search([GameState.from_moves(GAME, [40])]).visits[0]
    singletons = int((counts == 1).sum())
    if most_singletons is None:
        assert singletons > 60, counts  # the failure the option exists for
    else:
        assert singletons <= most_singletons, counts


# -- forced blocks ---------------------------------------------------------------------------------


def wins_to_stop(planes: np.ndarray, game: Gomoku = GAME) -> int:
    """How many cells win at once for the opponent of the player to move in these planes."""
    board = (planes[0] - planes[1]).astype(np.int8).ravel()  # the mover +1, the opponent -1
    return sum(bool(wins(board, int(c), -1, game.params)) for c in np.flatnonzero(board == 0))


@pytest.mark.parametrize("root", ["puct", "gumbel"])
@pytest.mark.parametrize("name", [n for n in TACTICS if " blocks " in n and "rather" not in n])
def test_with_forced_blocks_a_four_is_blocked_with_every_simulation(root: str, name: str) -> None:
    black, white, answer = TACTICS[name]
    engine = make_engine(num_simulations=50, forced_blocks=True, root=root)
    found = engine.search([position(black, white)])
    counts = found.visits[0]
    block = GAME.from_xy(*answer)
    assert counts[block] == counts.sum() == 50
    assert found.policy_targets[0][block] == 1.0
    if root == "gumbel":
        assert found.chosen_moves[0] == block


def test_with_forced_blocks_the_evaluator_never_sees_two_wins_to_stop_and_blocks_come_first() -> None:
    # White to move, with an open three on row 4: one move makes an open four, two wins to stop.
    open_three = position([(0, 0), (8, 0), (0, 8), (8, 8)], [(3, 4), (4, 4), (5, 4)])
    roots = [position(*FORCED), open_three, GAME.new_state()]
    seen = {}
    for forced in (False, True):
        recorder = Recorder()
        engine = make_engine(evaluator_factory=recorder.factory, num_simulations=400, forced_blocks=forced)
        engine.search(roots)
        seen[forced] = [wins_to_stop(p) for p in np.concatenate(recorder.batches[1:])]
        if forced:  # every node that must block spends its visits on the block alone
            tree = engine.tree
            assert tree is not None
            assert (tree.forced >= 0).sum() >= 2  # the FORCED line: a block, then its reply's
            for b in range(tree.n_trees):
                for node in np.flatnonzero(tree.forced[b, : tree.n_nodes[b]] >= 0):
                    kids = tree.children[b, node]
                    visited = [a for a in np.flatnonzero(kids >= 0) if tree.visits[b, kids[a]] > 0]
                    assert visited in ([], [tree.forced[b, node]])
    assert max(seen[True]) <= 1 < max(seen[False])  # two wins to stop: lost, without the network


# -- forced wins -----------------------------------------------------------------------------------

# Black to move: (4, 1) is a four on row 1 and an open three on column 4, a win two fours ahead
# that no single move shows (tests/gomoku/test_threats.py).
FOUR_THREE = ([(1, 1), (2, 1), (3, 1), (4, 2), (4, 3)], [(0, 1), (8, 8), (8, 7), (0, 8), (7, 8)])


def forced_for_mover(planes: np.ndarray, game: Gomoku = GAME) -> bool:
    """Whether the player to move in these planes wins by continuous fours."""
    board = (planes[0] - planes[1]).astype(np.int8).ravel()  # the mover +1, the opponent -1
    return forced_win(board, 1, game.params) >= 0


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_with_forced_wins_a_root_plays_its_win_by_fours_with_every_simulation(root: str) -> None:
    state = position(*FOUR_THREE)
    win = forced_win(state.board.copy(), state.to_play, GAME.params)
    assert win == GAME.from_xy(4, 1) and winning_move(state.board, state.to_play, GAME.params) == -1
    engine = make_engine(num_simulations=64, forced_wins=True, root=root)
    found = engine.search([state])
    counts = found.visits[0]
    assert counts[win] == counts.sum() == 64
    assert found.policy_targets[0][win] == 1.0
    if root == "gumbel":
        assert found.chosen_moves[0] == win
    # Without the solver the uniform search spreads its visits.
    counts = make_engine(num_simulations=64, root=root).search([state]).visits[0]
    assert counts[win] < 32


def test_with_forced_wins_the_evaluator_never_sees_a_won_position_and_the_search_defends() -> None:
    # Black to move against white's open three on row 4: all but two moves let white make an open
    # four; black has no four of its own.
    black = [(0, 0), (8, 0), (0, 8), (8, 2)]
    defend = position(black, [(3, 4), (4, 4), (5, 4)])
    blocks = {GAME.from_xy(2, 4), GAME.from_xy(6, 4)}
    roots = [defend, position(*FOUR_THREE), GAME.new_state()]
    seen = {}
    for solver in (False, True):
        recorder = Recorder()
        engine = make_engine(evaluator_factory=recorder.factory, num_simulations=300, forced_wins=solver)
        found = engine.search(roots)
        counts = found.visits
        seen[solver] = sum(forced_for_mover(p) for p in np.concatenate(recorder.batches[1:]))
        if solver:
            assert int(counts[0].argmax()) in blocks
            assert found.values[1] > 0.5
            tree = engine.tree
            assert tree is not None
            # Each of the defender's moves that leaves white its win is a lost leaf, visited once.
            node = tree.children[0, 0]
            for a in np.flatnonzero(node >= 0):
                board = defend.board.copy()
                board[a] = BLACK
                if forced_win(board, WHITE, GAME.params) >= 0:
                    assert tree.terminal_value[0, node[a]] == -1.0 and tree.visits[0, node[a]] <= 2, a
    assert seen[True] == 0 < seen[False]
