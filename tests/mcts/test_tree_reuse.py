"""Subtree reuse: a game's next search starts from the subtree under the moves since its last, its
statistics kept; a new game, a shorter one or one without reuse starts a fresh tree; games keep their
own subtrees whatever their order or number."""

from __future__ import annotations

import numpy as np
import pytest

from framework_plugins.gomoku.rules import GameState
from tests.mcts.test_sequential import (
    FORCED,
    FORCED_MOVES,
    GAME,
    child,
    child_visits,
    make_engine,
    most_visited_line,
    position,
    spy_on_roots,
    tree_of,
)


def test_reuse_keeps_the_grandchild_s_statistics_and_counts_its_visits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 400
    engine = make_engine(num_simulations=n)
    seen = spy_on_roots(monkeypatch, engine)
    state = position(*FORCED)
    counts = engine.search([state]).visits
    b = tree_of(engine, state)
    move = int(counts[0].argmax())
    reply = int(child_visits(engine, b, child(engine, b, 0, move)).argmax())
    assert (move, reply) == FORCED_MOVES
    grandchild = child(engine, b, child(engine, b, 0, move), reply)
    assert engine.tree is not None
    kept_visits = int(engine.tree.visits[b, grandchild])
    kept_children = child_visits(engine, b, grandchild)
    kept_prior = engine.tree.prior[b, grandchild].copy()
    assert kept_visits > 100, "precondition: the forced line gets most visits"

    state.play(move)
    state.play(reply)
    before = engine.simulations
    counts = engine.search([state]).visits
    b = tree_of(engine, state)
    assert seen[1]["visits"][b] == kept_visits
    np.testing.assert_array_equal(seen[1]["children"][b], kept_children)
    np.testing.assert_array_equal(seen[1]["prior"][b], kept_prior)
    assert counts.sum() == n
    assert engine.simulations - before == n - (kept_visits - 1)
    assert (counts[0] >= kept_children).all()


def test_without_reuse_the_tree_restarts_after_a_move(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 400
    engine = make_engine(num_simulations=n, reuse_tree=False)
    seen = spy_on_roots(monkeypatch, engine)
    state = position(*FORCED)
    engine.search([state])
    for move in FORCED_MOVES:
        state.play(move)
    before = engine.simulations
    counts = engine.search([state]).visits
    b = tree_of(engine, state)
    assert seen[1]["visits"][b] == 1  # just expanded
    assert not seen[1]["children"][b].any()
    assert counts.sum() == n and engine.simulations - before == n


def test_a_new_game_resets_its_tree_and_the_continued_game_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 400
    engine = make_engine(num_simulations=n)
    seen = spy_on_roots(monkeypatch, engine)
    continued, replaced = position(*FORCED), position([(4, 4), (5, 5)], [(4, 5)])
    engine.search([continued, replaced])
    for move in FORCED_MOVES:
        continued.play(move)
    # The second game is replaced by new ones whose moves do not extend it: another opening, then
    # an empty board.
    for i, new_game in enumerate((GameState.from_moves(GAME, [40, 41, 30]), GAME.new_state())):
        before = engine.simulations
        counts = engine.search([continued, new_game]).visits
        kept, fresh = tree_of(engine, continued), tree_of(engine, new_game)
        assert seen[-1]["visits"][fresh] == 1 and not seen[-1]["children"][fresh].any()
        # The continued game's subtree is kept (the second time, it is the same root again).
        kept_visits = int(seen[-1]["visits"][kept])
        assert kept_visits > 100 if i == 0 else kept_visits == n + 1
        assert counts.sum(axis=1).tolist() == [n, n]
        assert engine.simulations - before == n + n - (kept_visits - 1)


def test_a_larger_batch_later_keeps_the_subtrees_of_the_games_before(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 400
    engine = make_engine(num_simulations=n)
    seen = spy_on_roots(monkeypatch, engine)
    state = position(*FORCED)
    engine.search([state])
    move, reply, kept_visits = most_visited_line(engine, state)
    state.play(move)
    state.play(reply)
    others = [GAME.new_state(), GameState.from_moves(GAME, [40])]
    counts = engine.search([*others, state]).visits
    assert counts.sum(axis=1).tolist() == [n, n, n]
    assert seen[1]["visits"][tree_of(engine, state)] == kept_visits
    assert [seen[1]["visits"][tree_of(engine, s)] for s in others] == [1, 1]


def test_games_with_the_same_history_each_keep_their_own_subtree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Self-play starts every game from the same position: each game, passed in the same place and
    # extending its own last root, keeps the subtree its own search built.
    n = 400
    engine = make_engine(num_simulations=n)
    seen = spy_on_roots(monkeypatch, engine)
    games = [position(*FORCED) for _ in range(3)]
    engine.search(games)
    assert engine.tree is not None
    kept = []
    for b in range(3):
        grandchild = child(engine, b, child(engine, b, 0, FORCED_MOVES[0]), FORCED_MOVES[1])
        kept.append(int(engine.tree.visits[b, grandchild]))
    assert min(kept) > 100, "precondition: the forced line gets most visits in every tree"
    for game in games:
        for move in FORCED_MOVES:
            game.play(move)
    before = engine.simulations
    counts = engine.search(games).visits
    assert counts.sum(axis=1).tolist() == [n, n, n]
    assert sorted(int(seen[1]["visits"][b]) for b in range(3)) == sorted(kept)
    assert engine.simulations - before == sum(n - (v - 1) for v in kept)


def test_a_shorter_game_is_a_new_game(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = make_engine(num_simulations=100)
    seen = spy_on_roots(monkeypatch, engine)
    engine.search([GameState.from_moves(GAME, [40, 41, 42])])
    state = GameState.from_moves(GAME, [40, 41])
    counts = engine.search([state]).visits
    assert seen[1]["visits"][tree_of(engine, state)] == 1 and counts.sum() == 100


def test_games_passed_in_another_order_keep_their_subtrees(monkeypatch: pytest.MonkeyPatch) -> None:
    # The module's contract: a root is searched in the tree it follows from, whatever its place.
    n = 400
    engine = make_engine(num_simulations=n)
    seen = spy_on_roots(monkeypatch, engine)
    first, second = position(*FORCED), position(*FORCED)
    second.play(FORCED_MOVES[0])
    engine.search([first, second])
    lines = [most_visited_line(engine, state) for state in (first, second)]
    assert lines[0][2] > 100 and lines[1][2] > 1, "precondition: kept subtrees with more than a leaf"
    for state, (move, reply, _) in zip((first, second), lines, strict=True):
        state.play(move)
        state.play(reply)
    counts = engine.search([second, first]).visits
    assert counts.sum(axis=1).tolist() == [n, n]
    assert seen[1]["visits"][tree_of(engine, first)] == lines[0][2]
    assert seen[1]["visits"][tree_of(engine, second)] == lines[1][2]
