"""Self-play collection: games from a runner in the run's process or from Ray workers, played with
the settings the schedules give at each step (temperature, Dirichlet ε, simulations)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from framework.contracts import RunContext
from framework.errors import ConfigError
from framework.schedules import Schedule, build_schedule
from framework_plugins.boardgames import DistributedSearch, Measured, SelfPlaySource, SharedInference
from framework_plugins.boardgames.searches import run_searches

from .config import AlphaZeroConfig
from .selfplay import (
    GameRecord,
    MoveChoice,
    Openings,
    PlayoutCap,
    SelfPlayRunner,
    VectorizeRunner,
    vectorize_runner,
)


def schedules(agent: AlphaZeroConfig, search: Any, total_steps: int) -> dict[str, Schedule]:
    """The self-play schedules: agent.temperature, search.dirichlet_epsilon, search.num_simulations."""
    specs = {
        "temperature": ("agent.temperature", agent.temperature),
        "dirichlet_epsilon": ("search.dirichlet_epsilon", search.dirichlet_epsilon),
        "num_simulations": ("search.num_simulations", search.num_simulations),
    }
    try:
        return {
            key: build_schedule(spec, name=name, total_steps=total_steps)
            for key, (name, spec) in specs.items()
        }
    except ValueError as e:
        raise ConfigError(str(e)) from None


def worker_count(cfg: AlphaZeroConfig, search: Any) -> int:
    """agent.workers, or its default: 1 with a search whose inference service workers can join
    (a DistributedSearch), else 0."""
    if cfg.workers is not None:
        return int(cfg.workers)
    return 1 if isinstance(search, DistributedSearch) else 0


#: agent.parallel_games when it is null, where the network runs on a CPU and on a GPU.
PARALLEL_GAMES = {"cpu": 32, "cuda": 512}


def parallel_games(cfg: AlphaZeroConfig, device: str) -> int:
    """The games a vectorize runner plays at once: agent.parallel_games, or its device's default."""
    if cfg.parallel_games is not None:
        return int(cfg.parallel_games)
    return PARALLEL_GAMES["cuda" if str(device).startswith("cuda") else "cpu"]


#: Random openings drawn for self-play (each game's from among them): enough to hold every 2-stone
#: opening of a 9x9 board's centre, and most of a 15x15 one's.
OPENING_POOL = 4096


def openings(cfg: AlphaZeroConfig, env: Any, rng: np.random.Generator) -> Openings:
    """The openings self-play games start from (agent.random_openings of them; a plain list, so that
    self-play workers take it with them)."""
    if cfg.random_openings <= 0:
        return Openings()
    return Openings(cfg.random_openings, [list(env.opening(rng)) for _ in range(OPENING_POOL)])


class SelfPlayCollector:
    """Where the run's self-play games come from, and the settings they are played with."""

    def __init__(self, cfg: AlphaZeroConfig, ctx: RunContext, game: Any, rng: np.random.Generator) -> None:
        searches = run_searches(ctx)
        self.schedules = schedules(cfg, ctx.cfg.search, ctx.total_steps)
        choice = MoveChoice(1.0, cfg.temperature_moves)
        cap = PlayoutCap(cfg.full_search_fraction, cfg.fast_simulations)
        starts = openings(cfg, ctx.env_plugin, rng)
        self.workers: SelfPlaySource | None = None
        self.runner: SelfPlaySource
        self.parallel_games = parallel_games(cfg, ctx.device)
        if cfg.runner == "single":
            self.runner = SelfPlayRunner(
                game, searches.own, choice, rng, noise=cfg.noise, cap=cap, openings=starts
            )
            return
        plugin, workers = searches.plugin, worker_count(cfg, searches.plugin)
        if workers:
            from .workers import RayAsyncRunner, WorkerSettings

            assert isinstance(plugin, DistributedSearch) and isinstance(searches.inference, SharedInference)
            make = functools.partial(
                vectorize_runner,
                game=game,
                choice=choice,
                n_games=self.parallel_games,
                noise=cfg.noise,
                cap=cap,
                openings=starts,
            )
            self.workers = RayAsyncRunner(
                WorkerSettings.of(cfg, workers),
                searches.inference,
                make,
                plugin=plugin,
                game=game,
                seed=int(rng.integers(2**31)),
                should_stop=ctx.stop.is_set,
            )
        self.runner = self.workers or VectorizeRunner(
            game,
            searches.own,
            choice,
            rng,
            n_games=self.parallel_games,
            noise=cfg.noise,
            cap=cap,
            openings=starts,
        )

    def settings(self, step: int) -> dict[str, float]:
        return {key: float(schedule(step)) for key, schedule in self.schedules.items()}

    def collect(self, step: int) -> tuple[int, list[GameRecord]]:
        """Moves played and games finished by one step of the runner, with the settings of `step`."""
        self.runner.configure(self.settings(step))
        return self.runner.step()

    def perf_metrics(self) -> dict[str, float]:
        return self.workers.perf_metrics() if isinstance(self.workers, Measured) else {}

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()
