"""Every value is checked before a run exists, by the plugins' own rules: SB3's free hyperparameters
held to their documented ranges (in every form they take), sections the chosen plugins do not read
refused, and the objective checked against the metrics the run's evaluation will log. The shared
walk over the schemas and the drawing strategies are tests/test_values.py's."""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework import config
from framework.app import compose
from framework.building import check_objective, evaluation_metrics
from framework.errors import ConfigError
from framework.values import Bounds
from tests.test_values import PROPERTY, _literal, inside, outside

# -- SB3's hyperparameters -------------------------------------------------------------------------


def sb3_keys() -> list[tuple[str, str]]:
    from framework_plugins.sb3.algorithms import available_algorithms, hyperparameter_names
    from framework_plugins.sb3.ranges import HYPERPARAM_BOUNDS

    return [
        (name, key)
        for name, algo in sorted(available_algorithms().items())
        for key in hyperparameter_names(algo)
        if key in HYPERPARAM_BOUNDS
    ]


def _sb3(name: str, key: str) -> tuple[Any, Bounds, type, Any]:
    from framework_plugins.sb3.algorithms import available_algorithms
    from framework_plugins.sb3.ranges import HYPERPARAM_BOUNDS

    algo = available_algorithms()[name]
    parameter = inspect.signature(algo.__init__).parameters.get(key)  # none for rl-zoo3's noise_std
    default = parameter.default if parameter is not None else None
    kind = int if isinstance(default, int) and not isinstance(default, bool) else float
    bounds = HYPERPARAM_BOUNDS[key]
    if key == "batch_size" and inspect.signature(algo.__init__).parameters.get("normalize_advantage"):
        bounds = dataclasses.replace(bounds, ge=2)  # normalised over each minibatch: SB3 asserts > 1
    return algo, bounds, kind, default


SB3_KEYS = sb3_keys()


def test_the_table_covers_the_hyperparameters_the_tester_named() -> None:
    named = {key for _, key in SB3_KEYS}
    assert {"gamma", "learning_rate", "n_steps", "batch_size", "clip_range", "ent_coef"} <= named
    assert {"gae_lambda", "tau", "buffer_size"} <= named


@PROPERTY
@given(st.data())
def test_an_sb3_hyperparameter_outside_its_documented_range_is_refused_by_name(data: st.DataObject) -> None:
    from framework_plugins.sb3.algorithms import check_hyperparams

    name, key = data.draw(st.sampled_from(SB3_KEYS), label="algo, key")
    algo, bounds, kind, _ = _sb3(name, key)
    value = data.draw(outside(bounds, kind), label="value")
    with pytest.raises(ConfigError) as refused:
        check_hyperparams(algo, {key: value}, "auto", {})
    message = str(refused.value)
    assert "\n" not in message, message
    assert message.startswith(f"agent.hyperparams.{key}="), message


@PROPERTY
@given(st.data())
def test_an_sb3_hyperparameter_inside_its_documented_range_passes(data: st.DataObject) -> None:
    from framework_plugins.sb3.algorithms import check_hyperparams

    name, key = data.draw(st.sampled_from(SB3_KEYS), label="algo, key")
    algo, bounds, kind, _ = _sb3(name, key)
    check_hyperparams(algo, {key: data.draw(inside(bounds, kind), label="value")}, "auto", {})


@pytest.mark.parametrize(
    ("algo", "hyperparams", "said"),
    [
        ("PPO", {"gamma": 1.5}, "agent.hyperparams.gamma=1.5 must be in [0, 1] (default 0.99)"),
        ("PPO", {"learning_rate": -0.1}, "agent.hyperparams.learning_rate=-0.1 must be > 0 (default 0.0003)"),
        ("PPO", {"learning_rate": "lin_-0.1"}, "learning_rate='lin_-0.1' must start > 0: lin_<x> goes"),
        ("PPO", {"n_steps": 0}, "agent.hyperparams.n_steps=0 must be >= 1 (default 2048)"),
        ("PPO", {"batch_size": 1}, "batch_size=1 must be > 1 for PPO with agent.hyperparams.normalize_adv"),
        ("PPO", {"clip_range": "lin_0"}, "clip_range='lin_0' must start > 0"),
        ("PPO", {"target_kl": "abc"}, "agent.hyperparams.target_kl=abc must be > 0, not a string"),
        ("SAC", {"ent_coef": "auto_-1"}, "ent_coef='auto_-1' is not valid: auto (learned, from 1)"),
        ("SAC", {"tau": 0}, "agent.hyperparams.tau=0 must be in (0, 1]"),
        ("DQN", {"train_freq": [0, "step"]}, "agent.hyperparams.train_freq[0]=0 must be >= 1"),
        ("DQN", {"train_freq": [4, "stp"]}, "train_freq=[4, 'stp'] is not valid: a number of steps, or [n"),
        ("DQN", {"exploration_final_eps": math.inf}, "exploration_final_eps=inf is not a finite number"),
    ],
)
def test_sb3_hyperparameters_are_refused_in_every_form_they_take(
    algo: str, hyperparams: dict[str, Any], said: str
) -> None:
    from framework_plugins.sb3.algorithms import algorithm_class, check_hyperparams

    with pytest.raises(ConfigError, match=_literal(said)):
        check_hyperparams(algorithm_class(algo), hyperparams, "auto", {})


@pytest.mark.parametrize(
    ("algo", "hyperparams"),
    [
        ("PPO", {"learning_rate": "lin_2.5e-4", "clip_range": "lin_0.1", "clip_range_vf": None}),
        ("SAC", {"ent_coef": "auto"}),
        ("SAC", {"ent_coef": "auto_0.1", "target_entropy": -2.0}),
        ("DQN", {"train_freq": [1, "episode"], "gradient_steps": -1}),
    ],
)
def test_sb3_hyperparameters_in_their_other_forms_pass(algo: str, hyperparams: dict[str, Any]) -> None:
    from framework_plugins.sb3.algorithms import algorithm_class, check_hyperparams

    check_hyperparams(algorithm_class(algo), hyperparams, "auto", {})


# -- sections the chosen plugins do not read -------------------------------------------------------


@pytest.mark.parametrize(("agent", "kept"), [("ppo", "rollouts"), ("sac", "replay buffer")])
def test_a_buffer_an_sb3_algorithm_never_reads_is_refused(agent: str, kept: str) -> None:
    from framework_plugins.buffers.config import ReplayBufferConfig
    from framework_plugins.buffers.replay import ReplayBuffer

    cfg = compose([f"agent={agent}", "env=lunarlander", "env.continuous=true"])
    agent_section, env_section = config.plugin_section(cfg, "agent"), config.plugin_section(cfg, "env")
    assert agent_section is not None and env_section is not None
    built = agent_section.plugin(agent_section.cfg)
    env = env_section.plugin(env_section.cfg)
    built.check_run(env=env, buffer=None, parts={})
    with pytest.raises(ConfigError, match=f"keeps its own {kept}.*drop buffer=.*agent=dqn"):
        built.check_run(env=env, buffer=ReplayBuffer(ReplayBufferConfig(capacity=10)), parts={})


def test_a_one_step_rollout_that_sb3_cannot_normalise_is_refused() -> None:
    cfg = compose(
        ["agent=ppo", "env.n_envs=1", "agent.hyperparams.n_steps=1", "agent.hyperparams.batch_size=2"]
    )
    agent_section, env_section = config.plugin_section(cfg, "agent"), config.plugin_section(cfg, "env")
    assert agent_section is not None and env_section is not None
    built = agent_section.plugin(agent_section.cfg)
    with pytest.raises(ConfigError, match=_literal("agent.hyperparams.n_steps=1 with env.n_envs=1")):
        built.check_run(env=env_section.plugin(env_section.cfg), buffer=None, parts={})


# -- the objective ---------------------------------------------------------------------------------


class Acting:
    """An agent the run evaluates by playing episodes of its `act` (as DQN and SB3 are)."""

    Config: ClassVar[type] = dict

    def __init__(self, cfg: Any = None) -> None: ...
    def learn(self, ctx: Any) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...


class SelfEvaluating(Acting):
    """An agent that evaluates itself (as AlphaZero does) and does not name its metrics."""

    def evaluate(self, ctx: Any, *, episodes: int) -> dict[str, float]:
        return {}


class Naming(SelfEvaluating):
    """An agent that evaluates itself and names its metrics before the run (MetricNamingAgent)."""

    def eval_metric_names(self, env: Any) -> tuple[str, ...]:
        return ("eval/random/score", "eval/simulations")


def env_plugin(overrides: list[str], stats: tuple[str, ...] | None = None) -> Any:
    """A built env plugin; with `stats`, one that names its envs' episode stats."""
    section = config.plugin_section(compose(overrides), "env")
    assert section is not None
    if stats is None:
        return section.plugin(section.cfg)

    class Naming(section.plugin):  # type: ignore[name-defined,misc]
        def episode_stat_names(self) -> tuple[str, ...]:
            return stats

    return Naming(section.cfg)


def objective_refused(metric: str, env: Any, agent: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        check_objective(metric, env, agent)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_the_objective_is_checked_against_the_metrics_an_episode_evaluation_logs() -> None:
    acrobot = env_plugin(["env=gym", "env.id=Acrobot-v1"])  # a gymnasium env by id: its stats unknown
    for metric in ("eval/return_mean", "eval/length_mean", "eval/win_rate"):  # the last: a stat, maybe
        check_objective(metric, acrobot, Acting())
    cartpole = env_plugin([])  # names its stats (none): exact
    check_objective("eval/return_mean", cartpole, Acting())
    assert objective_refused("eval/win_rate", cartpole, Acting()).startswith(
        "objective.metric='eval/win_rate' is not a metric this run's evaluation logs."
    )
    said = objective_refused("eval/retrun_mean", cartpole, Acting())
    assert said.startswith(
        "objective.metric='eval/retrun_mean' is not a metric this run's evaluation logs. "
        "Did you mean eval/return_mean? It logs eval/length_mean, eval/return_max, eval/return_mean"
    ), said
    assert "Did you mean eval/return_mean?" in objective_refused("return_mean", cartpole, Acting())
    objective_refused("train/loss", cartpole, Acting())
    objective_refused("eval/random/return_mean", cartpole, Acting())  # cartpole has no variants


def test_an_env_that_names_its_episode_stats_makes_the_objective_exact() -> None:
    cartpole = env_plugin([], stats=("win_rate", "damage_dealt"))
    names, complete = evaluation_metrics(cartpole, Acting())
    assert complete and {"eval/win_rate", "eval/win_rate_ci_low", "eval/damage_dealt"} <= names
    check_objective("eval/win_rate", cartpole, Acting())
    said = objective_refused("eval/wins", cartpole, Acting())
    assert "Did you mean eval/win_rate?" in said and "env's episode stats" not in said


def test_an_objective_under_an_evaluation_variant_names_the_variants() -> None:
    gomoku = env_plugin(["env=gomoku", "env.eval_opponents=[random,heuristic]"])
    check_objective("eval/heuristic/return_mean", gomoku, Acting())
    check_objective("eval/heuristic/win", gomoku, Acting())  # the env's stat, not named: may be
    said = objective_refused("eval/heuristc/return_mean", gomoku, Acting())
    assert "Did you mean eval/heuristic/return_mean?" in said
    assert "under eval/<variant>/ for each of random, heuristic" in said


def test_an_agent_that_evaluates_itself_is_held_to_the_metrics_it_names() -> None:
    gomoku = env_plugin(["env=gomoku"])
    check_objective("eval/mcts1000/score", gomoku, SelfEvaluating())  # its own: not named, may be
    objective_refused("score", gomoku, SelfEvaluating())
    check_objective("eval/random/score", gomoku, Naming())
    said = objective_refused("eval/random/scor", gomoku, Naming())
    assert "Did you mean eval/random/score?" in said
