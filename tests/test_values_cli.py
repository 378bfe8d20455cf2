"""The values tests/test_values.py draws in-process, end to end: `python -m framework` refuses each in
one line starting "Error:", with no traceback, exit status 1, no run in the MLflow store and no run
folder left behind. The tester's own cases, then a few keys drawn at random (a fixed seed) from every
ranged key of the root and the built-in plugins."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from tests.test_refusals import assert_no_run, assert_refused
from tests.test_values import RANGED, Key

#: A key of the root and of each kind of section, drawn by a fixed seed: the same on every machine.
_DRAW = random.Random(38)
DRAWN = [
    _DRAW.choice([k for k in RANGED if k.section in sections])
    for sections in (("",), ("env",), ("agent",), ("search", "buffer"))
]


def out_of_range(key: Key) -> str:
    """A value `key` refuses, as a command line writes it: below its range, above it, or inf."""
    bounds = key.bounds
    assert bounds is not None
    if bounds.ge is not None:
        value: float = bounds.ge - 1
    elif bounds.gt is not None:
        value = bounds.gt
    elif bounds.le is not None:
        value = bounds.le + 1
    elif bounds.lt is not None:
        value = bounds.lt
    else:
        value = math.inf
    while value in bounds.also:
        value -= 1
    return str(int(value)) if key.kind is int and math.isfinite(value) else repr(float(value))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("agent=ppo", "agent.hyperparams.gamma=1.5"), ("agent.hyperparams.gamma=1.5 must be in [0, 1]",)),
        (
            ("agent=ppo", "agent.hyperparams.learning_rate=-0.1"),
            ("agent.hyperparams.learning_rate=-0.1 must be > 0",),
        ),
        (
            ("experiment=gomoku_6x6", "search=ray_async", "search.max_wait_ms=inf"),
            ("search.max_wait_ms=inf is not a finite number: it must be >= 0",),
        ),
        (("env=fighter", "env.host=256.1.1.1"), ("env.host='256.1.1.1' is not an IP address",)),
        (("agent=ppo", "buffer=replay"), ("agent.algo=PPO keeps its own rollouts", "drop buffer=")),
        (
            ("objective.metric=eval/retrun_mean",),
            ("objective.metric='eval/retrun_mean' is not a metric", "Did you mean eval/return_mean?"),
        ),
        (("tracking.uri=bogus://x",), ("tracking.uri=bogus://x: MLflow does not track to bogus: URIs",)),
        (("tracking.uri=./runs",), ("tracking.uri=./runs: MLflow no longer tracks to a folder",)),
        (("resume=",), ("resume= is empty (an unset shell variable?): give the run directory",)),
        (("total_steps=1e6",), ("total_steps=1e6 must be an integer: write total_steps=1000000",)),
        (("env.n_envs=1e9",), ("env.n_envs=1e9 must be an integer: write env.n_envs=1000000000",)),
        (
            ("experiment=gomoku_6x6", "objective.metric=eval/mcts100/score"),
            ("Did you mean eval/mcts1000/score?", "for each of heuristic, mcts1000, random"),
        ),
        (
            ("env=cartpole", "objective.metric=eval/win_rate"),
            ("objective.metric='eval/win_rate' is not a metric",),
        ),
        (
            ("env=lunarlander", "+env.kwargs.gravity=5.0"),
            ("env LunarLander-v3 cannot be made with these settings:", "gravity"),
        ),
        (
            ("+total_step=5",),
            ("Unknown config key total_step. Did you mean total_steps? Keys of the config:",),
        ),
        (
            ("+eval.episode=3",),
            ("Unknown config key eval.episode. Did you mean eval.episodes? Keys of eval: every_steps,",),
        ),
    ],
    ids=[
        "gamma",
        "learning_rate",
        "max_wait_ms",
        "host",
        "buffer",
        "objective",
        "tracking_uri",
        "tracking_folder",
        "resume_empty",
        "float_root",
        "float_plugin",
        "objective_alphazero",
        "objective_cartpole",
        "env_kwargs_value",
        "added_root_key",
        "added_core_key",
    ],
)
def test_the_testers_cases_are_refused_before_a_run_exists(
    cli, tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    assert_refused(cli(*args), *fragments)
    assert_no_run(tmp_path)


def test_a_config_file_reading_an_unset_environment_variable_is_refused_before_a_run_exists(
    cli, tmp_path: Path
) -> None:
    site = tmp_path / "mine" / "site"
    site.mkdir(parents=True)
    (site / "env.yaml").write_text(
        "# @package _global_\ntracking:\n  experiment: ${oc.env:FRAMEWORK_TEST_UNSET_VARIABLE}\n"
    )
    r = cli("--config-dir", str(tmp_path / "mine"), "+site=env")
    assert_refused(
        r, "tracking.experiment: the environment variable FRAMEWORK_TEST_UNSET_VARIABLE is not set"
    )
    assert_no_run(tmp_path)


@pytest.mark.parametrize("key", DRAWN, ids=str)
def test_a_drawn_key_out_of_its_range_is_refused_before_a_run_exists(cli, tmp_path: Path, key: Key) -> None:
    value = out_of_range(key)
    assert_refused(cli(*(key.chosen_by if key.section else ()), f"{key.full}={value}"), key.full)
    assert_no_run(tmp_path)


def test_a_grid_sweep_with_a_value_refused_in_a_later_job_runs_none_of_them(cli, tmp_path: Path) -> None:
    """Every job's config is checked as the sweep starts: job 2's refusal is said before job 0
    runs, naming the job and its values, and nothing is left behind."""
    r = cli("-m", "agent=ppo", "seed=0,1", "agent.hyperparams.gamma=0.9,1.5", "total_steps=200")
    assert_refused(r, "job 1 of the sweep (seed=0 agent.hyperparams.gamma=1.5): agent.hyperparams.gamma=1.5")
    assert "#0 :" not in r.stdout  # no job was launched
    assert_no_run(tmp_path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("agent=ppo,a2cc",), "job 1 of the sweep (agent=a2cc): agent=a2cc is not a config of group agent."),
        (("env.n_env=1,2",), "job 0 of the sweep (env.n_env=1): Unknown config key env.n_env."),
    ],
    ids=["option", "key"],
)
def test_a_sweep_over_a_misspelt_option_or_key_is_refused_in_one_message(
    cli, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    """Hydra's own refusal in a later job, said as a single run's (no warning of Hydra's before it)."""
    r = cli("-m", *args, "total_steps=200")
    assert_refused(r, said)
    assert "UserWarning" not in r.output and "#0 :" not in r.stdout
    assert_no_run(tmp_path)


def test_a_sweep_with_an_objective_no_job_logs_is_refused_at_its_first_job(cli, tmp_path: Path) -> None:
    r = cli("-m", "objective.metric=eval/retrun_mean", "seed=1,2", "total_steps=200")
    assert_refused(r, "Did you mean eval/return_mean?")
    assert "#1 :" not in r.stdout  # the second job never started
    assert_no_run(tmp_path)  # nor is the sweep's parent run left (it had no child)
