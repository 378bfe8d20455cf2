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
        # A Discrete observation, and a toy-text env whose step takes its action as a dict key.
        ("env=gym", "env.id=FrozenLake-v1", "agent=ppo", "agent.hyperparams.n_steps=64", "total_steps=128"),
        # Any algorithm by name from the library's defaults; policy=auto takes RecurrentPPO's own MLP.
        ("agent=sb3", "agent.algo=ARS", "total_steps=200"),
        ("agent=sb3", "agent.algo=RecurrentPPO", "+agent.hyperparams.n_steps=64", "total_steps=128"),
    ],
    ids=["ppo", "a2c", "sb3_dqn", "qrdqn", "sac", "td3", "ppo_frozenlake", "ars", "recurrent_ppo"],
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


def test_continuous_algorithm_on_discrete_env_is_refused_before_the_run(tmp_path: Path) -> None:
    from framework.errors import ConfigError

    said = r"agent.algo=SAC trains on Box action spaces, and this env's is Discrete\(2\)"
    with pytest.raises(ConfigError, match=said):
        train(tmp_path, "agent=sac", "total_steps=100")
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before the run started


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


# -- mini-batches that divide the rollout ----------------------------------------------------------

#: The README's example, shortened to a few rollouts: the tuned CartPole PPO (n_steps=32 and
#: batch_size=256 for 8 envs) on 4 envs, a rollout of 128 steps.
README_COMMAND = ["agent=ppo", "agent.hyperparams.n_epochs=10", "env.n_envs=4", "seed=3"]


def test_sb3_warns_of_a_batch_size_that_does_not_divide_the_rollout_as_captured_here() -> None:
    """The capture the next test relies on does see SB3's warning (so its silence means something)."""
    import warnings

    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4), n_steps=32, batch_size=256, device="cpu")
    assert any("mini-batch size of 256" in str(w.message) for w in caught)


def test_the_readme_command_runs_with_the_presets_batch_size_following_and_no_sb3_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import warnings

    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO, logger="framework_plugins.sb3")
    overrides = [o for o in SHORT if o != "tracking=none"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(compose([*overrides, *README_COMMAND, "total_steps=256"]), run_dir=tmp_path / "run")
    assert [str(w.message) for w in caught if "mini-batch" in str(w.message)] == []
    said = [r.getMessage() for r in caplog.records if "batch_size" in r.getMessage()]
    assert said == [
        "agent.hyperparams.batch_size=256 (the preset's) follows the rollout of n_steps x env.n_envs = "
        "32 x 4 = 128 steps: PPO uses 128, the nearest divisor"
    ]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    (r,) = client.search_runs([experiment.experiment_id])
    assert r.data.tags["sb3.batch_size_used"] == "128"  # the params keep the preset's 256
    assert r.data.params["agent.hyperparams.batch_size"] == "256"


def test_a_batch_size_set_on_the_command_line_that_does_not_divide_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    from tests.conftest import run_cli

    r = run_cli(*README_COMMAND, "agent.hyperparams.batch_size=100", "tracking=none", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "Error: agent.hyperparams.batch_size=100 does not divide the rollout of n_steps x env.n_envs = "
        "32 x 4 = 128 steps: write agent.hyperparams.batch_size=128 or 64 (or drop it: the config's "
        "follows env.n_envs)"
    ]
    assert "Traceback" not in r.output and not list(tmp_path.glob("outputs/*/*"))  # no run began


def test_a_sweeps_job_whose_batch_size_does_not_divide_is_refused_before_the_first_job(
    tmp_path: Path,
) -> None:
    """Job 1 (4 envs: a rollout of 128) cannot take batch_size=256, which job 0 (8 envs) can: the
    sweep is refused before job 0 runs, each job's own command line read as its start reads it."""
    from tests.conftest import run_cli

    r = run_cli(
        "-m", "agent=ppo", "env.n_envs=8,4", "agent.hyperparams.batch_size=256", "tracking=none",
        "total_steps=512", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.output[-2000:]
    assert r.stderr.strip().splitlines() == [
        "Error: job 1 of the sweep (env.n_envs=4): agent.hyperparams.batch_size=256 does not divide the "
        "rollout of n_steps x env.n_envs = 32 x 4 = 128 steps: write agent.hyperparams.batch_size=128 "
        "(or drop it: the config's follows env.n_envs)"
    ]
    assert not list(tmp_path.glob("multirun/*/*/*"))  # no job ran


@pytest.mark.parametrize(
    ("n_steps", "n_envs", "batch_size", "used"),
    [(32, 8, 256, 256), (32, 4, 256, 128), (2048, 3, 64, 64), (32, 3, 64, 48), (7, 1, 2, 7),
     (100, 1, 30, 25)],
)  # fmt: skip
def test_a_presets_batch_size_follows_to_the_nearest_divisor_of_the_rollout(
    n_steps: int, n_envs: int, batch_size: int, used: int
) -> None:
    from stable_baselines3 import PPO

    from framework_plugins.sb3.minibatch import minibatch

    hyperparams = {"n_steps": n_steps, "batch_size": batch_size}
    batch = minibatch(PPO, hyperparams, n_envs, explicit=False)
    assert batch is not None and batch.batch_size == used
    assert (n_steps * n_envs) % batch.batch_size == 0 and batch.batch_size > 1
    assert bool(batch.note) == (used != batch_size)
    if used == batch_size:  # a batch_size that divides passes as it is, set on the command line too
        assert minibatch(PPO, hyperparams, n_envs, explicit=True) == batch


def test_algorithms_without_mini_batches_of_the_rollout_are_left_alone() -> None:
    from stable_baselines3 import A2C, DQN, SAC

    from framework_plugins.sb3.minibatch import minibatch

    for algo in (A2C, DQN, SAC):
        assert minibatch(algo, {"batch_size": 100, "n_steps": 3}, 7, explicit=True) is None


def test_a_default_batch_size_that_follows_the_rollout_is_called_the_librarys_not_a_presets() -> None:
    from stable_baselines3 import PPO

    from framework_plugins.sb3.minibatch import minibatch

    for hyperparams in ({"n_steps": 100}, {"n_steps": 100, "batch_size": 64}):  # PPO's 64, not a tuned one
        found = minibatch(PPO, hyperparams, 1, explicit=False)
        assert found is not None and found.batch_size == 50
        assert found.note.startswith("agent.hyperparams.batch_size=64 (PPO's default) follows the rollout")


def test_observations_no_sb3_policy_reads_end_the_run_in_one_message(tmp_path: Path) -> None:
    """Blackjack's Tuple observations: SB3's NotImplementedError, said as the setting to change."""
    from framework.errors import RunFailed

    with pytest.raises(RunFailed) as failed:
        train(tmp_path, "env=gym", "env.id=Blackjack-v1", "agent=ppo", "total_steps=64")
    assert str(failed.value.__cause__).startswith(
        "agent.algo=PPO cannot learn on this env's observations, Tuple(Discrete(32), Discrete(11)"
    )


def test_a_presets_hyperparameter_another_algorithm_lacks_says_how_to_start_from_its_defaults() -> None:
    from framework.errors import ConfigError
    from framework_plugins.sb3.algorithms import algorithm_class, check_hyperparams

    with pytest.raises(ConfigError, match=r"agent=sb3 agent.algo=ARS starts from ARS's defaults"):
        check_hyperparams(algorithm_class("ARS"), {"n_steps": 2048}, "auto", {})


def test_a_rollout_longer_than_the_budget_left_is_said_as_training_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rollout is trained whole: the run went on to 16,384 steps of a 1,000 budget, its bar at 100 %."""
    caplog.set_level("WARNING", logger="framework_plugins.sb3.agent")
    train(
        tmp_path,
        "agent=ppo",
        "agent.hyperparams.n_steps=64",
        "env.n_envs=1",
        "total_steps=40",
    )
    said = [r.getMessage() for r in caplog.records if "one rollout is" in r.getMessage()]
    assert said == [
        "one rollout is 64 steps (agent.hyperparams.n_steps=64 x env.n_envs=1), more than the 40 left of "
        "total_steps=40: the run trains 64"
    ], said


def test_an_off_policy_run_that_ends_before_learning_starts_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="framework_plugins.sb3.agent")
    train(tmp_path, "agent=sb3_dqn", "agent.hyperparams.learning_starts=500", "total_steps=100")
    said = [r.getMessage() for r in caplog.records if "it trains nothing" in r.getMessage()]
    assert said == [
        "training starts at step 500 (agent.hyperparams.learning_starts), and this run ends at step 100: "
        "it trains nothing (raise total_steps)"
    ], said


def test_a_resumed_part_seeds_its_envs_past_the_steps_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed PPO run reset its envs with the seeds its first part began with: every episode start
    of the first part again, after every resume."""
    from framework_plugins.sb3 import agent as sb3_agent

    seeds: list[int] = []
    real = sb3_agent.make_vec_env

    def recorded(env_plugin, n_envs, *, seed, kind):  # type: ignore[no-untyped-def]
        seeds.append(seed)
        return real(env_plugin, n_envs, seed=seed, kind=kind)

    monkeypatch.setattr(sb3_agent, "make_vec_env", recorded)
    ppo = ("agent=ppo", "agent.hyperparams.n_steps=64", "seed=5", "tracking=none")
    train(tmp_path, *ppo, "total_steps=512")  # one rollout of 64 steps in each of its 8 envs
    more = [f"resume={tmp_path / 'run'}", "total_steps=1024"]
    run(compose([*SHORT, *ppo, *more]), run_dir=tmp_path / "again", overrides=more)
    assert seeds == [5, 5 + 512]


def test_an_off_policy_run_resumed_without_its_buffer_gathers_one_again_before_it_trains(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SB3's DQN trained at once on a near-empty buffer after a resume, saying nothing (n_updates rose
    by 384 in the 435 steps after it), where ours gathers learning_starts transitions again."""
    dqn = ("agent=sb3_dqn", "agent.hyperparams.learning_starts=50", "agent.hyperparams.train_freq=16")
    train(tmp_path, *dqn, "total_steps=100")  # ends at 112, its rollouts train_freq=16 steps each
    with caplog.at_level("WARNING"):
        more = [f"resume={tmp_path / 'run'}", "total_steps=300"]
        run(compose([*SHORT, *dqn, *more]), run_dir=tmp_path / "b", overrides=more)
    said = " ".join(caplog.text.split())
    assert "the checkpoint holds no replay buffer (agent.save_replay_buffer=false): the run gathers " in said
    assert "learning_starts=50 transitions again, acting at random, and trains from step 162" in said
