"""Evaluating on the fighter: rounds that differ, a win rate with its interval, one evaluation per
opponent, and a video of the best round."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from framework.errors import ConfigError
from framework.evaluation import Episodes, play_episodes, run_episodes, summarize, wilson_interval
from framework_plugins.fighter.config import FighterConfig
from framework_plugins.fighter.env import OBSERVATION_FIELDS, BestRoundReplay, FightingEnv
from framework_plugins.fighter.plugin import Fighter
from framework_plugins.fighter.rules import A
from framework_plugins.fighter.transports import InProcessTransport
from tests.conftest import run_cli

DISTANCE, COOLDOWN = (OBSERVATION_FIELDS.index(f) for f in ("distance", "self_cooldown"))


def zoner(obs: np.ndarray) -> int:
    """A fixed, deterministic policy: the special whenever it is ready and reaches, kicks up
    close, a block while the special cools down, otherwise walk in."""
    distance = float(obs[DISTANCE]) * 1000  # the stage is 1000 pixels wide
    if obs[COOLDOWN] == 0 and abs(distance) <= 170:
        return int(A.SPECIAL)
    if abs(distance) <= 100:
        return int(A.KICK)
    if abs(distance) <= 170:
        return int(A.BLOCK)
    return int(A.RIGHT if distance > 0 else A.LEFT)


def walk_in_and_punch(obs: np.ndarray) -> int:
    return int(A.PUNCH) if abs(float(obs[DISTANCE])) * 1000 <= 60 else int(A.RIGHT)


def fighter(**cfg: object) -> Fighter:
    return Fighter(FighterConfig(transport="inprocess", **cfg))  # type: ignore[arg-type]


def test_rounds_of_one_evaluation_differ_for_a_fixed_deterministic_policy() -> None:
    found = play_episodes(zoner, fighter().make_variant("aggressive", seed=0), episodes=10, seed=10_000)
    assert summarize(found)["eval/return_std"] > 0.1
    assert len(set(found.returns)) >= 5, found.returns


def test_an_evaluation_repeats_exactly_for_its_seed() -> None:
    def rounds(seed: int) -> Episodes:
        return play_episodes(zoner, fighter().make_variant("aggressive", seed=0), episodes=5, seed=seed)

    assert rounds(3) == rounds(3)
    assert rounds(3).returns != rounds(4).returns


def test_a_win_rate_comes_with_its_wilson_interval() -> None:
    """Known cases: every round won against `idle`, and none (a time-out draw each) by standing still."""
    won = run_episodes(walk_in_and_punch, FightingEnv(opponent="idle"), episodes=20, seed=0)
    assert won["eval/win_rate"] == 1.0
    assert won["eval/win_rate_ci_low"] == pytest.approx(0.8389, abs=1e-4)
    assert won["eval/win_rate_ci_high"] == 1.0
    drawn = run_episodes(lambda obs: int(A.NOOP), FightingEnv(opponent="idle"), episodes=2, seed=0)
    assert drawn["eval/win_rate"] == 0.0
    interval = (drawn["eval/win_rate_ci_low"], drawn["eval/win_rate_ci_high"])
    assert interval == pytest.approx((0.0, 0.6576), abs=1e-4)
    assert "eval/damage_dealt_ci_low" not in won  # not a 0/1 outcome


def test_wilson_interval_matches_the_textbook_values() -> None:
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(100, 100) == pytest.approx((0.9630, 1.0), abs=1e-4)
    assert wilson_interval(0, 100) == pytest.approx((0.0, 0.0370), abs=1e-4)
    with pytest.raises(ValueError, match="successes=11 must be within 0..n=10"):
        wilson_interval(11, 10)


def test_only_a_rate_of_zeros_and_ones_gets_an_interval() -> None:
    found = Episodes([1.0, 0.0, 2.0], [10, 20, 30], {"win_rate": [1, 0, 1], "hit_rate": [0.5, 0.2, 1.0]})
    metrics = summarize(found, "eval/aggressive")
    low, high = wilson_interval(2, 3)
    assert metrics["eval/aggressive/win_rate_ci_low"] == low
    assert metrics["eval/aggressive/win_rate_ci_high"] == high
    assert metrics["eval/aggressive/hit_rate"] == pytest.approx(1.7 / 3)
    assert "eval/aggressive/hit_rate_ci_low" not in metrics


def test_the_replay_keeps_the_best_round_and_writes_it_as_a_video(tmp_path: Path) -> None:
    env = BestRoundReplay(FightingEnv(opponent="idle"))
    assert env.write_best_episode(tmp_path, "none") is None  # nothing kept yet
    env.keep_best_episode()
    lengths = []
    for policy in (lambda obs: int(A.NOOP), walk_in_and_punch, lambda obs: int(A.BLOCK)):  # draw, win, draw
        lengths.append(play_episodes(policy, env, episodes=1, seed=0).lengths[0])
    path = env.write_best_episode(tmp_path, "best")
    assert path == tmp_path / "best.mp4" and path.stat().st_size > 1000
    frames = iio.imread(path, plugin="pyav")
    assert len(frames) == lengths[1] + 1  # the won round, from its first state to its last
    assert lengths[1] < lengths[0] == lengths[2]


def test_bad_evaluation_opponents_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"env.eval_opponents='boss' is not valid; choose one of idle, "):
        fighter(eval_opponents=["aggressive", "boss"])
    with pytest.raises(ConfigError, match=r"env.eval_opponents=\['random', 'random'\] names an opponent tw"):
        fighter(eval_opponents=["random", "random"])


def test_evaluation_envs_play_the_in_process_twin_whatever_the_training_transport() -> None:
    env = Fighter(FighterConfig(transport="python")).make_variant("defensive", seed=0)
    assert isinstance(env.fighter.transport, InProcessTransport) and env.fighter.opponent == "defensive"


@pytest.mark.slow
def test_a_run_logs_every_opponents_metrics_and_attaches_its_best_rounds(tmp_path: Path) -> None:
    r = run_cli(
        "env=fighter", "env.transport=inprocess", "env.n_envs=2", "env.eval_opponents=[aggressive,defensive]",
        "agent=ppo", "agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64", "total_steps=128",
        "eval.episodes=3", "eval.every_steps=0", "eval.video=true", "progress=off",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    metrics = run.data.metrics
    for prefix in ("eval/aggressive", "eval/defensive", "eval"):
        for name in ("win_rate", "win_rate_ci_low", "win_rate_ci_high", "damage_dealt", "return_std"):
            assert f"{prefix}/{name}" in metrics, (prefix, name, sorted(metrics))
        assert metrics[f"{prefix}/win_rate_ci_low"] <= metrics[f"{prefix}/win_rate"]
        assert metrics[f"{prefix}/win_rate"] <= metrics[f"{prefix}/win_rate_ci_high"]
    assert "eval/random/win_rate" not in metrics
    means = [metrics["eval/aggressive/return_mean"], metrics["eval/defensive/return_mean"]]
    assert metrics["eval/return_mean"] == pytest.approx(np.mean(means))  # 3 rounds each, pooled
    videos = sorted(a.path for a in client.list_artifacts(run.info.run_id, "videos"))
    assert videos == ["videos/best-aggressive.mp4", "videos/best-defensive.mp4"]
    (local,) = tmp_path.glob("outputs/*/*/videos/best-aggressive.mp4")
    assert local.stat().st_size > 1000
