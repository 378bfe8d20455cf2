"""Fixed Gomoku opponents: legal moves, tactics, repeatability by seed, pure MCTS's strength, names."""

from __future__ import annotations

import pytest

from framework_plugins.gomoku.kernels import BLACK, WHITE
from framework_plugins.gomoku.opponents import Opponent, make_opponent
from framework_plugins.gomoku.rules import GameState, Gomoku

SMALL = Gomoku(6, 4)


def position(game: Gomoku, black: list[tuple[int, int]], white: list[tuple[int, int]]) -> GameState:
    """The position with these stones, reached by alternate moves (black first)."""
    assert len(white) <= len(black) <= len(white) + 1
    b, w = [game.from_xy(*c) for c in black], [game.from_xy(*c) for c in white]
    moves = [m for pair in zip(b, w, strict=False) for m in pair] + b[len(w) :]
    state = GameState.from_moves(game, moves)
    assert not state.done
    return state


def play_game(black: Opponent, white: Opponent, game: Gomoku) -> GameState:
    """A whole game; every move is checked legal before it is played."""
    state = game.new_state()
    while not state.done:
        player = black if state.to_play == BLACK else white
        action = player.act(state)
        assert isinstance(action, int)
        assert 0 <= action < game.n_actions and state.legal[action], f"{player.name} played {action}"
        state.play(action)
    return state


@pytest.mark.parametrize(
    ("black", "white", "game"),
    [
        ("random", "random", SMALL),
        ("heuristic", "random", SMALL),
        ("random", "heuristic", Gomoku(9, 5)),
        ("heuristic", "mcts200", SMALL),
        ("mcts200", "random", Gomoku(9, 5)),
        ("mcts", "heuristic", SMALL),
    ],
)
def test_opponents_play_only_legal_moves_over_whole_games(black: str, white: str, game: Gomoku) -> None:
    for seed in range(3):
        state = play_game(make_opponent(black, game, seed), make_opponent(white, game, seed + 10), game)
        assert state.done


def test_opponents_play_legal_moves_to_the_last_cell_of_a_small_board() -> None:
    # 3x3, three in a row: small enough that games often fill the board.
    game = Gomoku(3, 3)
    for name in ("random", "heuristic", "mcts50"):
        lengths = [
            len(play_game(make_opponent(name, game, seed), make_opponent(name, game, seed + 1), game).moves)
            for seed in range(5)
        ]
        assert 9 in lengths, f"precondition: a {name} game fills the board ({lengths})"


@pytest.mark.parametrize("mover", [BLACK, WHITE])
def test_heuristic_takes_its_win_before_blocking_the_opponents_four(mover: int) -> None:
    game = Gomoku(9, 5)
    own = [(1, 2), (2, 2), (3, 2), (4, 2)]  # the mover's four, blocked at (0, 2): it wins at (5, 2)
    other = [(3, 4), (3, 5), (3, 6), (3, 7)]  # the other side's open four: (3, 3) or (3, 8) wins
    if mover == BLACK:
        state = position(game, [*own, (8, 0)], [(0, 2), *other])
    else:
        state = position(game, [(0, 2), *other], own)
    assert state.to_play == mover
    for seed in range(3):
        assert make_opponent("heuristic", game, seed).act(state) == game.from_xy(5, 2)


@pytest.mark.parametrize("mover", [BLACK, WHITE])
def test_heuristic_blocks_the_opponents_four(mover: int) -> None:
    game = Gomoku(9, 5)
    four = [(2, 1), (3, 2), (4, 3), (5, 4)]  # diagonal, blocked at (1, 0): the only win is (6, 5)
    scattered = [(1, 0), (7, 1), (0, 6), (8, 8)]
    state = position(game, scattered, four) if mover == BLACK else position(game, [*four, (4, 7)], scattered)
    assert state.to_play == mover
    for seed in range(3):
        assert make_opponent("heuristic", game, seed).act(state) == game.from_xy(6, 5)


@pytest.mark.parametrize("name", ["random", "heuristic", "mcts100"])
def test_the_same_seed_plays_the_same_game(name: str) -> None:
    games = [
        play_game(make_opponent(name, SMALL, 7), make_opponent("random", SMALL, 3), SMALL).moves
        for _ in range(2)
    ]
    assert games[0] == games[1]


@pytest.mark.parametrize("name", ["random", "mcts100"])
def test_different_seeds_play_different_games(name: str) -> None:
    games = {
        tuple(play_game(make_opponent(name, SMALL, seed), make_opponent("random", SMALL, 3), SMALL).moves)
        for seed in range(4)
    }
    assert len(games) > 1


def test_pure_mcts_beats_random_in_most_games() -> None:
    won = 0
    for seed in range(10):
        mcts, rand = make_opponent("mcts", SMALL, seed), make_opponent("random", SMALL, 100 + seed)
        mcts_colour = BLACK if seed % 2 == 0 else WHITE
        state = play_game(mcts, rand, SMALL) if mcts_colour == BLACK else play_game(rand, mcts, SMALL)
        won += state.winner == mcts_colour
    assert won >= 8, f"pure MCTS won {won} of 10 games against random"


@pytest.mark.parametrize("mover", [BLACK, WHITE])
def test_pure_mcts_takes_a_win_in_one(mover: int) -> None:
    # 6x6, four in a row: the mover's X X X _ on row 1 (blocked at the left) wins at (4, 1). With
    # white to move, black's three on row 4 would win next move too: the win comes before the block.
    own, other = [(1, 1), (2, 1), (3, 1)], [(1, 4), (2, 4), (3, 4)]
    if mover == BLACK:
        state = position(SMALL, own, [(0, 1), *other[:2]])
    else:
        state = position(SMALL, [(0, 1), *other], own)
    assert state.to_play == mover
    for seed in range(3):
        assert make_opponent("mcts", SMALL, seed).act(state) == SMALL.from_xy(4, 1)


def test_mcts_name_sets_the_rollouts() -> None:
    assert make_opponent("mcts", SMALL, 0).rollouts == 1000  # type: ignore[attr-defined]
    assert make_opponent("mcts250", SMALL, 0).rollouts == 250  # type: ignore[attr-defined]
    assert make_opponent("mcts250", SMALL, 0).name == "mcts250"


@pytest.mark.parametrize("name", ["alpha-beta", "MCTS", "mcts-100", "randomly", ""])
def test_an_unknown_opponent_raises_naming_the_valid_choices(name: str) -> None:
    with pytest.raises(ValueError, match=r"random.*heuristic.*mcts.*alphabeta") as error:
        make_opponent(name, SMALL, 0)
    assert repr(name) in str(error.value)


def test_mcts_with_zero_rollouts_raises() -> None:
    with pytest.raises(ValueError, match="at least 1 rollout"):
        make_opponent("mcts0", SMALL, 0)
