"""A run's last lines: status, final metric, where results are; 100 columns bar a long path or address."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from framework.columns import WIDTH, fits, wrap

#: The width of the column of names (`run dir`, `view it`): the values start after it.
KEY_WIDTH = 16


@dataclass(frozen=True)
class RunSummary:
    run_name: str
    run_id: str
    run_dir: Path
    total_steps: int
    objective: str
    view: str
    """How to look at the run (the tracker's words: a command, a URL)."""

    def text(
        self,
        status: str,
        step: int,
        metrics: Mapping[str, float],
        metrics_step: int | None = None,
        *,
        error: BaseException | None = None,
        extra: Sequence[tuple[str, str]] = (),
    ) -> str:
        """Aligned lines, the status first; why, when the step count passed the budget."""
        steps = f"step {step} of {self.total_steps}"
        if step > self.total_steps:
            steps += " (its last rollout or update cycle ran past the budget)"
        measured = _metric(metrics, self.objective)
        if metrics and metrics_step is not None and metrics_step != step:
            measured += f" (evaluated at step {metrics_step})"
        rows = [(self.objective, measured)]
        if error is not None:
            rows.append(("error", f"{type(error).__name__}: {error}".splitlines()[0][:300]))
        rows += [
            ("run", f"{self.run_name} ({self.run_id})" if self.run_id else self.run_name),
            ("run dir", str(self.run_dir.resolve())),
            ("view it", self.view),
            *extra,
        ]
        lines = wrap(f"Run {status} at {steps}.", WIDTH, indent="  ")
        for key, value in rows:
            lines += _row(key, value)
        return "\n".join(lines)


def say(text: str, *, file: TextIO | None = None) -> None:
    """Print a run's last lines (stdout by default), into the log file too (on a terminal it lacks them)."""
    print(text, file=file or sys.stdout, flush=True)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.emit(logging.LogRecord("framework", logging.INFO, __file__, 0, text, None, None))


def _row(key: str, value: str) -> list[str]:
    """A name and its value, whose lines stay in its column, wrapped at spaces unless only paths and addresses
    make them long: a command holding one stays on one line, to be copied whole."""
    lines = []
    for i, line in enumerate(value.splitlines() or [""]):
        prefix = f"  {key if i == 0 else '':<{KEY_WIDTH}}  "
        if fits(prefix + line):
            lines.append((prefix + line).rstrip())
        else:
            lines += wrap(line, WIDTH, first=prefix, indent=" " * len(prefix))
    return lines


def _metric(metrics: Mapping[str, float], key: str) -> str:
    if key not in metrics:
        if metrics:
            return "not measured (not among this run's evaluation metrics)"
        return "not measured (no evaluation ran)"
    value = f"{metrics[key]:.4g}"
    spread = key.removesuffix("_mean") + "_std"
    if key.endswith("_mean") and spread in metrics:
        # The spread of equal returns is 0, not float rounding's 2.56e-16.
        std = metrics[spread] if abs(metrics[spread]) > 1e-9 * max(1.0, abs(metrics[key])) else 0.0
        value += f" ± {std:.3g}"
    return value
