"""hydra/sweeper=optuna: the search space in hydra-optuna-sweeper's syntax, trials as the sweep's jobs,
pruning on the jobs' evaluations, a study resumed by name under the same MLflow parent."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from framework.errors import ConfigError
from tests.conftest import FAST

SPACE = ["agent.learning_rate=tag(log,interval(1e-4,1e-2))", "agent.batch_size=choice(16,32)"]


def _seed_study(
    storage: str, name: str, steps: list[int], system_attrs: dict[str, Any] | None = None
) -> None:
    """A study whose one finished trial scored far above anything CartPole gives, at every step: the
    median pruner then stops every later trial at its first evaluation."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    study.add_trial(
        optuna.trial.create_trial(
            params={"agent.learning_rate": 1e-3, "agent.batch_size": 32},
            distributions={
                "agent.learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
                "agent.batch_size": CategoricalDistribution([16, 32]),
            },
            value=1e9,
            intermediate_values={step: 1e9 for step in steps},
            system_attrs=system_attrs,
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("pruner", ["successive_halving", "hyperband"])
def test_successive_halving_and_hyperband_stop_trials_at_their_first_rung(
    cli: Any, tmp_path: Path, pruner: str
) -> None:
    # The seeded trial completed the first rung (512 steps: eval.every_steps) far above anything CartPole
    # gives; of two trials at a rung one goes on (a reduction factor of 3 or 4), and it is not ours.
    # Hyperband over 512..1024 steps, by a factor of 3, has one bracket: successive halving from 512.
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _seed_study(storage, "rungs", steps=[512, 1024], system_attrs={"completed_rung_0": 1e9})
    r = cli(
        "-m", *FAST, "progress=off", "tracking=none", "hydra/sweeper=optuna",
        f"hydra.sweeper.pruner={pruner}", "hydra.sweeper.n_trials=1", "hydra.sweeper.study_name=rungs",
        *SPACE, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    trials = optuna.load_study(study_name="rungs", storage=storage).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED]
    assert trials[1].last_step == 512


def _runs(tmp_path: Path) -> tuple[Any, list[Any]]:
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, [(r.info.run_name, r.info.status) for r in runs]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    return parents[0], children


@pytest.mark.slow
def test_trials_are_pruned_on_their_evaluations_and_the_study_resumes_under_the_same_parent(
    cli: Any, tmp_path: Path
) -> None:
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _seed_study(storage, "cartpole", steps=[512, 1024])
    sweep = ["-m", *FAST, "progress=off", "hydra/sweeper=optuna", "hydra.sweeper.study_name=cartpole", *SPACE]
    prune_at_once = [
        "+hydra.sweeper.pruner_kwargs.n_startup_trials=1",
        "+hydra.sweeper.pruner_kwargs.n_warmup_steps=0",
    ]
    r = cli(*sweep, "hydra.sweeper.n_trials=2", "hydra.sweeper.seed=0", *prune_at_once, timeout=240)
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 2 runs (2 PRUNED)." in r.stdout, r.stdout[-2000:]

    # The study (beside ./mlflow.db by default) has the two new trials, each pruned at its first evaluation.
    study = optuna.load_study(study_name="cartpole", storage=storage)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.PRUNED]
    assert [t.last_step for t in trials[1:]] == [512, 512]

    parent, children = _runs(tmp_path)
    for number, child in enumerate(children, start=1):
        assert child.info.status == "KILLED"
        assert child.data.tags["framework.trial_state"] == "PRUNED"
        assert child.data.tags["framework.trial_number"] == str(number)
        assert child.info.run_name.startswith(f"#{number} ") and child.info.run_name.endswith(" (pruned)")
        # It ends with its last metrics: the evaluation that pruned it, not a run to total_steps.
        history = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_metric_history(
            child.info.run_id, "eval/return_mean"
        )
        assert max(m.step for m in history) == 512
        # Its params are the trial's, whole.
        assert float(child.data.params["agent.learning_rate"]) == trials[number].params["agent.learning_rate"]
    first_parent = parent.info.run_id

    # The same command, the same study_name: one more trial, under the same parent; no pruning this time.
    r = cli(*sweep, "hydra.sweeper.n_trials=1", "hydra.sweeper.pruner=none", timeout=240)
    assert r.returncode == 0, r.output[-3000:]
    parent, children = _runs(tmp_path)
    assert parent.info.run_id == first_parent and parent.info.status == "FINISHED"
    assert [c.data.tags["framework.trial_state"] for c in children] == ["PRUNED", "PRUNED", "COMPLETE"]
    assert children[-1].info.status == "FINISHED"
    assert len(optuna.load_study(study_name="cartpole", storage=storage).trials) == 4

    # The parent holds the study: every trial's state, the best trial, Optuna's plots.
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    found = json.loads(
        Path(client.download_artifacts(first_parent, "optuna/study.json", str(tmp_path))).read_text()
    )
    assert found["states"] == {"COMPLETE": 2, "PRUNED": 2} and found["best_trial"] == 0
    assert math.isclose(found["best_value"], 1e9)
    names = {a.path for a in client.list_artifacts(first_parent, "optuna")}
    for stem in ("optimization_history", "param_importances", "parallel_coordinate", "slice"):
        assert f"optuna/{stem}.png" in names, names
    assert "optuna/plots.html" in names
    assert parent.data.tags["best.agent.batch_size"] == "32"
    table = Path(client.download_artifacts(first_parent, "sweep_summary.csv", str(tmp_path))).read_text()
    assert table.count(",PRUNED,") == 2 and table.count(",COMPLETE,") == 1, table


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("hydra.sweeper.sampler=bayes", "hydra.sweeper.sampler=bayes is not one of: tpe, cmaes, random"),
        # Added with `+`, past the schema: refused, not left unread (the sweep ran 20 trials).
        ("+hydra.sweeper.n_trial=2", "hydra.sweeper.n_trial is not a setting of hydra/sweeper=optuna. Did "
         "you mean hydra.sweeper.n_trials?"),
        ("+hydra.sweeper.direction=minimize", "hydra.sweeper.direction: the study's direction is the "
         "objective's, objective.mode=max (the default) or objective.mode=min"),
        ("hydra.sweeper.direction=maximize", "The direction a sweep optimises is the objective's: "
         "objective.mode=max or min."),
    ],
)  # fmt: skip
def test_a_wrong_sweeper_setting_is_one_message_before_anything_starts(
    cli: Any, tmp_path: Path, setting: str, said: str
) -> None:
    r = cli("-m", *FAST, "hydra/sweeper=optuna", setting, *SPACE, timeout=120)
    assert r.returncode == 1
    assert said in " ".join(r.stderr.split()), r.stderr
    assert "Traceback" not in r.output and "Warning" not in r.output and r.stderr.count("Error:") == 1
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("space", "said"),
    [
        ([], "needs at least one swept key"),
        (["agent.hyperparams.learning_rate=interval(1,0.1)"], "low < high"),
    ],
)
def test_a_search_space_it_cannot_sample_is_refused_before_a_parent_run_or_store_exists(
    cli: Any, tmp_path: Path, space: list[str], said: str
) -> None:
    """The refusal came after the sweep's parent run had been opened (and deleted): an empty store."""
    r = cli("-m", *FAST, "hydra/sweeper=optuna", *space, timeout=120)
    assert r.returncode == 1 and said in r.stderr and "Traceback" not in r.output, r.output
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.slow
def test_trials_run_in_parallel_through_the_joblib_launcher_on_one_new_study(
    cli: Any, tmp_path: Path
) -> None:
    r = cli(
        "-m", *FAST, "progress=off", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
        "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2",
        "hydra.sweeper.pruner=none", *SPACE, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 2 runs (2 FINISHED)." in r.stdout, r.stdout[-2000:]
    parent, children = _runs(tmp_path)
    assert sorted(c.data.tags["framework.trial_number"] for c in children) == ["0", "1"]
    # Both jobs ran at once, each in a process of its own.
    first, second = sorted(children, key=lambda c: c.info.start_time)
    assert second.info.start_time < first.info.end_time
    assert first.data.tags["framework.run_dir"] != second.data.tags["framework.run_dir"]
    (study,) = optuna.get_all_study_summaries(storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert study.study_name == parent.data.tags["framework.study_name"] and study.n_trials == 2


@pytest.mark.slow
def test_trials_run_as_ray_tasks_and_are_pruned_there(cli: Any, tmp_path: Path, ray_session: Any) -> None:
    # The jobs run in the session's Ray workers, which inherit neither this command's directory nor its
    # environment: each must still reach the study (./optuna.db) and prune by the sweep's pruner.
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _seed_study(storage, "on-ray", steps=[512, 1024])
    r = cli(
        "-m", *FAST, "progress=off", "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_session.address}", "hydra/sweeper=optuna",
        "hydra.sweeper.study_name=on-ray", "hydra.sweeper.n_trials=2",
        "hydra.sweeper.n_jobs=2", "+hydra.sweeper.pruner_kwargs.n_startup_trials=1",
        "+hydra.sweeper.pruner_kwargs.n_warmup_steps=0", *SPACE, timeout=240, env={"RAY_AUTH_MODE": "token"},
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "Connected to Ray cluster" in r.output
    states = [t.state for t in optuna.load_study(study_name="on-ray", storage=storage).get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.PRUNED]
    _, children = _runs(tmp_path)
    assert sorted(c.data.tags["framework.trial_state"] for c in children) == ["PRUNED", "PRUNED"]


# The grid sampler running each point once and ending the sweep, n_trials more than its points: in
# the sweeps that test_optuna_failures.py runs on a grid (their failed point is visited, not run again).


@pytest.mark.slow
def test_a_trial_that_repeats_a_finished_trials_params_is_not_run_again(cli: Any, tmp_path: Path) -> None:
    # Four trials over two settings: the sampler repeats itself, and a run with the same params and seed
    # would repeat its result.
    r = cli(
        "-m", *FAST, "progress=off", "hydra/sweeper=optuna", "hydra.sweeper.sampler=random",
        "hydra.sweeper.seed=0", "hydra.sweeper.pruner=none", "hydra.sweeper.n_trials=4",
        "hydra.sweeper.study_name=twice", "agent.batch_size=choice(16,32)", timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    trials = optuna.load_study(study_name="twice", storage=f"sqlite:///{tmp_path / 'optuna.db'}").get_trials()
    assert len(trials) == 4 and all(t.state == TrialState.COMPLETE for t in trials)
    ran = [t for t in trials if "duplicate_of" not in t.user_attrs]
    assert sorted(t.params["agent.batch_size"] for t in ran) == [16, 32]
    for t in trials:
        if t not in ran:
            twin = trials[t.user_attrs["duplicate_of"]]
            assert twin in ran and twin.params == t.params
            assert t.value == twin.value and t.intermediate_values == twin.intermediate_values
            assert f"trial {t.number} repeats trial {twin.number}'s params: not run again" in r.output
    _, children = _runs(tmp_path)
    numbers = sorted(c.data.tags["framework.trial_number"] for c in children)
    assert numbers == sorted(str(t.number) for t in ran)


def test_two_sweeps_that_start_one_study_at_once_share_its_parent(tmp_path: Path) -> None:
    """Both found no parent recorded, each opened its own, and each parent's best was half the study's."""
    import threading

    from omegaconf import OmegaConf

    from hydra_plugins.framework_optuna_sweeper import _study

    sweeper = OmegaConf.create({"study_name": "shared", "storage": f"sqlite:///{tmp_path / 'optuna.db'}"})
    cfg = OmegaConf.create(
        {"objective": {"metric": "eval/return_mean", "mode": "max"}, "tracking": {"uri": "sqlite:///m.db"}}
    )
    found: dict[int, str | None] = {}
    together = threading.Barrier(2)

    def start(i: int) -> None:
        together.wait()
        found[i] = _study.recorded_parent(sweeper, cfg)
        if found[i] is None:  # the sweep that created the study opens its parent, and its sweeper records it
            study = optuna.load_study(study_name="shared", storage=str(sweeper.storage))
            study.set_user_attr(_study.PARENT_ATTR, "the-first-parent")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert sorted(found.values(), key=str) == [None, "the-first-parent"], found
    # A sweep that starts the study later goes on under the same parent at once.
    assert _study.recorded_parent(sweeper, cfg) == "the-first-parent"


def test_trials_added_to_a_study_keep_its_fixed_overrides(tmp_path: Path) -> None:
    """Another budget (or env, or evaluation) would rank new trials beside the study's as if alike."""
    from omegaconf import OmegaConf

    from hydra_plugins.framework_optuna_sweeper import _study

    sweeper = OmegaConf.create({"study_name": "budget", "storage": f"sqlite:///{tmp_path / 'optuna.db'}"})

    def cfg(*task: str) -> Any:
        return OmegaConf.create({
            "objective": {"metric": "eval/return_mean", "mode": "max"},
            "hydra": {"overrides": {"task": list(task)}},
        })  # fmt: skip

    lr, gamma = "agent.lr=tag(log,interval(1e-4,1e-2))", "agent.gamma=choice(0.9,0.99)"
    assert _study.recorded_parent(sweeper, cfg("total_steps=30000", lr, gamma)) is None  # a new study
    study = optuna.load_study(study_name="budget", storage=str(sweeper.storage))
    study.set_user_attr(  # as its sweep records them
        _study.FIXED_ATTR,
        _study.trained_by(
            _study.with_searched(
                ["total_steps=30000", "hydra.sweeper.n_trials=2"], ["agent.gamma", "agent.lr"]
            )
        ),
    )
    # What only runs or shows trials otherwise may change; what they train may not.
    _study.recorded_parent(
        sweeper, cfg("total_steps=30000", "progress=off", "hydra.sweeper.n_trials=5", lr, gamma)
    )
    with pytest.raises(ConfigError, match="that study's trials ran otherwise") as e:
        _study.recorded_parent(sweeper, cfg("total_steps=3000", "eval.episodes=3", lr, gamma))
    said = str(e.value)
    assert (
        "eval.episodes: the study's (not given), this command's 3; total_steps: the study's 30000, " in said
    )
    assert "this command's 3000" in said
    with pytest.raises(
        ConfigError
    ) as e:  # gamma no longer searched: its preset's, in trials beside the study's
        _study.recorded_parent(sweeper, cfg("total_steps=30000", lr))
    assert "searched: the study's (agent.gamma,agent.lr), this command's (agent.lr)" in str(e.value)
