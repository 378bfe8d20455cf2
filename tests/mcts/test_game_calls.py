"""The game's rules as the search calls them: C kernels by address, and the solver a search option
needs."""

from __future__ import annotations

import pytest

from framework.errors import ConfigError
from framework_plugins.gomoku.rules import Gomoku
from tests.mcts.test_sequential import GAME, make_engine


def test_the_games_kernels_are_called_by_address_and_anything_else_is_refused() -> None:
    from framework_plugins.gomoku.kernels import apply_move_c, encode_c, winning_move_c
    from framework_plugins.gomoku.threats import forced_win_c
    from framework_plugins.mcts.game_calls import game_kernels

    kernels = game_kernels(Gomoku(9, 5))
    assert kernels[:4] == (
        apply_move_c.address,
        winning_move_c.address,
        encode_c.address,
        forced_win_c.address,
    )

    class PythonRules:
        apply_move = staticmethod(lambda *args: 0)
        winning_move = winning_move_c
        encode = encode_c

    with pytest.raises(TypeError, match="is not a C function"):
        game_kernels(PythonRules())


def test_forced_wins_on_a_game_without_a_solver_is_refused_in_one_line() -> None:
    class NoSolver:
        """Gomoku's rules less its forced_win solver."""

        def __getattr__(self, name: str) -> object:
            if name == "forced_win":
                raise AttributeError(name)
            return getattr(GAME, name)

    game = NoSolver()
    from framework_plugins.mcts.game_calls import game_kernels

    assert game_kernels(game).forced_win == 0
    make_engine(game, forced_wins=False)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^search.forced_wins=true needs a game with a forced_win") as e:
        make_engine(game, forced_wins=True)  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and "forced_wins=false" in str(e.value)
