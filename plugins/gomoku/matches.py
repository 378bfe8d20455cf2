"""Matches between Gomoku players from random openings, so that no two games repeat.

A match plays each opening twice, the players swapping colours, so that neither gets the better
side of an opening more often than the other. An opening is `stones` random moves (alternating
colours, Black first) near the centre that leave neither side a win in one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .rules import BLACK, WHITE, GameState, Gomoku, winning_move

#: Stones of a random opening, as in the openings of Gomoku tournaments (Black, White).
OPENING_STONES = 2


class Player(Protocol):
    name: str

    def act(self, state: GameState) -> int: ...


@dataclass(frozen=True)
class MatchResult:
    """A match's games from the first player's view."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Wins plus half the draws, a share of the games."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0


def random_opening(game: Gomoku, rng: np.random.Generator, stones: int = OPENING_STONES) -> list[int]:
    """`stones` random moves within the board's central region (its middle half, at least 3x3) that
    leave neither side a win in one."""
    size = game.board_size
    half = max(size // 4, 1)
    low, high = max(size // 2 - half, 0), min(size // 2 + half, size - 1)
    centre = [y * size + x for y in range(low, high + 1) for x in range(low, high + 1)]
    if stones > len(centre):
        raise ValueError(f"an opening of {stones} stones does not fit the {size}x{size} board's centre")
    while True:
        moves = [int(m) for m in rng.choice(centre, size=stones, replace=False)]
        state = GameState.from_moves(game, moves)
        if state.done:
            continue
        if all(winning_move(state.board, who, game.params) < 0 for who in (BLACK, WHITE)):
            return moves


def play_game(game: Gomoku, black: Player, white: Player, opening: list[int]) -> int:
    """One game from `opening`; the winner (BLACK, WHITE) or 0 for a draw."""
    state = GameState.from_moves(game, opening)
    while not state.done:
        player = black if state.to_play == BLACK else white
        state.play(player.act(state))
    return state.winner


def match(game: Gomoku, first: Player, second: Player, openings: int, seed: int) -> MatchResult:
    """`2 * openings` games: each of `openings` random openings played with `first` as Black, then
    as White."""
    rng = np.random.default_rng(seed)
    wins = draws = losses = 0
    for _ in range(openings):
        opening = random_opening(game, rng)
        for first_colour in (BLACK, WHITE):
            black, white = (first, second) if first_colour == BLACK else (second, first)
            winner = play_game(game, black, white, opening)
            if winner == 0:
                draws += 1
            elif winner == first_colour:
                wins += 1
            else:
                losses += 1
    return MatchResult(wins, draws, losses)
