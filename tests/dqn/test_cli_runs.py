"""agent=dqn end to end through `python -m framework`: CartPole, resume, Atari, config errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.test_refusals import assert_no_run, assert_refused

pytestmark = pytest.mark.slow

#: A short CartPole run that trains: train phases at steps 256 and 512 (128 gradient steps each).
SHORT = [
    "agent=dqn",
    "env=cartpole",
    "total_steps=600",
    "agent.learning_starts=200",
    "agent.log_every_steps=100",
    # ε over a fixed 8,000 steps rather than a fraction of total_steps, which a resume may raise.
    "agent.exploration.fraction=null",
    "+agent.exploration.steps=8000",
    "eval.every_steps=300",
    "eval.episodes=2",
    "checkpoint.every_steps=300",
    "log_every_s=0.5",
]


def only_run(tmp_path: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    return client, run


def history(client: MlflowClient, run, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]


def test_cartpole_run_logs_train_and_rollout_metrics_and_finishes(cli, tmp_path: Path) -> None:
    r = cli(*SHORT, "hydra.run.dir=outputs/run")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 600" in r.output
    client, run = only_run(tmp_path)
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("dqn-s0 ")
    assert " cartpole" in run.info.run_name
    assert run.data.params["buffer.name"] == "replay" and run.data.params["buffer.capacity"] == "100000"
    for key in ("train/loss", "train/q_mean", "train/grad_norm", "train/epsilon", "train/learning_rate"):
        assert key in run.data.metrics, key
    assert {"rollout/ep_rew_mean", "rollout/ep_len_mean", "eval/return_mean", "perf/env_steps_per_s"} <= set(
        run.data.metrics
    )
    assert history(client, run, "train/n_updates")[-1] == (600, 256.0)
    epsilon = history(client, run, "train/epsilon")
    assert [s for s, _ in epsilon] == [100, 200, 300, 400, 500, 600]
    assert epsilon[0][1] == pytest.approx(1.0 - 0.96 * 100 / 8000)  # ε: 1 → 0.04 over 8,000 steps
    assert (tmp_path / "outputs/run/checkpoints/step_0000000600/agent/dqn.pt").is_file()


def test_resume_continues_epsilon_the_step_count_and_training(cli, tmp_path: Path) -> None:
    first = cli(*SHORT, "agent.save_buffer=true", "hydra.run.dir=outputs/a")
    assert first.returncode == 0, first.output[-3000:]
    client, run = only_run(tmp_path)
    again = cli(f"resume={run.info.run_id}", "total_steps=1000", "hydra.run.dir=outputs/b")
    assert again.returncode == 0, again.output[-3000:]
    assert "FINISHED at step 1000" in again.output
    client, resumed = only_run(tmp_path)
    assert resumed.info.run_id == run.info.run_id
    assert resumed.data.tags["framework.resumed_from_step"] == "600"
    epsilon = dict(history(client, resumed, "train/epsilon"))
    assert sorted(epsilon)[-4:] == [700, 800, 900, 1000]
    assert epsilon[700] == pytest.approx(1.0 - 0.96 * 700 / 8000)  # carried on, not restarted at 1.0
    # The saved buffer skips the warm-up: the train phase at step 768 runs right away.
    assert dict(history(client, resumed, "train/n_updates"))[800] == 384.0


def test_a_resume_without_its_buffer_says_when_training_starts_again(cli, tmp_path: Path) -> None:
    first = cli(*SHORT, "hydra.run.dir=outputs/a")  # agent.save_buffer=false: the default
    assert first.returncode == 0, first.output[-3000:]
    client, run = only_run(tmp_path)
    short = cli(f"resume={run.info.run_id}", "total_steps=700", "hydra.run.dir=outputs/b")
    assert short.returncode == 0, short.output[-3000:]
    assert (
        "resumed at step 600 without its replay buffer (checkpoints keep it with agent.save_buffer=true): "
        "training starts again once it holds 200 transitions, at step 800, and this run ends at step "
        "700: it trains nothing (raise total_steps)"
    ) in short.said
    client, run = only_run(tmp_path)
    assert dict(history(client, run, "train/n_updates"))[700] == 256.0  # no update since step 600


def test_atari_pong_trains_with_the_memory_efficient_buffer(cli, tmp_path: Path) -> None:
    r = cli(
        "env=atari", "env.game=Pong", "agent=dqn", "total_steps=300", "agent.learning_starts=200",
        "agent.log_every_steps=100", "buffer.capacity=1000", "env.max_episode_steps=100", "eval.episodes=1",
        "eval.every_steps=0", "checkpoint.every_steps=0", "hydra.run.dir=outputs/pong",
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 300" in r.output
    client, run = only_run(tmp_path)
    assert run.data.params["buffer.name"] == "memory_efficient"
    assert run.data.params["buffer.frame_history_len"] == "4"
    assert history(client, run, "train/n_updates")[-1] == (300, 26.0)  # steps 200, 204, ..., 300
    assert 0 < run.data.metrics["eval/length_mean"] <= 100  # noop resets use part of the frames


def test_bad_agent_config_fails_before_training_naming_the_choices(cli) -> None:
    r = cli("agent=dqn", "agent.loss=l1", "tracking=none")
    assert r.returncode == 1
    assert "agent.loss='l1' is not valid; choose one of huber, mse" in r.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            ["env=gym", "env.id=CliffWalking-v1"],
            "agent=dqn reads Box observations (a vector, or image frames), and this env's are Discrete(48): "
            "choose an env with Box observations (or wrap this one so that it has them), or an SB3 agent",
        ),
        (
            ["env=gym", "env.id=Blackjack-v1"],
            "and this env's are Tuple(Discrete(32), Discrete(11), Discrete(2))",
        ),
        (["env=lunarlander", "env.continuous=true"], "agent=dqn needs a discrete action space"),
    ],
    ids=["discrete_obs", "tuple_obs", "box_actions"],
)
def test_spaces_dqn_cannot_train_on_are_refused_before_a_run_exists(
    cli, tmp_path: Path, env: list[str], message: str
) -> None:
    r = cli("agent=dqn", *env, "total_steps=200")
    assert_refused(r, message)
    assert_no_run(tmp_path)
