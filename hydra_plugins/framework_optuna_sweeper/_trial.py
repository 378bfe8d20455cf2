"""A sweep's job as an Optuna trial (`hydra/sweeper=optuna`): each evaluation reports the objective at
its step, and the study's pruner may stop the run there.

The sweeper hands each job its trial in the environment (the core's TRIAL_ENV, set by the job's
own override of `hydra.job.env_set`): the study's storage and name, and the trial; the pruner's
description is the study's (a user attribute the sweeper sets). A pruned run ends KILLED, tagged
`framework.trial_state=PRUNED`, its name ending `(pruned)`, with its last metrics and a checkpoint;
the trial is told PRUNED here, by the job that knows it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

log = logging.getLogger("framework")

#: The tag with the trial's state on its run (COMPLETE, PRUNED, FAIL), and the one with its number.
STATE_TAG = "framework.trial_state"
NUMBER_TAG = "framework.trial_number"


@dataclass
class OptunaTrial:
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


def from_spec(spec: Mapping[str, Any], metric: str) -> OptunaTrial:
    """The trial a job is, from what the sweep put in its environment (`_impl._trial_override`)."""
    import optuna

    from hydra_plugins.framework_optuna_sweeper import _study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = _study.open_storage(str(spec["storage"]))
    study = optuna.load_study(study_name=str(spec["study"]), storage=storage)
    # The pruner this sweep chose (a study resumed with another pruner prunes by the new one).
    study.pruner = _study.make_pruner(study.user_attrs[_study.PRUNER_ATTR])
    return OptunaTrial(study, optuna.Trial(study, int(spec["trial_id"])), metric)


if TYPE_CHECKING:
    from framework.contracts.sweeper import Trial

    _trial: type[Trial] = OptunaTrial
