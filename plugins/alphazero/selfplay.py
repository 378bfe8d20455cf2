"""Self-play runners: `SelfPlayRunner` plays one game at a time; `VectorizeRunner` many at once, so
that each simulation evaluates the leaves of all its games in one network call. Each takes the
settings of the moment (`configure`: temperature, Dirichlet ε, simulations) from the collector's
schedules, and records with every position the weights' version its search used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework_plugins.boardgames import SearchEngine, SearchRequest


@dataclass
class GameRecord:
    """One self-play game: per recorded position its planes, policy target, player to move and
    weights' version; the winner."""

    planes: list[np.ndarray] = field(default_factory=list)
    policies: list[np.ndarray] = field(default_factory=list)
    players: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    """The version of the weights each position was searched with (every evaluation of its search
    used this version or a newer one)."""
    winner: int = 0
    """+1 or -1, 0 for a draw."""
    moves: int = 0
    """Moves played in the game (recorded or not: playout cap randomisation records the full searches)."""

    def outcomes(self) -> np.ndarray:
        """z of each position, from the view of its player to move."""
        return np.array([self.winner * p for p in self.players], dtype=np.float32)

    def add(self, state: Any, policy: np.ndarray, version: int) -> None:
        self.planes.append(state.planes())
        self.policies.append(np.asarray(policy, dtype=np.float32))
        self.players.append(state.to_play)
        self.versions.append(version)

    def __len__(self) -> int:
        return len(self.players)


@dataclass
class MoveChoice:
    """How a move is picked from visit counts: drawn (temperature) early in a game, greedy later;
    a search that chose its move itself (a Gumbel root) is followed."""

    temperature: float = 1.0
    temperature_moves: int = 0

    def pick(self, counts: np.ndarray, move_number: int, rng: np.random.Generator, chosen: int = -1) -> int:
        if chosen >= 0:
            return int(chosen)
        if move_number < self.temperature_moves and self.temperature > 0:
            weights = counts ** (1.0 / self.temperature)
            total = weights.sum()
            if total > 0:
                return int(rng.choice(len(counts), p=weights / total))
        best = np.flatnonzero(counts == counts.max())
        return int(best[0] if len(best) == 1 else rng.choice(best))


@dataclass
class PlayoutCap:
    """Playout cap randomisation (KataGo): each move gets the full search with probability
    `full_fraction`, with noise, and is recorded; the others a fast search of `fast_simulations`,
    without noise, and are not recorded."""

    full_fraction: float = 1.0
    fast_simulations: int = 0

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Which of n moves get the full search."""
        if self.full_fraction >= 1.0:
            return np.ones(n, dtype=bool)
        return rng.random(n) < self.full_fraction


@dataclass
class Openings:
    """Where self-play games start: a share `fraction` of them from one of `moves`, random openings
    of the env (KataGo's opening diversity: positions the game's start would rarely reach), the
    others from the game's start. The opening's moves are not searched and not recorded."""

    fraction: float = 0.0
    moves: list[list[int]] = field(default_factory=list)

    def start(self, game: Any, rng: np.random.Generator) -> Any:
        state = game.new_state()
        if self.moves and self.fraction > 0 and rng.random() < self.fraction:
            for move in self.moves[int(rng.integers(len(self.moves)))]:
                state.play(move)
        return state


class _Runner:
    """What both runners share: the search, the move choice, the playout cap, the openings and the
    settings."""

    def __init__(
        self,
        game: Any,
        engine: SearchEngine,
        choice: MoveChoice,
        rng: np.random.Generator,
        *,
        noise: bool,
        cap: PlayoutCap | None = None,
        openings: Openings | None = None,
    ) -> None:
        self.game, self.engine, self.choice, self.rng, self.noise = game, engine, choice, rng, noise
        self.cap = cap or PlayoutCap()
        self.openings = openings or Openings()
        self.full_simulations = engine.num_simulations
        """Simulations of a full search (the schedule's of the moment; the search's own until told)."""
        self.epsilon: float | None = None
        """The noise's weight (the schedule's of the moment; None: the search's own)."""

    def new_state(self) -> Any:
        """The start of a new game: the game's start, or one of the openings."""
        return self.openings.start(self.game, self.rng)

    def configure(self, settings: Mapping[str, float]) -> None:
        """The schedules' values of the moment: temperature, dirichlet_epsilon, num_simulations."""
        if "temperature" in settings:
            self.choice.temperature = float(settings["temperature"])
        if "dirichlet_epsilon" in settings:
            self.epsilon = float(settings["dirichlet_epsilon"])
        if "num_simulations" in settings:
            self.full_simulations = max(1, round(settings["num_simulations"]))

    @property
    def simulations(self) -> int:
        return self.engine.simulations

    def close(self) -> None:
        """Nothing to release: the search belongs to the run."""

    def _play(self, states: list[Any], records: list[GameRecord]) -> list[int]:
        """One search over the games' positions, the full ones recorded, and a move in each; the
        indices of the games that ended (their records' winners set)."""
        engine = self.engine
        full = self.cap.draw(len(states), self.rng)
        simulations = np.where(full, self.full_simulations, self.cap.fast_simulations).tolist()
        found = engine.search(
            states,
            SearchRequest(
                simulations=simulations,
                add_noise=(full & self.noise).tolist(),
                dirichlet_epsilon=self.epsilon,
            ),
        )
        counts, policies, chosen = found.visits, found.policy_targets, found.chosen_moves
        ended = []
        for i, (state, record) in enumerate(zip(states, records, strict=True)):
            if full[i]:
                record.add(state, policies[i], found.version)
            record.moves += 1
            state.play(self.choice.pick(counts[i], len(state.moves), self.rng, int(chosen[i])))
            if state.done:
                record.winner = state.winner
                ended.append(i)
        return ended


class SelfPlayRunner(_Runner):
    """One game at a time: a search per move."""

    def __init__(
        self,
        game: Any,
        engine: SearchEngine,
        choice: MoveChoice,
        rng: np.random.Generator,
        *,
        noise: bool,
        cap: PlayoutCap | None = None,
        openings: Openings | None = None,
    ) -> None:
        super().__init__(game, engine, choice, rng, noise=noise, cap=cap, openings=openings)
        self.state = self.new_state()
        self.record = GameRecord()

    def step(self) -> tuple[int, list[GameRecord]]:
        """One move of the game; (moves played, the game's record if it ended)."""
        if not self._play([self.state], [self.record]):
            return 1, []
        record = self.record
        self.state, self.record = self.new_state(), GameRecord()
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
        cap: PlayoutCap | None = None,
        openings: Openings | None = None,
    ) -> None:
        super().__init__(game, engine, choice, rng, noise=noise, cap=cap, openings=openings)
        self.states = [self.new_state() for _ in range(n_games)]
        self.records = [GameRecord() for _ in range(n_games)]

    def step(self) -> tuple[int, list[GameRecord]]:
        """One move in every game; (moves played, records of the games that ended)."""
        finished = []
        for i in self._play(self.states, self.records):
            finished.append(self.records[i])
            self.states[i], self.records[i] = self.new_state(), GameRecord()
        return len(self.states), finished


def vectorize_runner(
    engine: SearchEngine,
    seed: int,
    *,
    game: Any,
    choice: MoveChoice,
    n_games: int,
    noise: bool,
    cap: PlayoutCap | None = None,
    openings: Openings | None = None,
) -> VectorizeRunner:
    """A VectorizeRunner over `engine` (picklable as a partial: what a self-play worker runs)."""
    return VectorizeRunner(
        game,
        engine,
        choice,
        np.random.default_rng(seed),
        n_games=n_games,
        noise=noise,
        cap=cap,
        openings=openings,
    )
