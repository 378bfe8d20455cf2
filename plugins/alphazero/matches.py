"""Matches between players of a two-player board game (the `BoardGame` contract), games side by side.

A player answers a list of positions with a move for each (a search answers them in one call).
A match of `games` games alternates colours; given an `opening` (a game's random openings), the
two games of each pair start from the same opening with colours swapped, so that no opening
favours either player and no two pairs repeat.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class MatchStopped(Exception):
    """A match given up before its end because its `should_stop` said so (the run is stopping)."""


class Player(Protocol):
    name: str

    def moves(self, states: list[Any]) -> list[int]: ...


class FixedPlayer:
    """A fixed opponent (random, heuristic, pure MCTS, alpha-beta): one `act` per game."""

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


def play_match(
    game: Any,
    first: Player,
    second: Player,
    games: int,
    *,
    opening: Callable[[np.random.Generator], list[int]] | None = None,
    seed: int = 0,
    should_stop: Callable[[], bool] | None = None,
) -> MatchResult:
    """`games` games side by side, `first` black in the even ones; results from `first`'s view.
    With `opening`, games 2k and 2k+1 start from the k-th of its openings (drawn by `seed`).
    `should_stop` is asked before each player's turn: True gives the match up (MatchStopped), so a
    run asked to stop during an evaluation stops within a move, not at the match's end."""
    rng = np.random.default_rng(seed)
    starts = [opening(rng) if opening is not None else [] for _ in range((games + 1) // 2)]
    states = [game.new_state() for _ in range(games)]
    for g, state in enumerate(states):
        for move in starts[g // 2]:
            state.play(move)
    colour = [1 if g % 2 == 0 else -1 for g in range(games)]  # first's colour in each game
    result = MatchResult()
    while True:
        live = [g for g in range(games) if not states[g].done]
        if not live:
            return result
        for player, mine in ((first, True), (second, False)):
            if should_stop is not None and should_stop():
                raise MatchStopped
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
