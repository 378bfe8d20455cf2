"""A sweep's job as an Optuna trial (`hydra/sweeper=optuna`): each evaluation reports the objective at
its step, and the study's pruner may stop the run there.

The sweeper hands each job its trial in the environment (TRIAL_ENV, set by the job's own override
of `hydra.job.env_set`): the study's storage and name, and the trial; the pruner's description is
the study's (a user attribute the sweeper sets). A
pruned run ends KILLED, tagged `framework.trial_state=PRUNED`, its name ending `(pruned)`, with its
last metrics and a checkpoint; the trial is told PRUNED here, by the job that knows it.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

log = logging.getLogger("framework")

TRIAL_ENV = "FRAMEWORK_OPTUNA_TRIAL"
#: The tag with the trial's state on its run (COMPLETE, PRUNED, FAIL), and the one with its number.
STATE_TAG = "framework.trial_state"
NUMBER_TAG = "framework.trial_number"
#: The status a pruned trial's run ends with: it did not run its budget (FINISHED would compare it
#: with runs that did), and nothing failed; its STATE_TAG tells it from a run stopped by Ctrl-C.
PRUNED_STATUS = "KILLED"


@dataclass
class Trial:
    """The trial this run is: report evaluations, and learn whether to stop."""

    study: optuna.Study
    trial: optuna.Trial
    metric: str
    pruned_at: int | None = None

    @property
    def number(self) -> int:
        return int(self.trial.number)

    def report(self, metrics: Mapping[str, float], step: int, *, final: bool = False) -> bool:
        """Report the objective measured at `step`; True when the pruner says stop (never at the end)."""
        value = metrics.get(self.metric)
        if value is None or not math.isfinite(float(value)):
            return False
        self.trial.report(float(value), step)
        if not final and self.trial.should_prune():
            self.pruned_at = step
            log.info("Optuna trial %d pruned at step %d (%s %.4g)", self.number, step, self.metric, value)
            return True
        return False

    def tell_pruned(self) -> None:
        from optuna.trial import TrialState

        self.study.tell(self.trial, state=TrialState.PRUNED, skip_if_finished=True)

    def tags(self, state: str) -> dict[str, str]:
        return {STATE_TAG: state, NUMBER_TAG: str(self.number), "framework.study_name": self.study.study_name}


def from_environment(metric: str) -> Trial | None:
    """The trial this job is, when a `hydra/sweeper=optuna` sweep launched it; else None."""
    raw = os.environ.get(TRIAL_ENV)
    if not raw:
        return None
    import optuna

    from framework import optuna_study

    spec: dict[str, Any] = json.loads(raw)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna_study.open_storage(str(spec["storage"]))
    study = optuna.load_study(study_name=str(spec["study"]), storage=storage)
    # The pruner this sweep chose (a study resumed with another pruner prunes by the new one).
    study.pruner = optuna_study.make_pruner(study.user_attrs[optuna_study.PRUNER_ATTR])
    return Trial(study, optuna.Trial(study, int(spec["trial_id"])), metric)


def number_from_environment() -> int | None:
    """The number of the trial this job is (None outside a hydra/sweeper=optuna sweep)."""
    raw = os.environ.get(TRIAL_ENV)
    return int(json.loads(raw)["number"]) if raw else None
