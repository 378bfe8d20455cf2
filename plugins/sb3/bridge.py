"""SB3's hooks into the framework: a callback for the run's services, a logger for the tracker."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import KVWriter, Logger

from framework.contracts import RunContext


class FrameworkCallback(BaseCallback):
    """Progress, evaluation, checkpoints and Ctrl-C, once per vector step."""

    def __init__(self, ctx: RunContext, agent: Any) -> None:
        super().__init__()
        self.ctx = ctx
        self.agent = agent

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            for key, value in info.get("episode_stats", {}).items():
                self.logger.record_mean(f"rollout/{key}", value)
        return self.ctx.after_step(int(self.num_timesteps), self.agent)


class TrackerWriter(KVWriter):
    """Forwards SB3's logged scalars (train/loss, rollout/ep_rew_mean, ...) to the tracker."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
        metrics = {
            key: float(value)
            for key, value in key_values.items()
            if isinstance(value, int | float | np.number) and not isinstance(value, bool)
        }
        if metrics:
            self.tracker.log_metrics(metrics, step)

    def close(self) -> None:
        """Nothing to release: the tracker outlives the SB3 logger."""


def tracker_logger(tracker: Any) -> Logger:
    return Logger(folder=None, output_formats=[TrackerWriter(tracker)])
