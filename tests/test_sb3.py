"""The SB3 agent plugin: every algorithm trains through the run lifecycle; errors are clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.app import compose
from framework.run import run

pytestmark = pytest.mark.slow

SHORT = ["tracking=none", "eval.episodes=1", "eval.every_steps=0", "checkpoint.every_steps=0", "progress=off"]


def train(tmp_path: Path, *overrides: str) -> dict[str, float]:
    return run(compose([*SHORT, *overrides]), run_dir=tmp_path / "run")


@pytest.mark.parametrize(
    "overrides",
    [
        ("agent=ppo", "agent.hyperparams.n_steps=64", "total_steps=512"),
        ("agent=a2c", "total_steps=400"),
        ("agent=sb3_dqn", "agent.hyperparams.learning_starts=100", "total_steps=400"),
        ("agent=qrdqn", "agent.hyperparams.learning_starts=100", "total_steps=300"),
        ("env=lunarlander", "agent=sac", "agent.hyperparams.learning_starts=100", "total_steps=300"),
        ("env=lunarlander", "agent=td3", "agent.hyperparams.learning_starts=100", "total_steps=300"),
    ],
    ids=["ppo", "a2c", "sb3_dqn", "qrdqn", "sac", "td3"],
)
def test_algorithm_trains_and_evaluates(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    final = train(tmp_path, *overrides)
    assert final["eval/length_mean"] >= 1
    assert (tmp_path / "run" / "checkpoints").is_dir()
    (latest,) = [p for p in (tmp_path / "run" / "checkpoints").glob("step_*")]
    assert (latest / "agent" / "model.zip").is_file()


def test_td3_gets_zoo_action_noise(tmp_path: Path) -> None:
    cfg = compose(["env=lunarlander", "agent=td3"])
    assert cfg.env.continuous is True
    assert cfg.agent.hyperparams.noise_type == "normal"


def test_continuous_algorithm_on_discrete_env_fails_clearly(tmp_path: Path) -> None:
    from framework.errors import ConfigError, RunFailed

    with pytest.raises(RunFailed, match="Run FAILED at step 0") as failed:
        train(tmp_path, "agent=sac", "total_steps=100")
    assert isinstance(failed.value.__cause__, ConfigError)
    assert "agent.algo=SAC trains on Box action spaces, and this env's is Discrete(2)" in str(
        failed.value.__cause__
    )


def test_unknown_algorithm_lists_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Unknown SB3 algorithm agent.algo='PP0'. Did you mean PPO\?"):
        train(tmp_path, "agent=ppo", "agent.algo=PP0")


def test_n_envs_vectorises_training(tmp_path: Path) -> None:
    from framework import config
    from framework_plugins.sb3.vec_env import make_vec_env

    cfg = compose(["env.n_envs=4"])
    section = config.plugin_section(cfg, "env")
    assert section is not None
    venv = make_vec_env(section.plugin(section.cfg), 4, seed=0, kind="dummy")
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (4, 4)
    assert len({tuple(row) for row in obs.round(6)}) == 4
    venv.close()


def test_linear_schedule_decays_to_zero() -> None:
    from framework_plugins.sb3.algorithms import parse_value

    schedule = parse_value("learning_rate", "lin_0.001")
    assert schedule(1.0) == pytest.approx(0.001) and schedule(0.25) == pytest.approx(0.00025)


def test_eval_video_is_recorded_and_attached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    overrides = [o for o in SHORT if o != "tracking=none"] + ["agent=ppo"]
    final = run(
        compose([*overrides, "total_steps=256", "agent.hyperparams.n_steps=32", "eval.video=true"]),
        run_dir=tmp_path / "run",
    )
    videos = list((tmp_path / "run" / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000
    assert final["eval/return_mean"] > 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (r,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert [a.path for a in client.list_artifacts(r.info.run_id, "videos")] == [f"videos/{videos[0].name}"]
    assert r.data.metrics["perf/env_steps_per_s"] > 0  # logged even when the run is shorter than log_every_s
