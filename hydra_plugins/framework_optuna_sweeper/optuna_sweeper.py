"""The Hydra plugin of `hydra/sweeper=optuna`: its config (Hydra reads it when it scans its plugins, so it
stays light), the Sweeper, which hands the sweep to `_impl`, and the sweeper plugin the core asks
(framework.contracts.sweeper: entry point `optuna` of framework.sweepers). The modules whose names
start with `_` hold the rest, which Hydra's scan does not import."""

# Optional[...] and Dict[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.framework_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    """The Hydra sweeper class (set by `hydra/sweeper=optuna`)."""
    sampler: str = "tpe"
    """tpe, cmaes, random or grid (grid: every swept key a choice(...) or range(...))."""
    pruner: str = "median"
    """median, successive_halving, hyperband or none: stops trials on their evaluations."""
    n_trials: int = 20
    """Trials this command adds to the study."""
    n_jobs: int = 1
    """Trials asked at a time and launched together (in parallel with hydra/launcher=joblib or ray)."""
    seed: Optional[int] = None
    """The sampler's seed."""
    study_name: Optional[str] = None
    """The study; an existing one gains trials (and keeps its MLflow parent). Default: a new study."""
    storage: Optional[str] = None
    """Where the study lives (a database URL every job reaches); default sqlite optuna.db beside the
    tracking store."""
    params: Optional[Dict[str, str]] = None
    """The search space as key: interval(...)/choice(...)/range(...), beside the command line's."""
    sampler_kwargs: Dict[str, Any] = field(default_factory=dict)
    """More arguments of Optuna's sampler (e.g. n_startup_trials: 5)."""
    pruner_kwargs: Dict[str, Any] = field(default_factory=dict)
    """More arguments of Optuna's pruner (defaults from total_steps and eval.every_steps)."""
    max_failure_rate: float = 0.0
    """The share of n_trials that may fail: one more failure ends the sweep (0: the first)."""
    heartbeat_s: int = 10
    """Seconds between the heartbeats of the trials a sweep runs, kept in the study: a trial whose
    heartbeat stopped for 3 of them (its sweep was killed) is marked FAIL when the study is next
    opened, instead of staying RUNNING for ever."""
    skip_duplicates: bool = True
    """A trial whose params equal a finished trial's is not run again: it takes that trial's
    evaluations and end (a run with the same params and seed repeats its result). false where runs
    vary (no fixed seed, a GPU's nondeterminism)."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="framework"
)


class OptunaSweeper(Sweeper):
    """An Optuna study over the command line's search space, its trials the sweep's jobs."""

    def __init__(self, **settings: Any) -> None:
        self.settings = OmegaConf.create(settings)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: List[str]) -> Any:
        from hydra_plugins.framework_optuna_sweeper._impl import StudySweep

        assert self.config is not None and self.launcher is not None
        _check_keys(self.settings)
        sweep = StudySweep(
            self.settings,
            self.config,
            self.launcher,
            self.validate_batch_is_legal,
            OptunaSweeperPlugin.results_dir,
        )
        return sweep.run(arguments)


class OptunaSweeperPlugin:
    """Optuna's study over the command line's search space: samplers, pruning on evaluations."""

    Config = OptunaSweeperConf
    target = OptunaSweeperConf._target_
    results_dir = "optuna"
    hydra_sweeper = OptunaSweeper

    def __init__(self, cfg: Any) -> None:
        # The sweep's own section where it is one: the study's name is written there.
        self.cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.structured(cfg)

    def check(self, overrides: Sequence[str]) -> None:
        from hydra_plugins.framework_optuna_sweeper import _study
        from hydra_plugins.framework_optuna_sweeper._search_space import search_space

        _check_keys(self.cfg)
        _study.check(self.cfg)
        params = self.cfg.get("params")
        search_space(overrides, OmegaConf.to_container(params) if params is not None else None)  # type: ignore[arg-type]

    def study(self) -> str:
        from hydra_plugins.framework_optuna_sweeper import _study

        return _study.name_the_study(self.cfg)

    def recorded_parent(self, config: Any) -> Optional[str]:
        from hydra_plugins.framework_optuna_sweeper import _study

        return _study.recorded_parent(self.cfg, config)

    def trial(self, spec: Mapping[str, Any], metric: str) -> Any:
        from hydra_plugins.framework_optuna_sweeper import _trial

        return _trial.from_spec(spec, metric)


def _check_keys(settings: Mapping[str, Any]) -> None:
    """Refuse a key of the sweeper's section that is none of its settings (one added with `+`)."""
    from framework.errors import ConfigError, did_you_mean

    known = [f.name for f in fields(OptunaSweeperConf) if not f.name.startswith("_")]
    for key in (str(k) for k in settings if str(k) not in known and not str(k).startswith("_")):
        if key == "direction":  # hydra-optuna-sweeper's: here the objective's own
            raise ConfigError(
                "hydra.sweeper.direction: the study's direction is the objective's, objective.mode=max "
                "(the default) or objective.mode=min"
            )
        raise ConfigError(
            f"hydra.sweeper.{key} is not a setting of hydra/sweeper=optuna."
            f"{did_you_mean(key, known, prefix='hydra.sweeper.')} Its settings: {', '.join(known)}"
        )


if TYPE_CHECKING:
    from framework.contracts.sweeper import SweeperPlugin

    _plugin: type[SweeperPlugin] = OptunaSweeperPlugin
