"""`hydra/sweeper=optuna`: an Optuna study over the command line's search space, asked and told here,
its trials run as the sweep's jobs by whichever Hydra launcher the command line chose.

    python -m framework -m agent=ppo env=cartpole hydra/sweeper=optuna hydra.sweeper.n_trials=30 \\
        'agent.hyperparams.learning_rate=tag(log,interval(1e-5,1e-2))' \\
        'agent.hyperparams.n_epochs=range(3,21)' 'agent.hyperparams.gae_lambda=choice(0.9,0.95,0.98)'

The direction is `objective.mode`, a trial's value its job's `objective.metric`. `n_jobs` trials
are asked at a time and launched together (joblib and Ray run them in parallel; the basic launcher
one by one, so it asks one at a time). Each job reports its evaluations to its trial, whose pruner
may stop it (`_trial`). The same `study_name` adds trials to the study (and its MLflow
parent). When the sweep ends, the study's results go to the sweep dir's `optuna/` folder (which the
parent run holds): best trial, each trial's state, and Optuna's plots as PNG and HTML.
"""

from __future__ import annotations

import json
import logging
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from framework.contracts.sweeper import PARENT_RUN_ENV, TRIAL_ENV
from framework.errors import ConfigError
from framework.interrupts import EXIT_KILLED
from hydra_plugins.framework_optuna_sweeper import _plots, _study
from hydra_plugins.framework_optuna_sweeper._search_space import SearchSpace, search_space

if TYPE_CHECKING:
    import optuna
    from hydra.core.utils import JobReturn
    from hydra.plugins.launcher import Launcher

log = logging.getLogger("framework")

#: A trial not run because a finished one had its params: the user attribute naming that one.
DUPLICATE_ATTR = "duplicate_of"


@dataclass
class StudySweep:
    """One invocation of the sweeper: `n_trials` more trials of the study."""

    sweeper: DictConfig
    """hydra.sweeper: sampler, pruner, n_trials, n_jobs, seed, study_name, storage, params, ..."""
    config: DictConfig
    """The sweep's composed config (objective, total_steps, eval, hydra)."""
    launcher: Launcher
    validate: Callable[[Sequence[Sequence[str]]], None]
    """Composes each batch here before launching it (a mistake shows before any job starts)."""
    results_dir: str
    """The sweep dir's folder of the study's results (the plugin's results_dir)."""

    def run(self, arguments: Sequence[str]) -> list[JobReturn]:
        _study.check(self.sweeper)
        params = self.sweeper.get("params")
        space = search_space(arguments, OmegaConf.to_container(params) if params is not None else None)  # type: ignore[arg-type]
        mode = str(self.config.objective.mode)
        if mode not in ("max", "min"):
            raise ConfigError(f"objective.mode={mode} is not one of: max, min")
        study = self._study(space, "maximize" if mode == "max" else "minimize")
        pruner = _study.pruner_spec(self.sweeper, self.config)
        _study.make_pruner(pruner)  # refused here, not in every job
        study.set_user_attr(_study.PRUNER_ATTR, pruner)
        if (
            pruner["name"] != "none"
            and int(OmegaConf.select(self.config, "eval.every_steps", default=0) or 0) <= 0
        ):
            log.warning(
                "hydra.sweeper.pruner=%s: eval.every_steps=0, so no trial is evaluated before its end "
                "and none is pruned",
                pruner["name"],
            )
        n_trials = int(self.sweeper.n_trials)
        if str(self.sweeper.sampler) == "grid":
            n_trials = min(n_trials, _grid_left(study, space))
        # The basic launcher runs a batch's jobs one after another: asking one at a time lets each
        # trial learn from all before it.
        batch = 1 if _runs_in_this_process(self.launcher) else int(self.sweeper.n_jobs)
        returns: list[JobReturn] = []
        failures = 0
        log.info(
            "Optuna study %s in %s: %d trials, %s sampler, %s pruner",
            study.study_name,
            _study.shown(self._url),
            n_trials,
            self.sweeper.sampler,
            pruner["name"],
        )
        done = 0
        while done < n_trials:
            with warnings.catch_warnings():  # the heartbeats are ours (_study.heartbeats)
                warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
                trials = [study.ask(space.distributions) for _ in range(min(batch, n_trials - done))]
            to_run, twins = _split_duplicates(study, trials) if self.sweeper.skip_duplicates else (trials, [])
            jobs = [
                [*space.overrides(t.params), _trial_override(self._url, study.study_name, t)] for t in to_run
            ]
            try:
                if jobs:
                    self.validate(jobs)
                with _study.heartbeats(study, to_run, int(self.sweeper.heartbeat_s)):
                    results = self._launch(jobs, len(returns)) if jobs else []
            except BaseException:  # Ctrl-C, or a batch that cannot run: its trials end FAIL, not RUNNING
                for t in trials:
                    _tell_safely(study, t, state=_fail())
                self._write_results(study)
                raise
            for trial, result in zip(to_run, results, strict=False):
                failures += not self._tell(study, trial, result)
            for trial, twin in twins:
                self._copy(study, trial, twin)
            returns.extend(r for r in results if r is not None)
            done += len(trials)
            # The share is of the trials asked for, not of those run so far: a first trial that fails
            # does not end a sweep that allows some to.
            if failures > float(self.sweeper.max_failure_rate) * n_trials:
                self._write_results(study)
                raise ConfigError(
                    f"hydra/sweeper=optuna: {failures} of {done} trials failed, more than "
                    f"hydra.sweeper.max_failure_rate={self.sweeper.max_failure_rate} of {n_trials} allows "
                    "(why: above, trial by trial)"
                )
        self._write_results(study)
        return returns

    @property
    def _url(self) -> str:
        return _study.storage_url(self.sweeper, self.config)

    def _study(self, space: SearchSpace, direction: str) -> optuna.Study:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        name = _study.name_the_study(self.sweeper)
        study = optuna.create_study(
            storage=_study.open_storage(self._url, int(self.sweeper.heartbeat_s)),
            sampler=_study.make_sampler(self.sweeper, space),
            study_name=name,
            direction=direction,  # type: ignore[arg-type]
            load_if_exists=True,
        )
        _study.check_goes_on(study, self.config, _study.with_searched(space.fixed, space.distributions))
        stale = _study.fail_stale_trials(study)
        if stale:
            log.warning("Optuna study %s: %d trial(s) a stopped sweep left RUNNING are FAIL now", name, stale)
        parent = os.environ.get(PARENT_RUN_ENV)
        if parent and study.user_attrs.get(_study.PARENT_ATTR) is None:
            study.set_user_attr(_study.PARENT_ATTR, parent)
        study.set_user_attr(_study.OBJECTIVE_ATTR, str(self.config.objective.metric))
        study.set_user_attr(
            _study.FIXED_ATTR, _study.trained_by(_study.with_searched(space.fixed, space.distributions))
        )
        return study

    def _launch(self, jobs: list[list[str]], first: int) -> list[JobReturn | None]:
        """The batch's returns; a job of the basic launcher that failed (its run said why, and
        exited) is None, and the sweep goes on; one stopped by Ctrl-C ends the sweep."""
        try:
            return list(self.launcher.launch(jobs, initial_job_idx=first))
        except SystemExit as e:
            if e.code == EXIT_KILLED or len(jobs) > 1:
                raise
            return [None]

    def _tell(self, study: optuna.Study, trial: optuna.Trial, result: JobReturn | None) -> bool:
        """Record the trial's end (a job that pruned itself said so already); False if it failed."""
        from hydra.core.utils import JobStatus
        from optuna.trial import TrialState

        value: Any = None
        if result is not None and result.status == JobStatus.COMPLETED:
            value = result.return_value
        stored = _tell_safely(study, trial, **_outcome(value))
        said = f"trial {trial.number} {stored.state.name}"
        why = _why_it_failed(result)
        if why:
            said += f": {why}"
        if stored.state == TrialState.COMPLETE:
            said += f": {self.config.objective.metric} {stored.value:.4g}"
        elif stored.state == TrialState.PRUNED:
            last = stored.last_step
            said += f" at step {last}" if last is not None else ""
        log.info(
            "%s  (%s)",
            said,
            " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in trial.params.items()),
        )
        return stored.state != TrialState.FAIL

    def _copy(self, study: optuna.Study, trial: optuna.Trial, twin: int) -> None:
        """A duplicate trial takes its twin's evaluations and end (a twin that failed: FAIL)."""
        from optuna.trial import TrialState

        source = study.get_trials(deepcopy=False)[twin]
        trial.set_user_attr(DUPLICATE_ATTR, twin)
        for step, value in sorted(source.intermediate_values.items()):
            trial.report(value, step)
        if source.state == TrialState.COMPLETE:
            _tell_safely(study, trial, values=source.value)
            said = f"COMPLETE: {self.config.objective.metric} {source.value:.4g}"
        else:
            _tell_safely(study, trial, state=source.state if source.state == TrialState.PRUNED else _fail())
            said = source.state.name
        log.info(
            "trial %d repeats trial %d's params: not run again, %s (hydra.sweeper.skip_duplicates=false "
            "runs it)",
            trial.number,
            twin,
            said,
        )

    def _write_results(self, study: optuna.Study) -> None:
        """The study's results in the sweep dir's results folder, for the parent run: study.json and plots."""
        folder = Path(str(self.config.hydra.sweep.dir)) / self.results_dir
        folder.mkdir(parents=True, exist_ok=True)
        write_results(study, folder, self._url, str(self.config.objective.metric))


def write_results(study: optuna.Study, folder: Path, url: str, objective: str) -> dict[str, Any]:
    """study.json (best trial, every trial's number, state, value and params) and Optuna's plots."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    summary: dict[str, Any] = {
        "study_name": study.study_name,
        "storage": _study.shown(url),
        "direction": study.direction.name.lower(),
        "objective": objective,
        "states": {
            s.name: sum(t.state == s for t in trials) for s in TrialState if any(t.state == s for t in trials)
        },
        "trials": [
            {
                "number": t.number,
                "state": t.state.name,
                "value": t.value,
                "params": t.params,
                "last_step": t.last_step,
                **({DUPLICATE_ATTR: t.user_attrs[DUPLICATE_ATTR]} if DUPLICATE_ATTR in t.user_attrs else {}),
            }
            for t in trials
        ],
    }
    if complete:
        best = study.best_trial
        summary.update(best_trial=best.number, best_value=best.value, best_params=best.params)
    (folder / "study.json").write_text(json.dumps(summary, indent=1, default=str))
    _plots.write(study, folder, objective)
    return summary


def _tell_safely(study: optuna.Study, trial: optuna.Trial, **outcome: Any) -> optuna.trial.FrozenTrial:
    try:
        return study.tell(trial, skip_if_finished=True, **outcome)
    except RuntimeError:
        # The grid sampler stops the study once its last point is told (Study.stop, which only an
        # optimize loop takes); the trial's result is stored by then.
        return study.get_trials(deepcopy=False)[trial.number]


def _why_it_failed(result: JobReturn | None) -> str | None:
    """What a job that failed in a launcher's worker said (one that failed here said it itself)."""
    from hydra.core.utils import JobStatus

    from framework.errors import JobFailed

    if result is None or result.status != JobStatus.FAILED:
        return None
    error = result._return_value  # the exception: JobReturn.return_value raises it
    if isinstance(error, JobFailed):
        return error.message  # None: the job printed why
    return f"{type(error).__name__}: {error}"


def _outcome(value: Any) -> dict[str, Any]:
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return {"values": float(value)}
    return {"state": _fail()}


def _fail() -> Any:
    from optuna.trial import TrialState

    return TrialState.FAIL


def _split_duplicates(
    study: optuna.Study, trials: list[optuna.Trial]
) -> tuple[list[optuna.Trial], list[tuple[optuna.Trial, int]]]:
    """The batch's trials to run, and each duplicate's twin: a finished trial with the same params
    (complete or pruned), or one of this batch run before it."""
    from optuna.trial import TrialState

    finished: dict[str, int] = {}  # the trial that ran, for each params
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if DUPLICATE_ATTR not in t.user_attrs:
            finished.setdefault(_key(t.params), t.number)
    to_run: list[optuna.Trial] = []
    twins: list[tuple[optuna.Trial, int]] = []
    for trial in trials:
        twin = finished.get(_key(trial.params))
        if twin is None:
            to_run.append(trial)
            finished[_key(trial.params)] = trial.number
        else:
            twins.append((trial, twin))
    return to_run, twins


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _trial_override(url: str, name: str, trial: optuna.Trial) -> str:
    """The job's own override that tells it which trial it is (`_trial.from_spec` reads it)."""
    spec = {
        "sweeper": "optuna",
        "number": trial.number,
        "trial_id": trial._trial_id,
        "study": name,
        "storage": url,
    }
    text = json.dumps(spec, separators=(",", ":")).replace("\\", "\\\\").replace("'", "\\'")
    return f"++hydra.job.env_set.{TRIAL_ENV}='{text}'"


def _grid_left(study: optuna.Study, space: SearchSpace) -> int:
    """Grid points not yet tried by the study's finished or running trials."""
    size = math.prod(len(values) for values in space.grid().values())
    return max(0, size - len(study.get_trials(deepcopy=False)))


def _runs_in_this_process(launcher: Launcher) -> bool:
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    return isinstance(launcher, BasicLauncher)
