"""AlphaZero: self-play by tree search → replay of (state, π, z) under symmetries → training →
gating against the best network so far → evaluation against the env's fixed opponents."""

from __future__ import annotations

import copy
import functools
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from framework.context import RunContext
from framework.contracts import (
    Buffer,
    DistributedSearch,
    EnvPlugin,
    Evaluator,
    GameEnvPlugin,
    MeasuredSearch,
    SearchEngine,
    SelfPlaySource,
)
from framework.errors import ConfigError, check_at_least, check_choice

from .arena import FixedPlayer, MatchResult, SearchPlayer, play_match
from .config import RUNNERS, AlphaZeroConfig
from .network import NetworkEvaluator, PolicyValueNet
from .replay import PositionReplay
from .selfplay import GameRecord, MoveChoice, SelfPlayRunner, VectorizeRunner, vectorize_runner

WEIGHTS_FILE = "alphazero.pt"
STATE_FILE = "alphazero.json"
REPLAY_FILE = "replay.npz"
#: Seed offsets of the engines and opponents an evaluation builds, apart from self-play's.
ARENA_SEED, EVAL_SEED = 1_000, 2_000


class AlphaZeroAgent:
    """A residual policy-value network trained by self-play with the run's search engine."""

    Config: ClassVar[type] = AlphaZeroConfig

    def __init__(self, cfg: AlphaZeroConfig) -> None:
        _validate(cfg)
        self.cfg = cfg
        self.net: Optional[PolicyValueNet] = None
        """The network being trained."""
        self.best: Optional[PolicyValueNet] = None
        """The network self-play and evaluation use (the trained one itself without gating)."""
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.replay: Optional[PositionReplay] = None
        self.device = torch.device("cpu")
        self.rng = np.random.default_rng()
        self.counters = {"step": 0, "games": 0, "phases": 0, "updates": 0, "generation": 0, "gates": 0}
        self.elo = 0.0
        """Elo of the best network over the first one, summed over accepted gates."""
        self.game_spec: dict[str, Any] = {}
        self._engine: Optional[SearchEngine] = None
        self._engine_game: Any = None
        self._restored: Optional[dict[str, Any]] = None
        self._restored_replay: Optional[Path] = None
        self._stats: dict[str, list[float]] = {}
        self._workers: Optional[SelfPlaySource] = None

    # -- the contract ------------------------------------------------------------------------------

    def check_run(self, *, env: EnvPlugin, buffer: Optional[Buffer], search: Optional[SearchEngine]) -> None:
        if not isinstance(env, GameEnvPlugin):
            raise ConfigError(
                "agent=alphazero plays a board game by search: choose a board game env (env=gomoku)"
            )
        if search is None:
            raise ConfigError("agent=alphazero needs a search engine: search=sequential")
        if buffer is not None:
            raise ConfigError(
                "agent=alphazero keeps its own replay of self-play positions (agent.replay_size); "
                "drop buffer="
            )

    def evaluator(self) -> Evaluator:
        """The batched policy-value function of the network self-play uses (the best one)."""
        return NetworkEvaluator(self._require(self.best), self.device)

    def learn(self, ctx: RunContext) -> None:
        cfg = self.cfg
        assert isinstance(ctx.env_plugin, GameEnvPlugin) and ctx.search is not None
        game = ctx.env_plugin.game
        self._setup(game, ctx)
        net, replay, engine = self._require(self.net), self._require(self.replay), ctx.search
        self._engine, self._engine_game = engine, game
        choice = MoveChoice(cfg.temperature, cfg.temperature_moves)
        runner: Union[SelfPlayRunner, VectorizeRunner, SelfPlaySource]
        workers: Optional[SelfPlaySource] = None
        if cfg.runner == "single":
            runner = SelfPlayRunner(game, engine, choice, self.rng, noise=cfg.noise)
        else:
            if isinstance(engine, DistributedSearch):
                make = functools.partial(
                    vectorize_runner, game=game, choice=choice, n_games=cfg.parallel_games, noise=cfg.noise
                )
                workers = engine.self_play(make, seed=int(self.rng.integers(2**31)))
            runner = workers or VectorizeRunner(
                game, engine, choice, self.rng, n_games=cfg.parallel_games, noise=cfg.noise
            )
        self._workers = workers
        try:
            self._self_play(ctx, runner, net, replay, game)
        finally:
            self._workers = None
            if workers is not None:
                workers.close()

    def _self_play(
        self,
        ctx: RunContext,
        runner: Union[SelfPlayRunner, VectorizeRunner, SelfPlaySource],
        net: PolicyValueNet,
        replay: PositionReplay,
        game: Any,
    ) -> None:
        cfg, engine = self.cfg, ctx.search
        step = self.counters["step"] = ctx.start_step
        since_train = 0
        clock = (time.perf_counter(), _simulations(engine), self.counters["games"])
        while step < ctx.total_steps:
            moves, finished = runner.step()
            for record in finished:
                self._add_game(record, replay)
            step += moves
            since_train += moves
            self.counters["step"] = step
            if since_train >= cfg.train_every and len(replay) >= max(cfg.min_replay, cfg.batch_size):
                since_train = 0
                self._train_phase(net, replay)
                self._log(ctx, step, clock)
                clock = (time.perf_counter(), _simulations(engine), self.counters["games"])
                if cfg.gating and self.counters["phases"] % cfg.gate_every == 0:
                    self._gate(ctx, game, step)
            if not ctx.after_step(step, self):
                break

    def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]:
        """Matches of `episodes` games against each of the env's evaluation opponents."""
        env = ctx.env_plugin
        assert isinstance(env, GameEnvPlugin)
        game = env.game
        engine = ctx.make_search(self.evaluator, seed=ctx.seed + EVAL_SEED)
        rng = np.random.default_rng(ctx.seed + EVAL_SEED)
        metrics: dict[str, float] = {}
        try:
            for name in env.eval_variants:
                me = SearchPlayer(
                    "alphazero", engine, rng, temperature_moves=self.cfg.arena_temperature_moves
                )
                them = FixedPlayer(env.opponent(name, seed=ctx.seed + EVAL_SEED))
                metrics.update(play_match(game, me, them, episodes).metrics(f"eval/{name}"))
        finally:
            engine.close()
        metrics["eval/generation"] = float(self.counters["generation"])
        metrics["eval/elo"] = self.elo
        return metrics

    def to(self, device: str) -> None:
        """Put the networks on `device` (a loaded agent plays there: `python -m framework play`)."""
        self.device = torch.device(device)
        for net in {id(n): n for n in (self.net, self.best) if n is not None}.values():
            net.to(self.device)

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        """The move a search picks in the position the planes `obs` show (a gymnasium observation)."""
        if self._engine is None or self._engine_game is None:
            raise RuntimeError("AlphaZeroAgent.act() needs a search engine: it gets the run's in learn()")
        state = self._engine_game.state_from_planes(obs)
        counts = self._engine.search([state], add_noise=False)[0]
        return int(counts.argmax())

    def save(self, path: Path) -> None:
        net, best = self._require(self.net), self._require(self.best)
        weights = {
            "net": net.state_dict(),
            "best": best.state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer else None,
            "torch_rng": torch.get_rng_state(),
        }
        torch.save(weights, path / WEIGHTS_FILE)
        state = {
            "network": net.spec,
            "game": self.game_spec,
            "counters": self.counters,
            "elo": self.elo,
            "rng": self.rng.bit_generator.state,
        }
        (path / STATE_FILE).write_text(json.dumps(state, indent=1))
        if self.cfg.save_replay and self.replay is not None:
            np.savez(path / REPLAY_FILE, **self.replay.state_dict())

    def load(self, path: Path) -> None:
        if not (path / WEIGHTS_FILE).is_file() or not (path / STATE_FILE).is_file():
            raise FileNotFoundError(f"No AlphaZero checkpoint ({WEIGHTS_FILE}, {STATE_FILE}) in {path}")
        state = json.loads((path / STATE_FILE).read_text())
        weights = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        self.game_spec = state["game"]
        self.counters.update(state["counters"])
        self.elo = float(state["elo"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self.net = PolicyValueNet(**state["network"])
        self.net.load_state_dict(weights["net"])
        self.best = self.net if not self.cfg.gating else copy.deepcopy(self.net)
        self.best.load_state_dict(weights["best"])
        self.net.eval()
        self.best.eval()
        self._restored = weights
        self._restored_replay = path / REPLAY_FILE if (path / REPLAY_FILE).is_file() else None

    # -- training ----------------------------------------------------------------------------------

    def _setup(self, game: Any, ctx: RunContext) -> None:
        cfg = self.cfg
        spec = {
            "board_size": game.board_shape[0],
            "n_in_row": getattr(game, "n_in_row", 0),
            "rule": getattr(game, "rule", ""),
        }
        if self.game_spec and self.game_spec != spec:
            raise ConfigError(
                f"the checkpoint was trained on {self.game_spec}, and this run's game is {spec}"
            )
        self.game_spec = spec
        self.device = torch.device(ctx.device)
        network = {
            "board_size": game.board_shape[0],
            "in_planes": game.n_planes,
            "blocks": cfg.blocks,
            "channels": cfg.channels,
        }
        if self.net is not None and self.net.spec != network:
            raise ConfigError(f"the checkpoint's network is {self.net.spec}, and agent.* asks for {network}")
        if self.net is None:
            self.rng = np.random.default_rng(ctx.seed)
            self.net = PolicyValueNet(**network)
        self.net.to(self.device).eval()
        if self.best is None or not cfg.gating:
            self.best = self.net if not cfg.gating else copy.deepcopy(self.net)
        self.best.to(self.device).eval()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.learning_rate, weight_decay=cfg.l2)
        if self._restored is not None:
            if self._restored.get("optimizer"):
                self.optimizer.load_state_dict(self._restored["optimizer"])
            torch.set_rng_state(self._restored["torch_rng"])
            self._restored = None
        self.replay = PositionReplay(
            cfg.replay_size, (game.n_planes, *game.board_shape), game.n_actions, game.symmetry_index
        )
        if self._restored_replay is not None:
            with np.load(self._restored_replay, allow_pickle=False) as saved:
                self.replay.load_state_dict({key: saved[key] for key in saved.files})
            self._restored_replay = None

    def _add_game(self, record: GameRecord, replay: PositionReplay) -> None:
        replay.add(np.stack(record.planes), np.stack(record.policies), record.outcomes())
        self.counters["games"] += 1
        self._stats.setdefault("selfplay/game_length", []).append(len(record))
        self._stats.setdefault("selfplay/black_win_rate", []).append(float(record.winner == 1))
        self._stats.setdefault("selfplay/draw_rate", []).append(float(record.winner == 0))

    def _train_phase(self, net: PolicyValueNet, replay: PositionReplay) -> None:
        cfg, optimizer = self.cfg, self._require(self.optimizer)
        net.train()
        for _ in range(cfg.updates_per_phase):
            planes, policy, value = replay.sample(cfg.batch_size, self.rng)
            x = torch.from_numpy(planes).to(self.device)
            pi = torch.from_numpy(policy).to(self.device)
            z = torch.from_numpy(value).to(self.device)
            logits, v = net(x)
            log_p = F.log_softmax(logits, dim=1)
            policy_loss = -(pi * log_p).sum(1).mean()
            value_loss = F.mse_loss(v, z)
            loss = policy_loss + value_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                entropy = -(log_p.exp() * log_p).sum(1).mean()
            for key, val in (
                ("train/policy_loss", policy_loss),
                ("train/value_loss", value_loss),
                ("train/policy_entropy", entropy),
            ):
                self._stats.setdefault(key, []).append(float(val.detach()))
        net.eval()
        self.counters["phases"] += 1
        self.counters["updates"] += cfg.updates_per_phase

    def _gate(self, ctx: RunContext, game: Any, step: int) -> None:
        """The trained network against the best in an arena; it replaces the best if it scores enough."""
        cfg = self.cfg
        net, best = self._require(self.net), self._require(self.best)
        seed = ctx.seed + ARENA_SEED + self.counters["gates"]
        candidate = ctx.make_search(lambda: NetworkEvaluator(net, self.device), seed=seed)
        incumbent = ctx.make_search(lambda: NetworkEvaluator(best, self.device), seed=seed + 1)
        rng = np.random.default_rng(seed)
        try:
            result: MatchResult = play_match(
                game,
                SearchPlayer("candidate", candidate, rng, temperature_moves=cfg.arena_temperature_moves),
                SearchPlayer("best", incumbent, rng, temperature_moves=cfg.arena_temperature_moves),
                cfg.gate_games,
            )
        finally:
            candidate.close()
            incumbent.close()
        self.counters["gates"] += 1
        accepted = result.score >= cfg.gate_threshold
        if accepted:
            best.load_state_dict(net.state_dict())
            self.counters["generation"] += 1
            self.elo += result.elo_difference()
        ctx.log_metrics(
            {
                "gate/score": result.score,
                "gate/accepted": float(accepted),
                "gate/generation": float(self.counters["generation"]),
                "gate/elo": self.elo,
            },
            step,
        )

    def _log(self, ctx: RunContext, step: int, clock: tuple[float, int, int]) -> None:
        now = time.perf_counter()
        sims = _simulations(ctx.search) - clock[1]
        games = self.counters["games"] - clock[2]
        metrics = {key: float(np.mean(values)) for key, values in self._stats.items() if values}
        self._stats = {}
        metrics["selfplay/games"] = float(self.counters["games"])
        metrics["train/updates"] = float(self.counters["updates"])
        metrics["train/replay_positions"] = float(len(self._require(self.replay)))
        if now > clock[0] and sims > 0:
            metrics["perf/sims_per_s"] = sims / (now - clock[0])
            metrics["perf/games_per_s"] = games / (now - clock[0])
        for source in (ctx.search, self._workers):
            if isinstance(source, MeasuredSearch):
                metrics.update(source.perf_metrics())
        ctx.log_metrics(metrics, step)

    @staticmethod
    def _require(value: Any) -> Any:
        if value is None:
            raise RuntimeError("AlphaZeroAgent: no network yet (learn() or load() first)")
        return value


def _simulations(engine: Any) -> int:
    return int(getattr(engine, "simulations", 0))


def _validate(cfg: AlphaZeroConfig) -> None:
    check_choice("agent.runner", cfg.runner, RUNNERS)
    check_at_least(
        "agent",
        cfg,
        1,
        "blocks",
        "channels",
        "parallel_games",
        "replay_size",
        "train_every",
        "updates_per_phase",
        "batch_size",
        "gate_every",
        "gate_games",
    )
    if cfg.temperature < 0:
        raise ConfigError(f"agent.temperature={cfg.temperature} must be >= 0")
    if not 0.0 <= cfg.gate_threshold <= 1.0:
        raise ConfigError(f"agent.gate_threshold={cfg.gate_threshold} must be in [0, 1]")
    if cfg.learning_rate <= 0:
        raise ConfigError(f"agent.learning_rate={cfg.learning_rate} must be > 0")


if TYPE_CHECKING:
    from framework.contracts import CheckedAgent, EvaluatingAgent, SearchAgent

    _contract: type[CheckedAgent] = AlphaZeroAgent
    _search_contract: type[SearchAgent] = AlphaZeroAgent
    _eval_contract: type[EvaluatingAgent] = AlphaZeroAgent
