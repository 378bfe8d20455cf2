"""Matches between players (a network with search, a fixed opponent), games played side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from framework.contracts import SearchEngine

from .selfplay import MoveChoice


class Player(Protocol):
    name: str

    def moves(self, states: list[Any]) -> list[int]: ...


class SearchPlayer:
    """Plays by search (no noise): visit counts drawn from for the first moves, then greedy."""

    def __init__(
        self, name: str, engine: SearchEngine, rng: np.random.Generator, *, temperature_moves: int
    ) -> None:
        self.name, self.engine, self.rng = name, engine, rng
        self.choice = MoveChoice(1.0, temperature_moves)

    def moves(self, states: list[Any]) -> list[int]:
        counts = self.engine.search(states, add_noise=False)
        return [self.choice.pick(c, len(s.moves), self.rng) for c, s in zip(counts, states, strict=True)]


class FixedPlayer:
    """A fixed opponent (random, heuristic, pure MCTS): one `act` per game."""

    def __init__(self, opponent: Any) -> None:
        self.name, self.opponent = opponent.name, opponent

    def moves(self, states: list[Any]) -> list[int]:
        return [int(self.opponent.act(s)) for s in states]


@dataclass
class MatchResult:
    """Results from the first player's view."""

    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)

    def elo_difference(self) -> float:
        """The Elo difference the score implies, kept finite (half a game's prior each way)."""
        score = (self.wins + 0.5 * self.draws + 0.5) / (self.games + 1)
        return -400.0 * math.log10(1.0 / score - 1.0)

    def metrics(self, prefix: str) -> dict[str, float]:
        n = max(self.games, 1)
        return {
            f"{prefix}/score": self.score,
            f"{prefix}/win_rate": self.wins / n,
            f"{prefix}/draw_rate": self.draws / n,
            f"{prefix}/loss_rate": self.losses / n,
            f"{prefix}/elo_diff": self.elo_difference(),
        }


def play_match(game: Any, first: Player, second: Player, games: int) -> MatchResult:
    """`games` games side by side, `first` black in the even ones; results from `first`'s view."""
    states = [game.new_state() for _ in range(games)]
    colour = [1 if g % 2 == 0 else -1 for g in range(games)]  # first's colour in each game
    result = MatchResult()
    while True:
        live = [g for g in range(games) if not states[g].done]
        if not live:
            return result
        for player, mine in ((first, True), (second, False)):
            turn = [g for g in live if not states[g].done and (states[g].to_play == colour[g]) == mine]
            if not turn:
                continue
            for g, move in zip(turn, player.moves([states[g] for g in turn]), strict=True):
                states[g].play(move)
                if states[g].done:
                    winner = states[g].winner * colour[g]
                    if winner > 0:
                        result.wins += 1
                    elif winner < 0:
                        result.losses += 1
                    else:
                        result.draws += 1
