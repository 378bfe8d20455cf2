"""Training progress: a rich bar on a terminal, plain log lines elsewhere."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("framework")


class ProgressDisplay:
    """Shows env steps, steps/s and the latest evaluation return."""

    def __init__(self, total: int, *, mode: str = "auto", start: int = 0, log_every_s: float = 10.0) -> None:
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.mode = mode
        self.total = total
        self.start_step = start
        self.step = start
        self.eval_return: float | None = None
        self.log_every_s = log_every_s
        self._t0 = time.perf_counter()
        self._last_log = self._t0
        self._bar: Any = None
        self._task: Any = None
        if mode == "bar":
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>8} steps/s"),
                TextColumn("eval {task.fields[eval]}"),
                TimeRemainingColumn(),
                transient=False,
            )
            self._task = self._bar.add_task("train", total=total, completed=start, rate="-", eval="-")
            self._bar.start()

    @property
    def steps_per_s(self) -> float:
        elapsed = time.perf_counter() - self._t0
        return (self.step - self.start_step) / elapsed if elapsed > 0 else 0.0

    def update(self, step: int) -> bool:
        """Record progress; True when a periodic log interval has passed."""
        self.step = step
        now = time.perf_counter()
        due = now - self._last_log >= self.log_every_s
        if self._bar is not None and (due or now - self._last_log >= 0.25):
            self._bar.update(
                self._task, completed=step, rate=f"{self.steps_per_s:.0f}", eval=self._eval_text()
            )
        if due:
            self._last_log = now
            if self.mode == "log":
                log.info(self.line())
        return due

    def set_eval(self, value: float) -> None:
        self.eval_return = value
        if self.mode == "log":
            log.info(self.line())

    def line(self) -> str:
        pct = 100.0 * self.step / self.total if self.total else 100.0
        return (
            f"step {self.step}/{self.total} ({pct:.0f}%) | {self.steps_per_s:.0f} steps/s | "
            f"eval/return_mean {self._eval_text()}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.step, eval=self._eval_text())
            self._bar.stop()
            self._bar = None

    def _eval_text(self) -> str:
        return "-" if self.eval_return is None else f"{self.eval_return:.1f}"
