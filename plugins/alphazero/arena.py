"""The player that plays by search in matches (`matches`: gates and evaluations)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework_plugins.boardgames import SearchEngine, SearchRequest

from .selfplay import MoveChoice


class SearchPlayer:
    """Plays by search (no noise): visit counts drawn from for the first moves, then greedy."""

    def __init__(
        self,
        name: str,
        engine: SearchEngine,
        rng: np.random.Generator,
        *,
        temperature_moves: int,
        simulations: int | None = None,
    ) -> None:
        self.name, self.engine, self.rng = name, engine, rng
        self.choice = MoveChoice(1.0, temperature_moves)
        self.simulations = engine.num_simulations if simulations is None else simulations
        """Simulations a move (the search's own unless given)."""

    def moves(self, states: list[Any]) -> list[int]:
        found = self.engine.search(states, SearchRequest(simulations=self.simulations))
        counts, chosen = found.visits, found.chosen_moves
        return [
            self.choice.pick(c, len(s.moves), self.rng, int(chosen[i]))
            for i, (c, s) in enumerate(zip(counts, states, strict=True))
        ]
