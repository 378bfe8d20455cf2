"""One job of a sweep, as its run records it: what the sweep's summary, the seeds' statistics and
`compare` read of each child run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.provenance import TOTAL_STEPS_TAG

from .finished_before import PAUSED_TAG

#: A child's Optuna trial state (hydra_plugins.framework_optuna_sweeper._trial.STATE_TAG).
TRIAL_STATE_TAG = "framework.trial_state"
#: A run's command line (framework.provenance.run_tags).
OVERRIDES_TAG = "framework.overrides"


@dataclass(frozen=True)
class Child:
    """One job of the sweep, as its run records it."""

    run_id: str
    name: str
    status: str
    duration_s: float | None
    params: dict[str, str]
    objective: float | None
    also: dict[str, float | None] = field(default_factory=dict)
    """Its last value of each metric of `objective.also` (None: never logged)."""
    trial_state: str = ""
    """Its Optuna trial's state (COMPLETE, PRUNED, FAIL) in a hydra/sweeper=optuna sweep; else ''."""
    repeated: bool = False
    """Whether a later run has its settings and seed (in `compare`): shown, but not counted twice."""

    @property
    def outcome(self) -> str:
        """Its status, PRUNED for a trial its pruner stopped (a KILLED run), REPEATED (see `repeated`)."""
        if self.repeated:
            return "REPEATED"
        return "PRUNED" if self.trial_state == "PRUNED" else self.status

    @property
    def finished(self) -> bool:
        """Whether it ran its whole budget and counts: only these are plotted and compared."""
        return self.status == "FINISHED" and not self.repeated


def child_from_run(run: Any, swept_keys: Sequence[str], objective: str, also: Sequence[str] = ()) -> Child:
    info, data = run.info, run.data
    duration = (info.end_time - info.start_time) / 1000 if info.end_time and info.start_time else None
    if duration is not None:  # a resumed run's: its parts, not the pauses between them
        duration = max(0.0, duration - float(data.tags.get(PAUSED_TAG) or 0))
    return Child(
        run_id=str(info.run_id),
        name=str(info.run_name),
        status=str(info.status),
        duration_s=duration,
        params={key: _value(data, key) for key in swept_keys},
        objective=_number(data.metrics.get(objective)),
        also={metric: _number(data.metrics.get(metric)) for metric in also},
        trial_state=str(data.tags.get(TRIAL_STATE_TAG, "")),
    )


def value_of(run: Any, key: str) -> str:
    """The run's value of `key`, as a sweep's summary reads it (a resumed run's budget its latest)."""
    return _value(run.data, key)


def _value(data: Any, key: str) -> str:
    """The run's value of a swept key: its param, else (a config group, `agent=ppo,a2c`, which no
    param holds) the option its command line chose."""
    if key == "total_steps" and TOTAL_STEPS_TAG in data.tags:  # a resumed run's budget (params stay)
        return str(data.tags[TOTAL_STEPS_TAG])
    if key in data.params:
        return str(data.params[key])
    for item in str(data.tags.get(OVERRIDES_TAG, "")).split():
        name, _, value = item.partition("=")
        if name.lstrip("+~") == key:
            return value
    return ""


def _number(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else float(v)
