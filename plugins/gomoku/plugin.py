"""The env plugin `env=gomoku`: the game's rules for search-based agents, and a gymnasium env
against a fixed opponent (evaluated against each of `eval_opponents`) for every other agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Optional

import numpy as np

from framework.errors import ConfigError, check_choice

from .config import COLOURS, GomokuConfig
from .env import EPISODE_STATS, GomokuEnv
from .kernels import RULES
from .opponents import Opponent, make_opponent
from .rules import Gomoku


class GomokuEnvPlugin:
    """Gomoku: n×n board, n in a row (freestyle or exact); rules for search, fixed opponents for the rest."""

    Config: ClassVar[type] = GomokuConfig

    def __init__(self, cfg: GomokuConfig) -> None:
        self.cfg = cfg
        check_choice("env.rule", cfg.rule, RULES)
        check_choice("env.colour", cfg.colour, COLOURS)
        if cfg.n_envs < 1:
            raise ConfigError(f"env.n_envs={cfg.n_envs} must be at least 1")
        try:
            self._game = Gomoku(cfg.board_size, cfg.n_in_row, cfg.rule)
        except ValueError as e:
            raise ConfigError(f"env.{e}") from None
        for key, names in (("env.opponent", [cfg.opponent]), ("env.eval_opponents", cfg.eval_opponents)):
            for name in names:
                try:
                    make_opponent(name, self._game, seed=0)
                except ValueError as e:
                    raise ConfigError(f"{key}: {e}") from None
        if not 0 <= cfg.eval_opening_stones <= self._game.n_actions // 4:
            raise ConfigError(
                f"env.eval_opening_stones={cfg.eval_opening_stones} must be from 0 to "
                f"{self._game.n_actions // 4} (a quarter of the {cfg.board_size}x{cfg.board_size} board)"
            )
        if len(set(cfg.eval_opponents)) != len(cfg.eval_opponents):
            raise ConfigError(f"env.eval_opponents={list(cfg.eval_opponents)} names an opponent twice")
        self.n_envs = cfg.n_envs

    @property
    def game(self) -> Gomoku:
        """The rules, for search-based agents."""
        return self._game

    @property
    def eval_variants(self) -> tuple[str, ...]:
        """One evaluation per opponent in `eval_opponents`."""
        return tuple(self.cfg.eval_opponents)

    def episode_stat_names(self) -> tuple[str, ...]:
        """What each game reports as it ends (`env._stats`)."""
        return EPISODE_STATS

    def opponent(self, name: str, *, seed: int) -> Opponent:
        """A fixed opponent by name: random, heuristic, mcts, mcts<N>, alphabeta, alphabeta<D>."""
        return make_opponent(name, self._game, seed)

    def opening(self, rng: np.random.Generator) -> list[int]:
        """A random opening of `eval_opening_stones` stones for an evaluation's pair of games."""
        return self._game.random_opening(rng, self.cfg.eval_opening_stones)

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: Optional[str] = None
    ) -> GomokuEnv:
        return GomokuEnv(
            self._game, self.cfg.opponent, seed=seed, colour=self.cfg.colour, render_mode=render_mode
        )

    def make_variant(self, variant: str, *, seed: int) -> GomokuEnv:
        """The env against the evaluation opponent `variant`, colours alternating."""
        return GomokuEnv(self._game, variant, seed=seed, colour="alternate")


if TYPE_CHECKING:
    from framework.contracts import VariantEnvPlugin
    from framework_plugins.boardgames import GameEnvPlugin

    _contract: type[GameEnvPlugin] = GomokuEnvPlugin
    _variant_contract: type[VariantEnvPlugin] = GomokuEnvPlugin
