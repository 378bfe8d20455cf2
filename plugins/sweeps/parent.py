"""Multirun: one parent run per sweep, so every job lands beside its siblings in the tracker.

The parent holds the swept parameters; each child is named for its own values of them first
(`lr3e-4 ne5 s1 sb3-ppo cartpole`: `names`); when the sweep ends the tracker adds its
summary (every child's params, objective, status and duration, the objective across the swept
values, the best child).

Any Hydra launcher runs the jobs: in this process (the default), in local processes
(`hydra/launcher=joblib`) or as Ray tasks (`hydra/launcher=ray`, with this project's defaults:
`ray_launcher_defaults`). A launcher that runs a job elsewhere pickles Hydra's callbacks with it;
the copy of SweepParentRun it unpickles there hands the job its parent run and the launching
directory, and, as the job starts, has it end with the sweep's process (`orphans`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from framework import config, run_dirs
from framework.columns import WIDTH, refuse, wrap
from framework.config import named_overrides, task_overrides
from framework.contracts import SweepSummarySpec, Tracker
from framework.contracts.sweeper import PARENT_RUN_ENV, RUN_NAME_ENV, trial_spec
from framework.contracts.tracker import SUMMARY_SPEC_TAG
from framework.errors import ConfigError
from framework.interrupts import JOB_INTERRUPTED, STOP_ASKED
from framework.provenance import source_tags
from framework.sweepers import sweeper_plugin
from framework_plugins.ray_runtime.reaper import end_this_process_ray

from . import orphans, stopping
from .checks import check_launcher
from .names import common_params, job_name, parent_run_name
from .ray_launcher import ray_launcher_defaults, start_the_launchers_ray

#: The swept keys, handed to the jobs with their parent run (a launcher's worker reads them there).
SWEPT_KEYS_ENV = "FRAMEWORK_SWEPT_KEYS"


def swept_values(overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The swept keys of a multirun command line (and of `hydra.sweeper.params`), with their values."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    swept = {
        o.get_key_element().lstrip("+~"): str(o.input_line).partition("=")[2]
        for o in parsed
        if o.is_sweep_override()
    }
    for key, value in (sweeper_params or {}).items():
        swept.setdefault(str(key), str(value))
    return swept


class SweepParentRun(Callback):
    """Opens the parent run before the first job and closes it, with the sweep's summary, after the last."""

    def __init__(self) -> None:
        self._tracker: Tracker | None = None
        self._run_id: str | None = None
        self._spec: SweepSummarySpec | None = None
        self._job_env: dict[str, str] = {}
        """What a job needs from the environment: the parent run and the swept keys."""
        self._launch_dir: str | None = None
        """The launching process's working directory (relative paths in the config start there)."""
        self._sweep_dir = ""
        self._watch: orphans.Watch | None = None
        """In a launcher's worker, while a job runs: its watch on the sweep's process."""
        self._jobs: int | None = None
        """A grid sweep's number of jobs."""
        # A sweeper's: the trials it was asked, its study, and whether the command line named it.
        self._trials: tuple[int, str, bool] | None = None
        self._started = 0  # jobs started in this process
        self._job_list: list[list[str]] = []  # every job's overrides (a grid sweep's)
        self._started_jobs: list[list[str]] = []
        self._elsewhere = False  # jobs run in a launcher's processes (joblib, Ray): not counted here

    def __getstate__(self) -> dict[str, Any]:
        """The copy a launcher pickles with each job (joblib, Ray): without the parent run's tracker,
        which only the launching process holds (and which cannot be pickled)."""
        return {**self.__dict__, "_tracker": None, "_run_id": None, "_spec": None, "_watch": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """In a job's process, before Hydra starts the job: the environment and working directory
        of the launching process, so that a job on a Ray that was started elsewhere (whose workers
        inherit neither) finds its parent run, and its relative paths (the sweep dir, the default
        ./mlflow.db) mean what they mean to the launcher. A folder this machine lacks is left."""
        self.__dict__.update(state)
        os.environ.update(self._job_env)
        if self._launch_dir and os.path.isdir(self._launch_dir):
            with contextlib.suppress(OSError):
                if os.getcwd() != self._launch_dir:
                    os.chdir(self._launch_dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        orphans.mark_command_process()  # before a launcher starts a worker, which inherits it
        self._job_env = orphans.command_env()  # and a Ray's worker, started before, is handed it
        try:
            check_launcher(config)
        except ConfigError as e:
            _refuse(str(e))
        ray_launcher_defaults(config)
        self._launch_dir = os.getcwd()
        self._sweep_dir = str(config.hydra.sweep.dir)
        sweeper = sweeper_plugin(config)
        study = None
        if sweeper is not None:
            try:
                sweeper.check(task_overrides(config.hydra.overrides.task))
            except ConfigError:
                # No parent for a sweep that cannot start; the sweeper says why, in one message (what a
                # callback raises, Hydra only turns into a warning).
                return
            _refuse_a_bad_job(config, sampled=True)
            named = OmegaConf.select(config, "hydra.sweeper.study_name", default=None) is not None
            study = sweeper.study()  # the study, and what it searches, name the parent
            trials = OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
            self._trials = (trials, study, named) if isinstance(trials, int) and study else None
        else:
            self._job_list = _refuse_a_bad_job(config) or []
            # Hydra's own launcher runs them in turn and none after a failed one (joblib, Ray: all).
            self._jobs, self._elsewhere = len(self._job_list), _jobs_run_elsewhere(config)
        try:
            # The study it goes on with, if any: one it cannot (another objective) refused before its
            # parent is opened again.
            section = _tracking(config)
            tracker = section.plugin(section.cfg) if section is not None else None
            # After the store's check: a sweep refused there claims no study (recorded_parent).
            resumed = sweeper.recorded_parent(config) if sweeper is not None else None
        except ConfigError as e:  # a store that cannot be used (a server gone): refused as a run's is
            _refuse(str(e))
        if section is None or tracker is None:
            _launch(config)
            return
        params = OmegaConf.select(config, "hydra.sweeper.params")
        sweeper_params = OmegaConf.to_container(params) if isinstance(params, DictConfig) else None
        swept = swept_values(task_overrides(config.hydra.overrides.task), sweeper_params)  # type: ignore[arg-type]
        self._spec = SweepSummarySpec(
            swept_keys=tuple(swept),
            objective=str(config.objective.metric),
            mode=str(config.objective.mode),
            also=tuple(str(m) for m in config.objective.get("also") or ()),
            study_dir=os.path.abspath(os.path.join(str(config.hydra.sweep.dir), sweeper.results_dir))
            if sweeper is not None
            else None,
            jobs=self._jobs if sweeper is None and self._jobs else None,
        )
        self._tracker = tracker
        overrides = " ".join(task_overrides(config.hydra.overrides.task))
        self._run_id = self._tracker.start_parent(
            run_name=parent_run_name(
                config, swept, named_overrides(config, task_overrides(config.hydra.overrides.task)), study
            ),
            tags={
                "framework.sweep_dir": str(config.hydra.sweep.dir),
                "framework.overrides": overrides[:5000],
                "framework.swept_keys": json.dumps(list(swept)),
                "framework.objective": self._spec.objective,
                # For the tracker to summarise the sweep even if this process is killed (SIGTERM).
                SUMMARY_SPEC_TAG: json.dumps(dataclasses.asdict(self._spec)),
                **source_tags(),
            },
            params={
                **common_params(config, swept),
                **{f"sweep.{key}": value for key, value in swept.items()},
            },
            start_time=time.time(),
            resume_run_id=resumed,
        )
        self._job_env.update({PARENT_RUN_ENV: self._run_id, SWEPT_KEYS_ENV: json.dumps(list(swept))})
        os.environ.update(self._job_env)
        # A job that raises ends the sweep without on_multirun_end: the parent still ends, FAILED
        # (KILLED after a Ctrl-C: a launcher's wait turned it into a KeyboardInterrupt, or the job
        # run in this process stopped, JOB_INTERRUPTED).
        atexit.register(self._end_at_exit)
        _launch(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end("FINISHED")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A sweep's job is named for its own values (`names`), and, in a launcher's worker, ends
        once the sweep's process is gone (`orphans`)."""
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        self._started += 1
        self._started_jobs.append(task_overrides(config.hydra.overrides.task))
        os.environ.pop(RUN_NAME_ENV, None)
        name = _job_name(config)
        if name:
            os.environ[RUN_NAME_ENV] = name
        if stopping.asked(config.hydra.sweep.dir):  # the job does not start (framework.app.task)
            STOP_ASKED.set()
        self._watch = orphans.Watch.start(stopping.stop_file(config.hydra.sweep.dir))

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        os.environ.pop(RUN_NAME_ENV, None)
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop(failed=job_return.status == JobStatus.FAILED)

    def _end_at_exit(self) -> None:
        interrupted = JOB_INTERRUPTED.is_set() or isinstance(
            getattr(sys, "last_value", None), KeyboardInterrupt
        )
        self._end("KILLED" if interrupted else "FAILED")

    def _end(self, status: str) -> None:
        if self._run_id is None or self._tracker is None or self._spec is None:
            return
        run_id, self._run_id, self._job_env = self._run_id, None, {}
        os.environ.pop(PARENT_RUN_ENV, None)
        os.environ.pop(SWEPT_KEYS_ENV, None)
        try:
            try:
                said = self._tracker.end_parent(run_id, status, summary=self._spec, end_time=time.time())
            except Exception as e:  # at exit too: one line, not "Exception ignored in atexit callback"
                print(f"Sweep {status}: its parent run {run_id} was not ended ({e})", file=sys.stderr)
                return
            if self._elsewhere:  # a stopped sweep's jobs that never started have no run to count
                if status == "KILLED":
                    self._forget_jobs_not_started()
                ran = re.match(r"Sweep \w+: (\d+) run", said or "")
                self._started = int(ran.group(1)) if ran else self._jobs or 0
                if status == "FAILED":  # its launcher ran every job: none was held back by a failed one
                    self._started = self._jobs or 0
            if said and self._jobs and (status == "FAILED" or self._started < self._jobs):
                said += f"\n  jobs              {self._jobs} in the sweep; " + (
                    "it stops at its first failed job, and those after it are not run"
                    if status == "FAILED"
                    else f"{self._jobs - self._started} not started: a sweep of their values runs them"
                    + self._commands_not_started()
                )
            if said and self._trials and status == "KILLED" and self._started < self._trials[0]:
                asked, study, named = self._trials
                # A trial that repeats an earlier one's params is not started, yet done: no count of
                # those not started here.
                same = (
                    "the same command" if named else f"the same command with hydra.sweeper.study_name={study}"
                )
                text = f"{asked} asked, {self._started} started: {same} adds {asked} more to its study "
                text += study
                said += "\n" + "\n".join(wrap(text, WIDTH, first="  trials            ", indent=" " * 20))
            if said:
                print(said, flush=True)
        finally:
            self._tracker.close()
            end_this_process_ray()  # the Ray launcher's own Ray, and its session directory

    def _forget_jobs_not_started(self) -> None:
        """The directories of jobs a stopped launcher's worker began and was ended in before it saw the
        sweep stopping: Hydra's files only, no run (a started job's directory keeps its run)."""
        with contextlib.suppress(OSError):
            for job_dir in Path(self._sweep_dir).iterdir():
                if job_dir.is_dir():
                    run_dirs.forget_if_unused(job_dir)

    def _commands_not_started(self) -> str:
        """The commands that run the jobs of this process's sweep that did not start (a few)."""
        started = {tuple(sorted(job)) for job in self._started_jobs}
        if self._elsewhere:  # a job a launcher's worker started has its directory
            for saved in Path(self._sweep_dir).glob("*/.hydra/overrides.yaml"):
                with contextlib.suppress(OSError, ValueError, TypeError):
                    started.add(tuple(sorted(task_overrides(OmegaConf.load(saved)))))
        left = [job for job in self._job_list if tuple(sorted(job)) not in started]
        if not left:
            return ""
        shown = [f"\n                    python -m framework {shlex.join(job)}" for job in left[:SHOWN_JOBS]]
        return (
            "; one by one:" + "".join(shown) + ("\n                    ..." if len(left) > SHOWN_JOBS else "")
        )


#: The most jobs not started whose commands a stopped sweep prints.
SHOWN_JOBS = 5


def _job_name(config: DictConfig) -> str | None:
    """The job's name, where its parent run handed down the swept keys; None where the job's config
    cannot say it (the run refuses such a config itself, in one message)."""
    raw = os.environ.get(SWEPT_KEYS_ENV)
    if not raw:
        return None
    overrides = task_overrides(config.hydra.overrides.task)
    spec = trial_spec()
    trial = None if spec is None else int(spec["number"])
    try:
        return job_name(config, overrides, named_overrides(config, overrides), json.loads(raw), trial)
    except (ConfigError, OmegaConfBaseException):
        return None


def _refuse_a_bad_job(config: DictConfig, sampled: bool = False) -> list[list[str]] | None:
    """A grid sweep whose jobs' values are refused (a sampled one whose job is) is refused whole,
    before its first job runs (`checks`): one message and exit status 1, as for a single run. (What
    a callback raises Hydra turns into a warning; an exit it lets through.)"""
    from .checks import check_a_sampled_job, check_jobs

    try:
        if sampled:
            check_a_sampled_job(config)
            return None
        return check_jobs(config)
    except ConfigError as e:
        _refuse(str(e))


def _refuse(message: str) -> NoReturn:
    """Refuse the sweep before its first job: one message, exit status 1, its folder gone."""
    from framework import run_dirs

    run_dirs.forget_claimed()
    refuse(message)
    sys.exit(1)


def _jobs_run_elsewhere(cfg: DictConfig) -> bool:
    """Whether the launcher runs the jobs in processes of its own (joblib, Ray), not Hydra's own in turn."""
    return not str(OmegaConf.select(cfg, "hydra.launcher._target_") or "").endswith(".BasicLauncher")


def _launch(cfg: DictConfig) -> None:
    """The launcher's Ray started, and Ctrl-C and SIGTERM set to stop jobs run elsewhere gently."""
    start_the_launchers_ray(cfg)
    if _jobs_run_elsewhere(cfg):
        stopping.stop_gently(str(cfg.hydra.sweep.dir))


def _tracking(cfg: DictConfig) -> config.Section | None:
    if cfg.get("tracking") is None:
        return None
    return config.plugin_section(cfg, "tracking")
