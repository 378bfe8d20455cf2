"""hydra/sweeper=optuna's parts without a run: hydra-optuna-sweeper's override syntax as Optuna's
distributions (and what it cannot sample, refused with what would do), the grid, each sampler and
pruner built by its name, a trial that repeats a finished one's params. Sweeps: test_optuna_sweeper.py."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from framework.errors import ConfigError
from hydra_plugins.framework_optuna_sweeper._search_space import search_space


def test_the_override_syntax_becomes_optunas_distributions() -> None:
    space = search_space(
        [
            "seed=3",
            "agent.learning_rate=tag(log,interval(1e-5,1e-2))",
            "agent.gamma=interval(0.9,0.999)",
            "agent.train_freq=int(interval(1,8))",
            "agent.batch_size=range(16,65,16)",
            "agent.policy=choice(MlpPolicy,'Cnn Policy')",
        ],
        {"agent.tau": "choice(0.005,0.01)"},
    )
    d = space.distributions
    assert d["agent.learning_rate"] == FloatDistribution(1e-5, 1e-2, log=True)
    assert d["agent.gamma"] == FloatDistribution(0.9, 0.999)
    assert d["agent.train_freq"] == IntDistribution(1, 8)
    # Hydra's range leaves its end out: 16, 32, 48, 64.
    assert d["agent.batch_size"] == IntDistribution(16, 64, step=16)
    assert d["agent.tau"] == CategoricalDistribution([0.005, 0.01])
    assert space.fixed == ["seed=3"]
    # A category that is not a number goes back to the command line as its override text.
    policy = d["agent.policy"]
    assert isinstance(policy, CategoricalDistribution)
    assert space.overrides({"agent.policy": policy.choices[1], "agent.tau": 0.01}) == [
        "seed=3",
        "agent.policy=Cnn\\ Policy",
        "agent.tau=0.01",
    ]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["seed=1"], "needs at least one swept key"),
        (["agent.learning_rate=interval(0.1,0.01)"], "low < high"),
        (["agent.learning_rate=tag(log,interval(0,0.1))"], "low > 0"),
        (["hydra.job.name=choice(a,b)"], "only config values"),
        (["agent.learning_rate=tag(lg,interval(1e-5,1e-2))"], "tag lg is not one the search space knows; it"),
    ],
)
def test_a_search_space_optuna_cannot_sample_is_refused_with_what_would_do(
    arguments: list[str], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        search_space(arguments, None)


def test_the_grid_sampler_needs_finite_values() -> None:
    space = search_space(["a=choice(1,2)", "b=range(0,3)"], None)
    assert space.grid() == {"a": [1, 2], "b": [0, 1, 2]}
    with pytest.raises(ConfigError, match="b is an interval"):
        search_space(["a=choice(1,2)", "b=interval(0,1)"], None).grid()


@pytest.mark.parametrize("sampler", ["tpe", "cmaes", "random", "grid"])
def test_every_sampler_is_built_by_its_name(sampler: str) -> None:
    from omegaconf import OmegaConf

    from hydra_plugins.framework_optuna_sweeper import _study as optuna_study

    sweeper = OmegaConf.create({"sampler": sampler, "seed": 3, "sampler_kwargs": {}})
    built = optuna_study.make_sampler(sweeper, search_space(["a=choice(1,2)", "b=range(0,3)"], None))
    assert type(built).__name__ == optuna_study.SAMPLERS[sampler]


def test_every_pruner_takes_its_resources_from_the_runs_budget() -> None:
    from omegaconf import OmegaConf

    from hydra_plugins.framework_optuna_sweeper import _study as optuna_study

    cfg = OmegaConf.create({"total_steps": 90_000, "eval": {"every_steps": 10_000}})
    specs = {
        name: optuna_study.pruner_spec(OmegaConf.create({"pruner": name, "pruner_kwargs": {}}), cfg)
        for name in optuna_study.PRUNERS
    }
    assert specs["median"]["kwargs"] == {"n_startup_trials": 5, "n_warmup_steps": 30_000}
    assert specs["successive_halving"]["kwargs"] == {"min_resource": 10_000}
    assert specs["hyperband"]["kwargs"] == {
        "min_resource": 10_000,
        "max_resource": 90_000,
        "reduction_factor": 3,
    }
    for name, spec in specs.items():
        assert type(optuna_study.make_pruner(spec)).__name__ == optuna_study.PRUNERS[name]
    wrong = OmegaConf.create({"pruner": "median", "pruner_kwargs": {"patience": 3}})
    with pytest.raises(ConfigError, match="patience not accepted by optuna's MedianPruner"):
        optuna_study.make_pruner(optuna_study.pruner_spec(wrong, cfg))


def test_a_trial_with_a_finished_trials_params_is_a_duplicate_of_it_even_within_a_batch() -> None:
    from hydra_plugins.framework_optuna_sweeper._impl import _split_duplicates

    study = optuna.create_study()
    space = {"a": CategoricalDistribution([1, 2, 3])}
    study.enqueue_trial({"a": 1})
    first = study.ask(space)
    study.tell(first, 0.5)
    for a in (1, 3, 3):
        study.enqueue_trial({"a": a})
    batch = [study.ask(space) for _ in range(3)]
    to_run, twins = _split_duplicates(study, batch)
    assert to_run == [batch[1]]
    assert twins == [(batch[0], first.number), (batch[2], batch[1].number)]
    # A failed trial is no twin: its params run again.
    study.enqueue_trial({"a": 2})
    failed = study.ask(space)
    study.tell(failed, state=TrialState.FAIL)
    study.enqueue_trial({"a": 2})
    retry = study.ask(space)
    assert _split_duplicates(study, [retry]) == ([retry], [])
