"""A plugin's own settings refused before anything starts, as test_refusals.py's core mistakes are: an
SB3 hyperparameter, policy argument, policy, env setting or action space SB3 cannot take; Ray actors
and workers the machine cannot hold; frames a stacking buffer cannot take."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_refusals import assert_no_run, assert_refused


def test_a_misspelled_sb3_hyperparameter_added_with_plus_is_checked_against_the_constructor(
    cli, tmp_path: Path
) -> None:
    r = cli("agent=ppo", "+agent.hyperparams.lerning_rate=0.1")
    assert_refused(
        r,
        "agent.hyperparams.lerning_rate is not a PPO hyperparameter",
        "Did you mean agent.hyperparams.learning_rate?",
    )
    assert_no_run(tmp_path)


def test_a_misspelled_policy_argument_names_the_closest(cli, tmp_path: Path) -> None:
    r = cli("agent=ppo", "+agent.policy_kwargs.net_arc=[8]")
    assert_refused(r, "agent.policy_kwargs.net_arc", "Did you mean agent.policy_kwargs.net_arch?")
    assert_no_run(tmp_path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["agent=ppo", "+agent.policy_kwargs.net_arch=[abc]"],
            "Error: agent.policy=MlpPolicy with agent.policy_kwargs={'net_arch': ['abc']} cannot be built "
            "for this env's observations Box(shape=(4,), float32) and actions Discrete(2): ",
        ),
        (
            ["agent=ppo", "agent.policy=CnnPolicy"],
            "Error: agent.policy=CnnPolicy cannot be built for this env's observations Box(shape=(4,), "
            "float32) and actions Discrete(2): You should use NatureCNN only with images",
        ),
        (
            ["env=lunarlander", "agent=ppo", "+env.kwargs.gravity=5.0"],
            "Error: env LunarLander-v3 cannot be made with these settings: gravity",
        ),
    ],
)
def test_a_policy_or_env_setting_sb3_cannot_build_is_refused_before_any_run(
    cli, tmp_path: Path, args: list[str], said: str
) -> None:
    """Each was a traceback and a FAILED run, found as SB3 made its model once training started."""
    r = cli(*args, "total_steps=300")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert " ".join(r.stderr.split()).startswith(said), r.stderr
    if "agent.policy=CnnPolicy" in args:  # SB3's numpy print of the space, and its links, left out
        assert " ".join(r.stderr.split()).endswith(
            "(you are probably using `CnnPolicy` instead of `MlpPolicy` or `MultiInputPolicy`) (CnnPolicy "
            "reads images: MlpPolicy reads vectors, and agent.policy=auto chooses)"
        ), r.stderr
    if "+agent.policy_kwargs.net_arch=[abc]" in args:
        assert "(net_arch is a list of layer sizes, [64, 64], or one per network" in r.stderr, r.stderr
    assert_no_run(tmp_path)


def test_spaces_the_algorithm_does_not_take_are_refused_before_any_run(cli, tmp_path: Path) -> None:
    """SAC on CartPole was refused only as SB3 made its model: a FAILED run for a config mistake."""
    r = cli("agent=sac", "total_steps=300")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    said = "Error: agent.algo=SAC trains on Box action spaces, and this env's is Discrete(2): choose an agent"
    assert r.stderr.startswith(said), r.stderr
    assert "or an env with Box actions (env=lunarlander env.continuous=true)" in " ".join(r.stderr.split())
    # A tuned preset's noise_type is not what is wrong: the spaces are (it named noise_type first).
    r = cli("env=lunarlander", "agent=td3", "env.continuous=false", "total_steps=300")
    said = " ".join(r.stderr.split())
    assert said.startswith("Error: agent.algo=TD3 trains on Box action spaces, and this env's is Discrete(4)")
    # A Box env for a Discrete-only agent: the env to choose is not the one given.
    r = cli("env=lunarlander", "env.continuous=true", "agent=sb3_dqn", "total_steps=300")
    said = " ".join(r.stderr.split())
    assert "take Box), or an env with Discrete actions (env=lunarlander env.continuous=false" in said
    assert_no_run(tmp_path)


def test_inference_actors_asking_for_gpus_the_machine_lacks_are_refused_before_the_run(
    cli, tmp_path: Path
) -> None:
    # Known before any Ray starts (the GPUs this machine has): one line, and no run in MLflow.
    r = cli(
        "experiment=gomoku_6x6",
        "search=ray_async",
        "search.inference_num_gpus=64",
        "total_steps=300",
    )
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert "search.inference_num_gpus=64: 1 inference actor(s) ask for 64 GPUs" in r.stderr
    assert "64 GPUs; the local Ray has 0 GPUs" in r.stderr
    assert_no_run(tmp_path)


def test_self_play_workers_the_machine_cannot_hold_are_refused_by_the_agents_keys(
    cli, tmp_path: Path
) -> None:
    # The agent's workers and the search's inference actor, counted together before any Ray starts.
    r = cli("experiment=gomoku_6x6", "search=ray_async", "agent.workers=1000", "total_steps=300")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    said = " ".join(r.stderr.split())
    assert said.startswith(
        "Error: agent.workers=1000 agent.worker_num_cpus=1 "
        "search.inference_actors=1 search.inference_num_cpus=1: "
        "1000 self-play worker(s) and 1 inference actor(s) ask for 1001 CPUs"
    ), said
    assert_no_run(tmp_path)


def test_frames_a_stacking_buffer_cannot_take_are_refused_before_any_run(cli, tmp_path: Path) -> None:
    """`env.frame_stack=1` with the Atari DQN's memory-efficient buffer failed the run as it started."""
    r = cli("env=atari", "agent=dqn", "env.frame_stack=1", "total_steps=300")
    said = " ".join(r.stderr.split())
    assert r.returncode == 1 and said.startswith("Error: MemoryEfficientReplayBuffer (buffer=memory_effic")
    assert "this env gives (84, 84)" in said and "run started" not in r.output, r.output[-3000:]
    assert_no_run(tmp_path)
