"""Training progress: a rich bar on a terminal (log records print above it, not over it), else log lines.
The display stops at `total_steps`; the run's last lines give the real count when a rollout overshoots."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

from framework.evaluation import untrained_metric

log = logging.getLogger("framework")


class ConsoleHandler(logging.Handler):
    """Log records printed by a rich console, above its live display."""

    def __init__(self, console: Any, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.console = console
        self.setFormatter(formatter or logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)


class ProgressDisplay:
    """Shows env steps, steps/s and the latest value of the run's objective metric."""

    def __init__(
        self,
        total: int,
        *,
        mode: str = "auto",
        start: int = 0,
        log_every_s: float = 10.0,
        metric: str = "eval/return_mean",
    ) -> None:
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.mode = mode
        self.total = total
        self.start_step = start
        self.step = start
        self.metric = metric
        self.eval_value: float | None = None
        self.log_every_s = log_every_s
        self._last_log = time.perf_counter()
        self._rate_from: tuple[float, int] | None = None
        """When and at which step the rate's clock started: the first step reported, not the run's
        start (its plugins' building, a first evaluation), which a rate of training is not."""
        self._bar: Any = None
        self._task: Any = None
        self._swapped: list[tuple[logging.Logger, logging.Handler, logging.Handler]] = []
        if mode == "bar":
            self._start_bar(start)

    def _start_bar(self, start: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        # Fits an 80-column terminal with the usual metric names (steps as 352k/1M): nothing is cut.
        self._bar = Progress(
            BarColumn(bar_width=16),
            TextColumn("{task.fields[steps]}"),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]:>5} steps/s"),
            TextColumn("{task.fields[label]} {task.fields[eval]}"),
            TimeElapsedColumn(),
            TextColumn("elapsed,"),
            TimeRemainingColumn(),
            TextColumn("left"),
            console=Console(file=sys.stderr),
            transient=False,
        )
        self._task = self._bar.add_task(
            "train",
            total=self.total,
            completed=self._shown(start),
            steps=self._steps(start),
            rate="-",
            eval="-",
            label=self.metric,
        )
        self._route_logging(self._bar.console)
        self._bar.start()

    def _route_logging(self, console: Any) -> None:
        """Swap the terminal handlers of the root and framework loggers for one printing on `console`."""
        terminal = {sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__}
        for logger in (logging.getLogger(), log):
            for handler in list(logger.handlers):
                if isinstance(handler, logging.StreamHandler) and handler.stream in terminal:
                    replacement = ConsoleHandler(console, handler.formatter)
                    replacement.setLevel(handler.level)
                    logger.removeHandler(handler)
                    logger.addHandler(replacement)
                    self._swapped.append((logger, handler, replacement))

    @property
    def steps_per_s(self) -> float:
        if self._rate_from is None:
            return 0.0
        t0, s0 = self._rate_from
        elapsed = time.perf_counter() - t0
        return (self.step - s0) / elapsed if elapsed > 0 else 0.0

    def _rate(self) -> str:
        rate = self.steps_per_s
        return f"{rate:.0f}" if rate > 0 else "-"

    def update(self, step: int) -> bool:
        """Record progress; True when a periodic log interval has passed."""
        self.step = step
        now = time.perf_counter()
        if self._rate_from is None:
            self._rate_from = (now, step)
        due = now - self._last_log >= self.log_every_s
        if self._bar is not None and (due or now - self._last_log >= 0.25):
            self._bar.update(
                self._task,
                completed=self._shown(step),
                steps=self._steps(step),
                rate=self._rate(),
                eval=self._eval_text(),
            )
        if due:
            self._last_log = now
            if self.mode == "log":
                log.info(self.line())
        return due

    def set_eval(self, metrics: Mapping[str, float], *, untrained: bool = False) -> None:
        """Show an evaluation's objective value. `untrained`: the untrained agent's (eval_untrained/*), logged
        once on its own; the shown value stays "-" until the trained agent's, as the tracker's curve does."""
        if untrained:
            key = untrained_metric(self.metric)
            if key in metrics:
                log.info("untrained agent: %s %.4g", key, metrics[key])  # short: a line of 100 columns
            return
        if self.metric not in metrics:
            return
        self.eval_value = float(metrics[self.metric])
        if self._bar is not None:
            self._bar.update(self._task, eval=self._eval_text())
        elif self.mode == "log":
            self._last_log = time.perf_counter()  # this line is the interval's: none right after it
            log.info(self.line())

    def line(self) -> str:
        shown = self._shown(self.step)
        pct = 100.0 * shown / self.total if self.total else 100.0
        return (
            f"step {shown}/{self.total} ({pct:.0f}%) | {self._rate()} steps/s | "
            f"{self.metric} {self._eval_text()}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task,
                completed=self._shown(self.step),
                steps=self._steps(self.step),
                eval=self._eval_text(),
            )
            self._bar.stop()
            self._bar = None
        for logger, original, replacement in self._swapped:
            logger.removeHandler(replacement)
            logger.addHandler(original)
        self._swapped.clear()

    def _steps(self, step: int) -> str:
        """`2048/2048`; from 10,000 on, `352k/1M`."""
        return f"{_compact(self._shown(step))}/{_compact(self.total)}"

    def _shown(self, step: int) -> int:
        return min(step, self.total) if self.total else step

    def _eval_text(self) -> str:
        return "-" if self.eval_value is None else f"{self.eval_value:.4g}"  # as the run's last lines


def _compact(n: int) -> str:
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.3g}M"
