"""Multirun: one parent run per sweep, so every job lands beside its siblings in the tracker."""

from __future__ import annotations

import atexit
import os
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from framework import config

#: Environment variable that hands the sweep's parent run id to its jobs (in-process or spawned).
PARENT_RUN_ENV = "FRAMEWORK_PARENT_RUN_ID"


class SweepParentRun(Callback):
    """Opens the parent run before the first job and closes it after the last."""

    def __init__(self) -> None:
        self._tracker: Any = None
        self._run_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        section = _tracking(config)
        if section is None:
            return
        _, tracker_cls, tracker_cfg = section
        self._tracker = tracker_cls(tracker_cfg)
        overrides = " ".join(config.hydra.overrides.task)
        self._run_id = self._tracker.start_parent(
            run_name=f"sweep {overrides}"[:250],
            tags={
                "framework.sweep_dir": str(config.hydra.sweep.dir),
                "framework.overrides": overrides[:5000],
            },
        )
        os.environ[PARENT_RUN_ENV] = self._run_id
        # A job that raises ends the sweep without on_multirun_end: the parent still ends, FAILED.
        atexit.register(self._end, "FAILED")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end("FINISHED")

    def _end(self, status: str) -> None:
        if self._run_id is None:
            return
        run_id, self._run_id = self._run_id, None
        os.environ.pop(PARENT_RUN_ENV, None)
        try:
            self._tracker.end_parent(run_id, status)
        finally:
            self._tracker.close()


def _tracking(cfg: DictConfig) -> tuple[str, Any, Any] | None:
    if cfg.get("tracking") is None:
        return None
    return config.plugin_section(cfg, "tracking")
