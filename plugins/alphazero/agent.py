"""AlphaZero: self-play by tree search (collector) → replay of (state, π, z) under symmetries →
training (learner) → gating against the best network so far → evaluation against the env's fixed
opponents. The agent orchestrates them and keeps the run's inference service's weights in step."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np
import torch

from framework.contracts import Buffer, EnvPlugin, RunContext
from framework.errors import ConfigError, check_at_least, check_choice
from framework.schedules import build_schedule
from framework_plugins.boardgames import (
    BEST,
    DistributedSearch,
    DrawWeighingSearch,
    Evaluator,
    GameEnvPlugin,
    SearchPlugin,
)
from framework_plugins.boardgames.searches import run_searches

from . import gating
from .background import BackgroundLearning
from .collector import SelfPlayCollector, worker_count
from .config import RUNNERS, VALUE_HEADS, AlphaZeroConfig
from .learner import WEIGHTS_FILE, Learner
from .matches import MatchResult
from .network import NetworkEvaluator

STATE_FILE = "alphazero.json"

log = logging.getLogger("framework")


class AlphaZeroAgent:
    """A residual policy-value network trained by self-play with the run's search."""

    Config: ClassVar[type] = AlphaZeroConfig

    def __init__(self, cfg: AlphaZeroConfig) -> None:
        _validate(cfg)
        self.cfg = cfg
        self.learner = Learner(cfg)
        self.rng = np.random.default_rng()
        self.counters = {"step": 0, "games": 0, "phases": 0, "updates": 0, "generation": 0, "gates": 0}
        self.elo = 0.0
        """Elo of the best network over the first one, summed over accepted gates."""
        self.game_spec: dict[str, Any] = {}
        self._search: Any = None
        self._game: Any = None
        self._fresh = True
        self._logged_at = -1
        self._versions_before = 0  # the versions of the weights published before the service started

    # -- the contract ------------------------------------------------------------------------------

    def check_run(self, *, env: EnvPlugin, buffer: Optional[Buffer], parts: Mapping[str, object]) -> None:
        if not isinstance(env, GameEnvPlugin):
            raise ConfigError(
                "agent=alphazero plays a board game by search: choose a board game env (env=gomoku)"
            )
        self.learner.expect(env.game)  # the checkpoint a resumed run loads next is held to it
        search = parts.get("search")
        if not isinstance(search, SearchPlugin):
            raise ConfigError("agent=alphazero needs a search engine: search=sequential")
        if buffer is not None:
            raise ConfigError(
                "agent=alphazero keeps its own replay of self-play positions (agent.replay_size); "
                "drop buffer="
            )
        if self.cfg.random_openings > 0 and not env.opening(np.random.default_rng(0)):
            raise ConfigError(
                f"agent.random_openings={self.cfg.random_openings} starts self-play games from the env's "
                "random openings, and this env gives none (for gomoku: env.eval_opening_stones >= 1), "
                "or set agent.random_openings=0"
            )
        contempt = search.draw_contempt if isinstance(search, DrawWeighingSearch) else 0.0
        if contempt:
            raise ConfigError(
                f"search.draw_contempt={contempt} is a player's (play RUN search.draw_contempt={contempt}, "
                "gomocup, a benchmark's matches): self-play searches both sides of its games, so it "
                "trains with search.draw_contempt=0"
            )
        workers = worker_count(self.cfg, search)
        if workers and not isinstance(search, DistributedSearch):
            raise ConfigError(
                f"agent.workers={workers} plays self-play in Ray workers that join the run's inference "
                "service, and this search keeps its service in the run's process: use search=ray_async, "
                "or agent.workers=0"
            )
        if self.cfg.background_training and workers:
            raise ConfigError(
                f"agent.background_training=true trains beside the run's own self-play, and agent.workers="
                f"{workers} plays it in Ray workers, beside the training already: drop "
                "agent.background_training, or set agent.workers=0"
            )
        if self.cfg.runner == "single" and workers:
            raise ConfigError(
                f"agent.runner=single plays one game in the run's process, and agent.workers={workers} asks "
                "for self-play in Ray workers: use agent.runner=vectorize, or agent.workers=0"
            )
        if isinstance(search, DistributedSearch):
            search.expect_workers(
                workers,
                num_cpus=self.cfg.worker_num_cpus,
                keys=f"agent.workers={workers} agent.worker_num_cpus={self.cfg.worker_num_cpus:g}",
            )

    def evaluator(self) -> Evaluator:
        """The batched policy-value function of the network self-play uses (the best one)."""
        if self.learner.best is None:
            raise RuntimeError("AlphaZeroAgent: no network yet (learn() or load() first)")
        return NetworkEvaluator(self.learner.best, self.learner.device)

    def learn(self, ctx: RunContext) -> None:
        cfg, learner = self.cfg, self.learner
        assert isinstance(ctx.env_plugin, GameEnvPlugin)
        game = ctx.env_plugin.game
        self._setup(game, ctx)
        searches = run_searches(ctx)
        # The service counts from 1 again: the checkpoint's weights, whose version a resumed run goes on from.
        self._versions_before = max(self.counters.get("weights_version", 1) - 1, 0)
        self.publish_best(ctx, learner.weights("best"))
        self._search, self._game = searches.own, game
        collector = SelfPlayCollector(cfg, ctx, game, self.rng)
        background: BackgroundLearning | None = None
        if cfg.background_training:
            # A generator of its own: the threads draw their batches while self-play draws its moves.
            trainer_rng = np.random.default_rng(int(self.rng.integers(2**63)))
            background = BackgroundLearning(self, ctx, game, trainer_rng)
        try:
            step = self.counters["step"] = ctx.start_step
            since_train = 0
            clock = self._clock(ctx, collector)
            first, logged_phases = True, 0
            while step < ctx.total_steps:
                moves, finished = collector.collect(step)
                if ctx.stop.is_set():  # its searches may have been cut short: none of it is recorded
                    break
                if background is not None:  # new weights between searches, metrics from this thread
                    for metrics, at in background.deliver():
                        ctx.log_metrics(metrics, at)
                current = searches.inference.version(BEST)
                for record in finished:
                    learner.add_game(record, lag=current - min(record.versions, default=current))
                    self.counters["games"] += 1
                step += moves
                if first:  # the tuning figures from the first chunk on: a short sweep maps them too
                    first = False
                    self._log(ctx, collector, step, clock, background)
                since_train += moves
                self.counters["step"] = step
                if since_train >= cfg.train_every and learner.ready():
                    since_train = 0
                    if background is not None:
                        background.owe_phase(step)
                    else:
                        self._train(ctx, step)
                        self._log(ctx, collector, step, clock, background)
                        clock = self._clock(ctx, collector)
                        if cfg.gating and self.counters["phases"] % cfg.gate_every == 0:
                            self._gate(ctx, game, step)
                if background is not None and step >= ctx.total_steps:  # the last checkpoint holds all
                    background.idle(gates=True)
                    for metrics, at in background.deliver():
                        ctx.log_metrics(metrics, at)
                if background is not None and background.phases_done > logged_phases:
                    logged_phases = background.phases_done  # a phase's figures, as in turn
                    self._log(ctx, collector, step, clock, background)
                    clock = self._clock(ctx, collector)
                if not ctx.after_step(step, self):
                    break
            if background is not None:
                background.close()
                for metrics, at in background.deliver():
                    ctx.log_metrics(metrics, at)
                log.info(background.summary())
            self._log(ctx, collector, step, clock, background)
        finally:
            if background is not None:
                background.close()
            collector.close()

    def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]:
        """Matches of `episodes` games against each of the env's evaluation opponents."""
        metrics = gating.evaluate(self.cfg, ctx, episodes=episodes)
        if not metrics:  # the run is stopping
            return metrics
        metrics["eval/generation"] = float(self.counters["generation"])
        metrics["eval/elo"] = self.elo
        return metrics

    def eval_metric_names(self, env: EnvPlugin) -> tuple[str, ...]:
        """Every metric `evaluate` logs on `env`: a match's figures against each of its opponents,
        the generation, the Elo and the simulations a move."""
        assert isinstance(env, GameEnvPlugin)
        per_opponent = MatchResult().metrics("x")
        return (
            *(f"eval/{name}/{key.split('/', 1)[1]}" for name in env.eval_variants for key in per_opponent),
            "eval/generation",
            "eval/elo",
            "eval/simulations",
        )

    def to(self, device: str) -> None:
        """Put the networks on `device` (a loaded agent plays there: `python -m framework play`)."""
        self.learner.device = torch.device(device)
        for net in {id(n): n for n in (self.learner.net, self.learner.best) if n is not None}.values():
            net.to(self.learner.device)

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        """The move a search picks in the position the planes `obs` show (a gymnasium observation)."""
        if self._search is None or self._game is None:
            raise RuntimeError("AlphaZeroAgent.act() needs a search: it gets the run's in learn()")
        state = self._game.state_from_planes(obs)
        found = self._search.search([state])
        chosen = int(found.chosen_moves[0])
        return chosen if chosen >= 0 else int(found.visits[0].argmax())

    def save(self, path: Path) -> None:
        with self.learner.lock:  # a phase or a gate's verdict in the background waits (or is waited for)
            spec = self.learner.save(path)
            state = {
                "network": spec,
                "game": self.game_spec,
                "counters": dict(self.counters),
                "elo": self.elo,
                "rng": self.rng.bit_generator.state,
            }
        (path / STATE_FILE).write_text(json.dumps(state, indent=1))

    def load(self, path: Path) -> None:
        if not (path / WEIGHTS_FILE).is_file() or not (path / STATE_FILE).is_file():
            raise FileNotFoundError(f"No AlphaZero checkpoint ({WEIGHTS_FILE}, {STATE_FILE}) in {path}")
        state = json.loads((path / STATE_FILE).read_text())
        self.game_spec = state["game"]
        self.counters.update(state["counters"])
        self.elo = float(state["elo"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self.learner.load(path, state["network"], state["game"])
        self._fresh = False

    # -- the steps ---------------------------------------------------------------------------------

    def _setup(self, game: Any, ctx: RunContext) -> None:
        spec = dict(game.spec)
        if self.game_spec and self.game_spec != spec:
            raise ConfigError(
                f"the checkpoint was trained on {self.game_spec}, and this run's game is {spec}"
            )
        self.game_spec = spec
        if self._fresh:
            self.rng = np.random.default_rng(ctx.seed)
        self.learner.setup(game, ctx.device)

    def _train(self, ctx: RunContext, step: int) -> None:
        self.learner.train_phase(self.rng, self.learning_rate(ctx, step))
        self.counters["phases"] += 1
        self.counters["updates"] += self.cfg.updates_per_phase
        if not self.cfg.gating:  # self-play uses the trained network itself
            self.publish_best(ctx, self.learner.weights("best"))

    def publish_best(self, ctx: RunContext, weights: Mapping[str, np.ndarray]) -> None:
        """New weights for self-play, counted at once: the next checkpoint holds their version."""
        version = run_searches(ctx).inference.publish(BEST, weights)
        self.counters["weights_version"] = self._versions_before + version

    def learning_rate(self, ctx: RunContext, step: int) -> float:
        """agent.learning_rate at `step` (a schedule's fraction is of the run's total_steps)."""
        spec, total = self.cfg.learning_rate, ctx.total_steps
        return float(build_schedule(spec, name="agent.learning_rate", total_steps=total)(step))

    def _gate(self, ctx: RunContext, game: Any, step: int) -> None:
        """The trained network against the best in an arena; it replaces the best if it scores enough."""
        cfg = self.cfg
        result = gating.gate(cfg, ctx, game, self.learner.weights("net"), self.counters["gates"])
        if result is None:  # the run is stopping
            return
        self.counters["gates"] += 1
        accepted = result.score >= cfg.gate_threshold
        if accepted:
            self.learner.accept()
            self.publish_best(ctx, self.learner.weights("best"))
            self.counters["generation"] += 1
            self.elo += result.elo_difference()
        ctx.log_metrics(self.gate_metrics(result.score, accepted), step)

    def gate_metrics(self, score: float, accepted: bool) -> dict[str, float]:
        """What a gate logs: its score, its verdict, and the generation and Elo after it."""
        return {
            "gate/score": score,
            "gate/accepted": float(accepted),
            "gate/generation": float(self.counters["generation"]),
            "gate/elo": self.elo,
        }

    def _log(
        self,
        ctx: RunContext,
        collector: SelfPlayCollector,
        step: int,
        clock: tuple[float, int, int],
        background: BackgroundLearning | None = None,
    ) -> None:
        """Training and self-play figures, and the search's tuning figures (also after the first moves);
        once a step (the loop's last phase and the run's end may be at the same one)."""
        if step == self._logged_at:
            return
        self._logged_at = step
        now = time.perf_counter()
        sims = self._simulations(ctx, collector) - clock[1]
        games = self.counters["games"] - clock[2]
        metrics = self.learner.take_stats()
        metrics["selfplay/games"] = float(self.counters["games"])
        searches = run_searches(ctx)
        metrics["selfplay/weights_version"] = float(self.counters["weights_version"])
        metrics["train/updates"] = float(self.counters["updates"])
        metrics["train/learning_rate"] = self.learning_rate(ctx, step)
        metrics["train/replay_positions"] = float(len(self.learner.replay or ()))
        metrics.update({f"train/{key}": value for key, value in collector.settings(step).items()})
        if now > clock[0] and sims > 0:
            metrics["perf/sims_per_s"] = sims / (now - clock[0])
            metrics["perf/games_per_s"] = games / (now - clock[0])
        metrics.update(searches.own.perf_metrics())
        metrics.update(collector.perf_metrics())
        if background is not None:
            metrics.update(background.perf_metrics())
        ctx.log_metrics(metrics, step)

    def _clock(self, ctx: RunContext, collector: SelfPlayCollector) -> tuple[float, int, int]:
        """(now, simulations, games): where the next figures' rates count from."""
        return time.perf_counter(), self._simulations(ctx, collector), self.counters["games"]

    @staticmethod
    def _simulations(ctx: RunContext, collector: SelfPlayCollector) -> int:
        workers = collector.workers.simulations if collector.workers is not None else 0
        return workers + run_searches(ctx).own.simulations


#: The keys whose value is a count, 1 or more.
AT_LEAST_ONE = ("blocks", "channels", "replay_size", "train_every", "updates_per_phase", "batch_size")


def _validate(cfg: AlphaZeroConfig) -> None:
    check_choice("agent.runner", cfg.runner, RUNNERS)
    check_choice("agent.value_head", cfg.value_head, VALUE_HEADS)
    check_at_least("agent", cfg, 1, *AT_LEAST_ONE, "gate_every", "gate_games")
    try:
        temperature = build_schedule(cfg.temperature, name="agent.temperature", total_steps=1)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if min(temperature(0), temperature(2**62)) < 0:
        raise ConfigError(f"agent.temperature={cfg.temperature} must be >= 0")
    try:
        learning_rate = build_schedule(cfg.learning_rate, name="agent.learning_rate", total_steps=1)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if learning_rate(0) <= 0 or learning_rate(2**62) < 0:
        raise ConfigError(
            f"agent.learning_rate={cfg.learning_rate} must be > 0 (a schedule: > 0 at the start, >= 0 after)"
        )
    if cfg.parallel_games is not None and cfg.parallel_games < 1:
        raise ConfigError(
            f"agent.parallel_games={cfg.parallel_games} must be >= 1, or null (32 on a CPU, 512 on a GPU)"
        )
    if cfg.eval_simulations is not None and cfg.eval_simulations < 1:
        raise ConfigError(f"agent.eval_simulations={cfg.eval_simulations} must be >= 1, or null")
    if cfg.full_search_fraction < 1.0 and cfg.fast_simulations < 1:
        raise ConfigError(
            f"agent.fast_simulations={cfg.fast_simulations} must be >= 1 with agent.full_search_fraction="
            f"{cfg.full_search_fraction}"
        )


if TYPE_CHECKING:
    from framework.contracts import CheckedAgent, EvaluatingAgent, MetricNamingAgent
    from framework_plugins.boardgames import SearchAgent

    _contract: type[CheckedAgent] = AlphaZeroAgent
    _search_contract: type[SearchAgent] = AlphaZeroAgent
    _eval_contract: type[EvaluatingAgent] = AlphaZeroAgent
    _naming_contract: type[MetricNamingAgent] = AlphaZeroAgent
