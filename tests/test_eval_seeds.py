"""Evaluation seeds apart from every training seed, taken by every env family; the untrained agent's
evaluation logged as eval_untrained/* at step 0, never as the objective's first point."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlflow.tracking import MlflowClient

from framework import config
from framework.app import compose
from framework.checkpoint import Checkpointer
from framework.context import RunContext
from framework.evaluation import EVALUATION_SEEDS_FROM, RUN_SEEDS, evaluation_seed, untrained_metric
from framework.progress import ProgressDisplay
from framework_plugins.alphazero.gating import gate_seeds
from framework_plugins.fighter.config import FighterConfig
from framework_plugins.fighter.env import (
    EVALUATION_GAME_SEEDS,
    TRAINING_GAME_SEEDS,
    BestRoundReplay,
    FightingEnv,
)
from framework_plugins.fighter.plugin import Fighter
from framework_plugins.fighter.transports import InProcessTransport
from framework_plugins.gym_envs.envs import CartPole
from framework_plugins.trackers.null_tracker import NullTracker
from tests.conftest import run_cli

#: The highest seed a run may have (FrameworkConfig.seed).
MAX_SEED = RUN_SEEDS - 1
#: More than any count a training seed adds to a run's seed: envs, steps before a resume, workers.
COUNTS = 2**63
#: Seeds at the edges of the allowed range, and the old scheme's collision (run 10000's env 0 was
#: seeded as run 0's evaluation: seed + 10_000).
EDGE_SEEDS = [0, 1, 10_000, 2**31, MAX_SEED]

run_seeds = st.integers(min_value=0, max_value=MAX_SEED)
indices = st.integers(min_value=0, max_value=2**40)


def env_plugin(*overrides: str) -> Any:
    section = config.plugin_section(compose(list(overrides)), "env")
    assert section is not None
    return section.plugin(section.cfg)


# The seed function.


@given(run_seeds, indices, run_seeds, st.integers(min_value=0, max_value=COUNTS - 1))
def test_no_evaluation_seed_is_a_training_seed_of_any_run(
    seed: int, index: int, other: int, count: int
) -> None:
    """A training seed is a run's seed plus a count (an env's index with any n_envs, steps done
    before a resume, a worker's number): whatever the two runs' seeds, they never meet."""
    assert evaluation_seed(seed, index) != other + count
    assert evaluation_seed(seed, index) >= EVALUATION_SEEDS_FROM > MAX_SEED + COUNTS - 1


@pytest.mark.parametrize("seed", EDGE_SEEDS)
@pytest.mark.parametrize("other", EDGE_SEEDS)
def test_no_evaluation_seed_is_a_training_seed_at_the_edges(seed: int, other: int) -> None:
    training = {other + i for i in range(100_000)}  # n_envs up to 100,000
    assert not training & {evaluation_seed(seed, index) for index in range(100)}


@given(run_seeds, indices, run_seeds, indices)
def test_each_seed_and_index_has_an_evaluation_seed_of_its_own(a: int, i: int, b: int, j: int) -> None:
    assert (evaluation_seed(a, i) == evaluation_seed(b, j)) == ((a, i) == (b, j))


def test_every_evaluation_of_a_run_has_one_seed() -> None:
    assert evaluation_seed(7) == evaluation_seed(7, 0) == evaluation_seed(7)


@pytest.mark.parametrize(
    ("seed", "index", "message"),
    [
        (-1, 0, r"seed=-1 must be from 0 to 4294967295"),
        (2**32, 0, r"seed=4294967296 must be from 0 to 4294967295"),
        (0, -1, r"index=-1 must be 0 or more"),
    ],
)
def test_a_seed_outside_the_range_is_refused_naming_it(seed: int, index: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluation_seed(seed, index)


@given(run_seeds, st.integers(min_value=0, max_value=2**30))
def test_alphazero_gates_play_on_evaluation_seeds_of_their_own(seed: int, index: int) -> None:
    candidate, best = gate_seeds(seed, index)
    assert min(candidate, best) >= EVALUATION_SEEDS_FROM and candidate != best
    assert evaluation_seed(seed) not in (candidate, best)  # nor the run's evaluations'
    assert not {candidate, best} & set(gate_seeds(seed, index + 1))


# Every env family takes an evaluation seed: in make, make_variant and reset, repeatably.

EVAL_SEEDS = [evaluation_seed(0), evaluation_seed(MAX_SEED, 2**20)]


def first_steps(env: gym.Env, seed: int, steps: int = 50) -> list[Any]:
    """The observations and rewards of `steps` steps from a reset with `seed`, actions drawn by
    the action space seeded with the same seed (as the env plugin seeds it)."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    seen: list[Any] = [np.asarray(obs).copy()]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        seen += [np.asarray(obs).copy(), float(reward)]
        if terminated or truncated:
            break
    return seen


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    "overrides",
    [
        ("env=cartpole",),
        ("env=lunarlander",),
        ("env=lunarlander", "env.continuous=true"),
        ("env=atari", "env.game=Pong", "env.frame_stack=2"),
        ("env=atari", "env.game=Breakout", "env.frame_stack=1"),
    ],
    ids=["cartpole", "lunarlander", "lunarlander-continuous", "atari-pong", "atari-breakout"],
)
@pytest.mark.parametrize("seed", EVAL_SEEDS, ids=["seed0", "max-seed-index"])
def test_gymnasium_envs_take_evaluation_seeds(overrides: tuple[str, ...], seed: int) -> None:
    plugin = env_plugin(*overrides)
    env = plugin.make(seed=seed, index=0, evaluation=True)
    try:
        once, again = first_steps(env, seed), first_steps(env, seed)
        assert same(once, again), "a reset with an evaluation seed repeats its episode"
        # Taken whole: cut to 32 bits, it would be a training seed (2**64 would be run 0's env 0).
        assert not same(once, first_steps(env, seed % 2**32))
    finally:
        env.close()


@pytest.mark.parametrize("opponent", ["random", "heuristic", "mcts20", "alphabeta1"])
def test_gomoku_takes_evaluation_seeds_for_its_opponents(opponent: str) -> None:
    plugin = env_plugin(
        "env=gomoku", "env.board_size=7", "env.n_in_row=4", f"env.eval_opponents=[{opponent}]"
    )
    seed = evaluation_seed(MAX_SEED)

    def game() -> list[Any]:
        env = plugin.make_variant(opponent, seed=seed)
        rng = np.random.default_rng(0)
        obs, info = env.reset(seed=seed)
        seen: list[Any] = [obs.copy()]
        done = False
        while not done:  # random legal moves against the opponent, to the end of the game
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            obs, reward, terminated, truncated, info = env.step(action)
            seen += [obs.copy(), reward]
            done = terminated or truncated
        return seen

    assert same(game(), game())
    plugin.opponent(opponent, seed=seed).act(plugin.game.new_state())  # AlphaZero's evaluation's


class SeedsSeen(InProcessTransport):
    """The fighter's in-process twin, noting the game seed of every round it starts."""

    def __init__(self) -> None:
        super().__init__()
        self.seeds: list[int] = []

    def reset(self, seeds: list[int], opponent: str, arenas: list[int] | None = None) -> np.ndarray:
        self.seeds += seeds
        return super().reset(seeds, opponent, arenas)


def play_rounds(env: gym.Env, seed: int, rounds: int) -> list[float]:
    returns: list[float] = []
    total = 0.0
    env.reset(seed=seed)
    while len(returns) < rounds:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        total += float(reward)
        if terminated or truncated:
            returns.append(total)
            total = 0.0
            env.reset()
    return returns


def test_fighter_evaluation_rounds_draw_game_seeds_apart_from_training_rounds() -> None:
    """The twin's game seed is a round's whole randomness: an evaluation round's (BestRoundReplay)
    is never one a training round can draw, whatever the env seeds."""
    seed = evaluation_seed(MAX_SEED)
    evaluating = SeedsSeen()
    env = BestRoundReplay(FightingEnv(opponent="random", transport=evaluating))
    env.action_space.seed(0)
    rounds = play_rounds(env, seed, 3)
    env.action_space.seed(0)
    assert play_rounds(env, seed, 3) == rounds  # repeatable by its seed
    training = SeedsSeen()
    FightingEnv(opponent="random", transport=training).reset(seed=seed)  # the same env seed, training
    low, high = EVALUATION_GAME_SEEDS
    assert evaluating.seeds and all(low <= s < high for s in evaluating.seeds), evaluating.seeds
    assert all(TRAINING_GAME_SEEDS[0] <= s < TRAINING_GAME_SEEDS[1] for s in training.seeds)
    assert TRAINING_GAME_SEEDS[1] <= low and high - 1 <= 2**32 - 1  # apart, and within the protocol's range


def test_fighter_plugin_evaluation_envs_take_evaluation_seeds() -> None:
    plugin = Fighter(FighterConfig(transport="inprocess", eval_opponents=["aggressive"]))
    seed = evaluation_seed(12, 3)
    for env in (
        plugin.make(seed=seed, index=0, evaluation=True),
        plugin.make_variant("aggressive", seed=seed),
    ):
        try:
            assert len(play_rounds(env, seed, 2)) == 2
        finally:
            env.close()


# The run's context: evaluation envs on evaluation seeds, and the untrained agent's evaluation.


class SeedsNoted(CartPole):
    """CartPole, noting the seed of every env it makes and of every seeded reset."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.made: list[tuple[int, bool]] = []
        self.resets: list[tuple[int, bool]] = []

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env:
        self.made.append((seed, evaluation))
        plugin = self

        class Noted(gym.Wrapper):
            def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
                if seed is not None:
                    plugin.resets.append((seed, evaluation))
                return super().reset(seed=seed, options=options)

        return Noted(super().make(seed=seed, index=index, evaluation=evaluation, render_mode=render_mode))


class PointsKept(NullTracker):
    """No tracking store: the metric points a run logs, kept in a list."""

    def __init__(self, cfg: Any = None) -> None:
        super().__init__(cfg)
        self.points: list[tuple[int, dict[str, float]]] = []

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.points.append((step, dict(metrics)))


class PushesLeft:
    """An agent that always pushes the cart left (it never trains)."""

    def act(self, obs: Any, *, deterministic: bool = True) -> int:
        return 0


def context(tmp_path: Path, *overrides: str) -> tuple[RunContext, PointsKept]:
    cfg = compose(["env=cartpole", "env.n_envs=4", "seed=4294967295", "eval.episodes=3", *overrides])
    section = config.plugin_section(cfg, "env")
    assert section is not None
    tracker = PointsKept()
    return RunContext(
        cfg=cfg,
        env_plugin=SeedsNoted(section.cfg),
        seed=int(cfg.seed),
        rng=np.random.default_rng(0),
        device="cpu",
        total_steps=1000,
        tracker=tracker,
        checkpointer=Checkpointer(tmp_path, every_steps=0, keep=1, config_yaml=""),
        progress=ProgressDisplay(1000, mode="log", log_every_s=3600.0),
        run_dir=tmp_path,
    ), tracker


def test_a_run_makes_its_training_envs_on_training_seeds_and_evaluates_on_its_evaluation_seed(
    tmp_path: Path,
) -> None:
    ctx, tracker = context(tmp_path, "eval.every_steps=100", "eval.at_start=false")
    plugin = ctx.env_plugin
    assert isinstance(plugin, SeedsNoted)
    for index in range(ctx.n_envs):
        env = ctx.make_env(index)
        env.reset(seed=ctx.seed + index)
        env.close()
    ctx.after_step(100, PushesLeft())  # a periodic evaluation
    ctx.after_step(200, PushesLeft())  # another: the same seed, the same episodes
    ctx.close()
    evaluation = evaluation_seed(ctx.seed)
    assert [s for s, e in plugin.made if e] == [evaluation]
    assert [s for s, e in plugin.resets if e] == [evaluation, evaluation]
    training = [s for s, e in plugin.made + plugin.resets if not e]
    assert training == [ctx.seed + i for i in range(ctx.n_envs)] * 2
    points = [(step, m["eval/return_mean"]) for step, m in tracker.points if "eval/return_mean" in m]
    assert [step for step, _ in points] == [100, 200] and points[0][1] == points[1][1]


def test_the_untrained_agents_evaluation_is_logged_apart_at_step_0(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """eval_untrained/* at step 0, with the same suffixes as eval/*; the objective, the display and the
    run's last evaluation (its summary, its checkpoint) wait for the training agent's."""
    caplog.set_level(logging.INFO, logger="framework")
    ctx, tracker = context(tmp_path, "eval.every_steps=500", "eval.at_start=true")
    agent = PushesLeft()
    ctx.after_step(4, agent)  # the first vector step: the agent as built
    ((step, untrained),) = tracker.points
    assert step == 0 and untrained and all(k.startswith("eval_untrained/") for k in untrained)
    assert next(iter(untrained)) == untrained_metric("eval/return_mean")  # the objective's own first
    assert ctx.last_eval == {} and ctx.progress.eval_value is None
    said = f"untrained agent: eval_untrained/return_mean {untrained['eval_untrained/return_mean']:.4g}"
    assert said in caplog.text
    ctx.after_step(8, agent)  # no second one
    assert len(tracker.points) == 1
    ctx.after_step(500, agent)
    step, trained = tracker.points[-1]
    assert step == 500 and {untrained_metric(k) for k in trained} == set(untrained)
    assert ctx.last_eval == trained and ctx.last_eval_step == 500
    assert ctx.progress.eval_value == trained["eval/return_mean"]
    ctx.close()


def test_a_run_logs_its_untrained_evaluation_at_step_0_and_none_as_its_objective(tmp_path: Path) -> None:
    """End to end, into a tracking store: eval_untrained/return_mean has its one point at step 0, and
    eval/return_mean's curve starts at the first evaluation of the training agent."""
    r = run_cli(
        "total_steps=1024", "eval.every_steps=512", "eval.episodes=2", "eval.at_start=true",
        "checkpoint.every_steps=0", "progress=log", "hydra.run.dir=run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])

    def history(key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))

    untrained = history("eval_untrained/return_mean")
    assert [step for step, _ in untrained] == [0]
    curve = history("eval/return_mean")
    assert [step for step, _ in curve] == [512, 1024], curve
    assert run.data.metrics["eval/return_mean"] == curve[-1][1]  # what a sweep's summary reads
    metrics = set(run.data.metrics)
    evaluated = {k.removeprefix("eval/") for k in metrics if k.startswith("eval/")}
    assert {
        k.removeprefix("eval_untrained/") for k in metrics if k.startswith("eval_untrained/")
    } == evaluated
    assert f"untrained agent: eval_untrained/return_mean {untrained[0][1]:.4g}" in r.output
    final = r.output[r.output.rindex("Run FINISHED") :]  # the run's last lines: the final evaluation
    assert f"  eval/return_mean  {curve[-1][1]:.4g}" in final, final
