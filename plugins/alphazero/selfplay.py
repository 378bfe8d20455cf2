"""Self-play runners: `SelfPlayRunner` plays one game at a time; `VectorizeRunner` many at once, so
that each simulation evaluates the leaves of all its games in one network call. Each takes the
settings of the moment (`configure`: temperature, Dirichlet ε, simulations) from the collector's
schedules, and records with every position the weights' version its search used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework.contracts import SearchEngine


@dataclass
class GameRecord:
    """One self-play game: per position its planes, policy, player to move, weights' version; the winner."""

    planes: list[np.ndarray] = field(default_factory=list)
    policies: list[np.ndarray] = field(default_factory=list)
    players: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    """The version of the weights each position was searched with (every evaluation of its search
    used this version or a newer one)."""
    winner: int = 0
    """+1 or -1, 0 for a draw."""

    def outcomes(self) -> np.ndarray:
        """z of each position, from the view of its player to move."""
        return np.array([self.winner * p for p in self.players], dtype=np.float32)

    def add(self, state: Any, counts: np.ndarray, version: int) -> None:
        self.planes.append(state.planes())
        self.policies.append(policy_target(counts))
        self.players.append(state.to_play)
        self.versions.append(version)

    def __len__(self) -> int:
        return len(self.players)


@dataclass
class MoveChoice:
    """How a move is picked from visit counts: drawn (temperature) early in a game, greedy later."""

    temperature: float = 1.0
    temperature_moves: int = 0

    def pick(self, counts: np.ndarray, move_number: int, rng: np.random.Generator) -> int:
        if move_number < self.temperature_moves and self.temperature > 0:
            weights = counts ** (1.0 / self.temperature)
            total = weights.sum()
            if total > 0:
                return int(rng.choice(len(counts), p=weights / total))
        best = np.flatnonzero(counts == counts.max())
        return int(best[0] if len(best) == 1 else rng.choice(best))


def policy_target(counts: np.ndarray) -> np.ndarray:
    total = counts.sum()
    return (counts / total).astype(np.float32) if total > 0 else counts.astype(np.float32)


class _Runner:
    """What both runners share: the search, the move choice and the settings."""

    def __init__(
        self, game: Any, engine: SearchEngine, choice: MoveChoice, rng: np.random.Generator, *, noise: bool
    ) -> None:
        self.game, self.engine, self.choice, self.rng, self.noise = game, engine, choice, rng, noise

    def configure(self, settings: Mapping[str, float]) -> None:
        """The schedules' values of the moment: temperature, dirichlet_epsilon, num_simulations."""
        if "temperature" in settings:
            self.choice.temperature = float(settings["temperature"])
        if "dirichlet_epsilon" in settings:
            self.engine.dirichlet_epsilon = float(settings["dirichlet_epsilon"])
        if "num_simulations" in settings:
            self.engine.num_simulations = max(1, round(settings["num_simulations"]))

    def close(self) -> None:
        """Nothing to release: the search belongs to the run."""


class SelfPlayRunner(_Runner):
    """One game at a time: a search per move."""

    def __init__(
        self, game: Any, engine: SearchEngine, choice: MoveChoice, rng: np.random.Generator, *, noise: bool
    ) -> None:
        super().__init__(game, engine, choice, rng, noise=noise)
        self.state = game.new_state()
        self.record = GameRecord()

    def step(self) -> tuple[int, list[GameRecord]]:
        """One move of the game; (moves played, the game's record if it ended)."""
        state, record = self.state, self.record
        counts = self.engine.search([state], add_noise=self.noise)[0]
        record.add(state, counts, self.engine.version)
        state.play(self.choice.pick(counts, len(state.moves), self.rng))
        if not state.done:
            return 1, []
        record.winner = state.winner
        self.state, self.record = self.game.new_state(), GameRecord()
        return 1, [record]


class VectorizeRunner(_Runner):
    """`n_games` games at once: one search call over all their roots per move."""

    def __init__(
        self,
        game: Any,
        engine: SearchEngine,
        choice: MoveChoice,
        rng: np.random.Generator,
        *,
        n_games: int,
        noise: bool,
    ) -> None:
        super().__init__(game, engine, choice, rng, noise=noise)
        self.states = [game.new_state() for _ in range(n_games)]
        self.records = [GameRecord() for _ in range(n_games)]

    def step(self) -> tuple[int, list[GameRecord]]:
        """One move in every game; (moves played, records of the games that ended)."""
        counts = self.engine.search(self.states, add_noise=self.noise)
        finished = []
        for i, state in enumerate(self.states):
            record = self.records[i]
            record.add(state, counts[i], self.engine.version)
            state.play(self.choice.pick(counts[i], len(state.moves), self.rng))
            if state.done:
                record.winner = state.winner
                finished.append(record)
                self.states[i], self.records[i] = self.game.new_state(), GameRecord()
        return len(self.states), finished


def vectorize_runner(
    engine: SearchEngine, seed: int, *, game: Any, choice: MoveChoice, n_games: int, noise: bool
) -> VectorizeRunner:
    """A VectorizeRunner over `engine` (picklable as a partial: what a self-play worker runs)."""
    return VectorizeRunner(game, engine, choice, np.random.default_rng(seed), n_games=n_games, noise=noise)
