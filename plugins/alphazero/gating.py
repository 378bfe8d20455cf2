"""Gating and evaluation: the trained network against the best in an arena, and the best against
the env's fixed opponents. Both search over the run's inference service (no network of their own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from framework.contracts import RunContext
from framework.evaluation import evaluation_seed
from framework_plugins.boardgames import BEST, GameEnvPlugin
from framework_plugins.boardgames.searches import run_searches

from .arena import SearchPlayer
from .config import AlphaZeroConfig
from .matches import FixedPlayer, MatchResult, MatchStopped, play_match

#: The model a gate's trained network is published as.
CANDIDATE = "candidate"


def gate(
    cfg: AlphaZeroConfig,
    ctx: RunContext,
    game: Any,
    candidate_weights: dict[str, np.ndarray],
    index: int,
    *,
    incumbent: str = BEST,
    should_stop: Callable[[], bool] | None = None,
) -> MatchResult | None:
    """The candidate's weights (published as CANDIDATE) against the best network (the model
    `incumbent`: BEST, or a copy of it that self-play does not search with) in `cfg.gate_games`
    games; None when the run (or `should_stop`) asked to stop during the gate. Gate `index` plays
    with evaluation seeds (`gate_seeds`), apart from every seed self-play trains with."""
    seed, best_seed = gate_seeds(ctx.seed, index)
    searches = run_searches(ctx)
    searches.inference.publish(CANDIDATE, candidate_weights)
    candidate = searches.make(CANDIDATE, seed=seed)
    best = searches.make(incumbent, seed=best_seed)
    rng = np.random.default_rng(seed)
    opening, temperature_moves = _openings(ctx, cfg)
    try:
        return play_match(
            game,
            SearchPlayer("candidate", candidate, rng, temperature_moves=temperature_moves),
            SearchPlayer("best", best, rng, temperature_moves=temperature_moves),
            cfg.gate_games,
            opening=opening,
            seed=seed,
            should_stop=should_stop or ctx.stop.is_set,
        )
    except MatchStopped:
        return None
    finally:
        searches.forget(candidate)
        searches.forget(best)


def evaluate(cfg: AlphaZeroConfig, ctx: RunContext, *, episodes: int) -> dict[str, float]:
    """Matches of `episodes` games of BEST against each of the env's evaluation opponents; no
    metrics when the run was asked to stop during them (a match cut short is no score). Every
    evaluation plays with the run's evaluation seed, as an env's evaluation episodes do."""
    env = ctx.env_plugin
    assert isinstance(env, GameEnvPlugin)
    seed = evaluation_seed(ctx.seed)
    searches = run_searches(ctx)
    search = searches.make(BEST, seed=seed)
    simulations = search.num_simulations if cfg.eval_simulations is None else cfg.eval_simulations
    rng = np.random.default_rng(seed)
    _, temperature_moves = _openings(ctx, cfg)
    metrics: dict[str, float] = {}
    try:
        for name in env.eval_variants:
            me = SearchPlayer(
                "alphazero", search, rng, temperature_moves=temperature_moves, simulations=simulations
            )
            them = FixedPlayer(env.opponent(name, seed=seed))
            result = play_match(
                env.game,
                me,
                them,
                episodes,
                opening=env.opening,
                seed=seed,
                should_stop=ctx.stop.is_set,
            )
            metrics.update(result.metrics(f"eval/{name}"))
        metrics["eval/simulations"] = float(simulations)
    except MatchStopped:
        return {}
    finally:
        searches.forget(search)
    return metrics


def gate_seeds(seed: int, index: int) -> tuple[int, int]:
    """The seeds of gate `index`'s candidate (its match and openings too) and of its best network:
    evaluation seeds 1 + 2 * index and 2 + 2 * index (0 is the run's evaluations), so that no gate
    replays another's games, an evaluation's, or a seed self-play trains with."""
    return evaluation_seed(seed, 1 + 2 * index), evaluation_seed(seed, 2 + 2 * index)


def _openings(ctx: RunContext, cfg: AlphaZeroConfig) -> tuple[Any, int]:
    """(the env's random openings, or None, and the moves drawn from the visit counts): random
    openings make a match's games differ; from the empty board, the first moves drawn do (a search
    that chooses its own moves, a Gumbel root, plays the same games without openings)."""
    env = ctx.env_plugin
    assert isinstance(env, GameEnvPlugin)
    if env.opening(np.random.default_rng(0)):
        return env.opening, 0
    return None, cfg.arena_temperature_moves
