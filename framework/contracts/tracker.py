"""Experiment tracking, and what the parent run of a sweep summarises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

#: The parent run's tag with its SweepSummarySpec (JSON), to summarise should the sweep's process die first.
SUMMARY_SPEC_TAG = "framework.summary_spec"
#: The tag that holds a run's name (MLflow's): set, it renames the run; a tracker maps it to its own.
NAME_TAG = "mlflow.runName"


@dataclass(frozen=True)
class SweepSummarySpec:
    """What the parent run of a sweep summarises when the sweep ends."""

    swept_keys: tuple[str, ...]
    objective: str
    """The metric each child is judged by."""
    mode: str
    """max or min: which end of the objective is best."""
    also: tuple[str, ...] = ()
    """More metrics to summarise beside the objective (a table column and a heat map each)."""
    study_dir: str | None = None
    """A folder of the sweeper's own results (hydra/sweeper=optuna: study.json and Optuna's plots),
    logged on the parent under its name; its study.json's best trial becomes the parent's `best.*` tags."""
    jobs: int | None = None
    """The jobs of a grid sweep (None: a sampler's, which a later sweep adds trials to): once resumes
    have finished every one, a stopped sweep's parent is FINISHED too."""


@runtime_checkable
class Tracker(Protocol):
    """Experiment tracking: one run at a time, plus a sweep's parent run. Times are seconds since the epoch.
    Logging may be asynchronous: `run_id` waits until the run exists, `end_run` until all logged is stored."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    @property
    def run_id(self) -> str: ...
    def name_run(self, cfg: Any, env_name: str, overrides: Sequence[str], *, resumes: str | None) -> str:
        """A new run's name in this tracker's listing, from its config and the overrides that set it
        apart; `resumes`: None for a new run, else the id of the run a resume continues ('' if none)."""
        ...

    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
        start_time: float | None = None,
    ) -> None: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def end_run(self, status: str, *, end_time: float | None = None) -> None: ...
    def run_tags(self, run_id: str) -> dict[str, str]: ...
    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path: ...
    def how_to_view(self, run_id: str) -> str: ...
    def start_parent(
        self,
        *,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        start_time: float | None = None,
        resume_run_id: str | None = None,
    ) -> str:
        """Start a sweep's parent run (or reopen `resume_run_id`, a parent that more jobs join); its id."""
        ...

    def end_parent(
        self, run_id: str, status: str, *, summary: SweepSummarySpec, end_time: float | None = None
    ) -> str:
        """End the parent run, with its summary; returns what to tell the user ('' for nothing)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class StoreTracker(Protocol):
    """A tracker whose runs live in a store a command line names: what a printed command adds to reach it.
    (Not a Tracker subclass: isinstance would read `run_id`, which waits for a run, on Python 3.11.)"""

    def store_overrides(self) -> str:
        """The overrides that point a command at this tracker's store (`tracking.uri=...`), led by
        `tracking=NAME` where it is not the default tracker; '' for the default store of the directory
        the command runs in. (A tracker without this method: the core adds `tracking=NAME`.)"""
        ...
