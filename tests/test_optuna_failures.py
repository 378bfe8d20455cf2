"""hydra/sweeper=optuna when trials fail: a sweep ends only past hydra.sweeper.max_failure_rate, in
Hydra's basic launcher, joblib and Ray alike; a sweep killed outright leaves no trial RUNNING once
its study is resumed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from hydra_plugins.framework_optuna_sweeper import _study
from tests.conftest import FAST
from tests.test_optuna_sweeper import SPACE
from tests.test_refusals import assert_no_run, assert_refused


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_failed_trials_end_the_sweep_only_past_max_failure_rate(
    cli: Any, tmp_path: Path, launcher: str
) -> None:
    place = (
        ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.n_jobs=2"]
        if launcher == "joblib"
        else []
    )
    _check_max_failure_rate(cli, tmp_path, place, {})


@pytest.mark.slow
def test_failed_trials_on_ray_end_the_sweep_only_past_max_failure_rate(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    place = [
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_session.address}",
        "hydra.sweeper.n_jobs=2",
    ]
    _check_max_failure_rate(cli, tmp_path, place, {"RAY_AUTH_MODE": "token"})


def _check_max_failure_rate(cli: Any, tmp_path: Path, place: list[str], env: dict[str, str]) -> None:
    # batch_size=0 is refused by the job (not by composing the config): that trial fails.
    sweep = [
        "-m", *FAST, "progress=off", "tracking=none", "hydra/sweeper=optuna", "hydra.sweeper.sampler=grid",
        "hydra.sweeper.pruner=none", "agent.batch_size=choice(0,16)", *place,
    ]  # fmt: skip
    allowed = ["hydra.sweeper.study_name=allowed", "hydra.sweeper.max_failure_rate=0.5"]
    r = cli(*sweep, *allowed, timeout=240, env=env)
    assert r.returncode == 0, r.output[-3000:]
    assert "agent.batch_size=0 must be >= 1" in r.output
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    trials = optuna.load_study(study_name="allowed", storage=storage).get_trials()
    # The grid sampler ran each point once and ended the sweep, n_trials (20) more than its points.
    assert sorted(t.params["agent.batch_size"] for t in trials) == [0, 16]
    assert {t.params["agent.batch_size"]: t.state for t in trials} == {
        0: TrialState.FAIL,
        16: TrialState.COMPLETE,
    }
    # By default the first failure ends the sweep, with one message. Seed 1 asks batch_size=0 first:
    # one job fewer where they run one at a time (either order passes).
    r = cli(*sweep, "hydra.sweeper.study_name=strict", "hydra.sweeper.seed=1", timeout=240, env=env)
    assert r.returncode == 1
    said = "more than hydra.sweeper.max_failure_rate=0.0 of 2 allows (why: above, trial by trial)"
    assert said in r.stderr
    assert "trial 0 FAIL" in r.output or "trial 1 FAIL" in r.output
    assert "Traceback" not in r.output


def test_a_sweep_killed_outright_leaves_no_trial_running_once_its_study_is_resumed(
    cli: Any, tmp_path: Path
) -> None:
    """SIGKILL to the sweep in the middle of a trial: nothing can tell the study, whose trial stays
    RUNNING; its heartbeat stops, and the next sweep on the study marks it FAIL before going on."""
    import time

    from tests.conftest import start_cli

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    sweep = ["-m", "progress=log", "hydra/sweeper=optuna", "hydra.sweeper.study_name=killed", *SPACE]
    long = ["total_steps=1000000", "log_every_s=0.5"]  # its first progress line 0.5 s in, not 10 s
    p = start_cli(*sweep, *long, "hydra.sweeper.heartbeat_s=1", cwd=tmp_path)
    assert p.stdout is not None
    for line in p.stdout:  # the trial is training
        if "| eval/" in line:
            break
    stuck = optuna.load_study(study_name="killed", storage=storage).get_trials()
    assert [t.state for t in stuck] == [TrialState.RUNNING]
    p.kill()
    p.communicate(timeout=60)
    # Until the trial is stale by the storage's own test (3 missed heartbeats of 1 s), which the next
    # sweep applies: waited for as an event, not a fixed time.
    storage_of_sweep = _study.open_storage(storage, heartbeat_s=1)
    study_id = storage_of_sweep.get_study_id_from_name("killed")
    deadline = time.monotonic() + 60
    while not storage_of_sweep._get_stale_trial_ids(study_id):
        assert time.monotonic() < deadline, "the killed sweep's trial was not stale within 60 s"
        time.sleep(0.2)
    # The same command would train the next trial 1,000,000 steps: the study is told that it ran the
    # shorter one's fixed overrides (another budget is refused otherwise: test_optuna_sweeper.py).
    optuna.load_study(study_name="killed", storage=storage).set_user_attr(
        _study.FIXED_ATTR, _study.trained_by(_study.fixed_overrides([*SPACE, *FAST], {}))
    )
    r = cli(*sweep, *FAST, "hydra.sweeper.n_trials=1", "hydra.sweeper.heartbeat_s=1", timeout=240)
    assert r.returncode == 0, r.output[-3000:]
    assert "1 trial(s) a stopped sweep left RUNNING are FAIL now" in r.output
    trials = optuna.load_study(study_name="killed", storage=storage).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    # The killed trial's run says which trial it was, and that it failed, as the study does.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    tagged = {
        r.data.tags.get("framework.trial_number"): r for r in runs if "mlflow.parentRunId" in r.data.tags
    }
    assert set(tagged) == {"0", "1"}, [r.data.tags for r in runs]
    assert tagged["0"].info.status == "FAILED" and tagged["0"].data.tags["framework.trial_state"] == "FAIL"


@pytest.mark.slow
def test_a_trial_stopped_by_sigterm_ends_killed_tagged_as_the_study_records_it(
    cli: Any, tmp_path: Path
) -> None:
    """SIGTERM (a scheduler's) in the middle of a trial: its run ends KILLED with a checkpoint, and
    carries the trial's tags as every child does: its number, and FAIL, the state its study gives it."""
    import signal

    from mlflow.tracking import MlflowClient

    from tests.conftest import start_cli

    sweep = ["-m", "progress=log", "hydra/sweeper=optuna", *SPACE]  # the study named by the sweep
    p = start_cli(*sweep, "total_steps=1000000", "eval.every_steps=500", cwd=tmp_path)
    assert p.stdout is not None
    for line in p.stdout:  # the trial is training: its first evaluation is logged
        if "| eval/" in line:
            break
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    (child,) = [run for run in runs if "mlflow.parentRunId" in run.data.tags]
    assert child.info.status == "KILLED"
    assert (child.data.tags["framework.trial_state"], child.data.tags["framework.trial_number"]) == (
        "FAIL",
        "0",
    )
    said = " ".join(out.split())  # what was left undone, and how to do it: the study's name with it
    found = re.search(
        r"trials 20 asked, 1 started: the same command with hydra\.sweeper\.study_name=(\S+) adds 20 more "
        r"to its study (\S+)",
        said,
    )
    assert found is not None and found[1] == found[2], out
    trials = optuna.load_study(
        study_name=found[1], storage=f"sqlite:///{tmp_path / 'optuna.db'}"
    ).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (  # the objective: every point refuses it, not only the one that draws batch_size=0
            ("agent.batch_size=choice(0,16)", "objective.metric=eval/return_men"),
            "a trial of the sweep (agent.batch_size=16): objective.metric='eval/return_men' is not a metric",
        ),
        (  # a key of the search space itself; an interval checked at its (log) middle
            ("agent.lr=tag(log,interval(1e-4,1e-2))",),
            "a trial of the sweep (agent.lr=0.001): Unknown config key agent.lr.",
        ),
        (("agent.batch_size=choice(0,-1)",), "a trial of the sweep (agent.batch_size=0): agent.batch_size=0"),
    ],
    ids=["objective", "key", "every-value"],
)
def test_a_sampled_sweep_refused_at_every_point_is_refused_before_its_study_starts(
    cli: Any, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    """Not by its first trial (a FAIL trial in a study, the run's message and the sweep's): one
    message before anything starts, as a grid sweep's. A value refused at some points only runs
    (`test_failed_trials_end_the_sweep_only_past_max_failure_rate`)."""
    r = cli("-m", *FAST, "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", *args, timeout=120)
    assert_refused(r, said)
    assert_no_run(tmp_path)
    assert not (tmp_path / "optuna.db").exists()


def test_a_study_gone_on_with_another_objective_is_refused_before_its_parent_is_opened(
    cli: Any, tmp_path: Path
) -> None:
    """Its trials would be valued by another metric, or ranked the other way; said before the sweep
    opens the study's parent run again (which then summed up its trials the other way round)."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(study_name="tune", storage=storage, direction="maximize")
    study.set_user_attr(_study.OBJECTIVE_ATTR, "eval/return_mean")
    sweep = ["-m", *FAST, "hydra/sweeper=optuna", "hydra.sweeper.study_name=tune", *SPACE]
    for args, said in (
        (["objective.mode=min"], "hydra.sweeper.study_name=tune: that study maximizes its objective;"),
        (
            ["objective.metric=eval/return_std"],
            "that study's trials are valued by eval/return_mean; objective.metric=eval/return_std would",
        ),
    ):
        r = cli(*sweep, *args, timeout=120)
        assert_refused(r, said)
        assert_no_run(tmp_path)
    assert optuna.load_study(study_name="tune", storage=storage).get_trials() == []


def test_a_failure_rate_past_all_trials_is_refused() -> None:
    from omegaconf import OmegaConf

    from framework.errors import ConfigError
    from hydra_plugins.framework_optuna_sweeper.optuna_sweeper import OptunaSweeperConf

    for rate in (2.0, -0.5):
        with pytest.raises(ConfigError, match=rf"max_failure_rate={rate}: the share of the trials that may"):
            _study.check(OmegaConf.structured(OptunaSweeperConf(max_failure_rate=rate)))
    _study.check(OmegaConf.structured(OptunaSweeperConf(max_failure_rate=1.0)))
