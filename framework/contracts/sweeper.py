"""A sweep's job as the core sees it, and a Hydra sweeper shipped as a plugin (`hydra/sweeper=NAME`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

#: Environment variables in which the sweeps plugin hands a sweep's job its parent run and its name.
PARENT_RUN_ENV = "FRAMEWORK_PARENT_RUN_ID"
RUN_NAME_ENV = "FRAMEWORK_RUN_NAME"
#: A sweeper sets it in each job: JSON whose "sweeper" names the plugin that reads it, "number" the trial.
TRIAL_ENV = "FRAMEWORK_TRIAL"
#: A pruned trial's run status: short of its budget (not FINISHED), not failed; a tag tells it from Ctrl-C.
PRUNED_STATUS = "KILLED"


@runtime_checkable
class Trial(Protocol):
    """The trial a sweep's job is: it reports its evaluations and learns whether to stop there."""

    @property
    def number(self) -> int: ...
    @property
    def pruned_at(self) -> int | None:
        """The step its sweeper stopped it at (None: it runs its budget)."""
        ...

    def report(self, metrics: Mapping[str, float], step: int, *, final: bool = False) -> bool:
        """Report an evaluation at `step`; True when the sweeper says stop (never when `final`)."""
        ...

    def tell_pruned(self) -> None:
        """Tell the sweeper that the run stopped where it was told to."""
        ...

    def tags(self, state: str) -> dict[str, str]:
        """The run's tags for its trial in `state`: RUNNING as it starts, then COMPLETE, PRUNED or FAIL."""
        ...


@runtime_checkable
class SweeperPlugin(Protocol):
    """A sweeper plugin, built from its `hydra.sweeper` section (its `Config`)."""

    Config: ClassVar[type]
    target: ClassVar[str]
    """The `hydra.sweeper._target_` of its sweeps."""
    results_dir: ClassVar[str]
    """The sweep dir's folder of its own results, which the parent run holds."""
    hydra_sweeper: ClassVar[type]
    """The Hydra Sweeper class, registered at start (an editable install hides it from Hydra's scan)."""

    def __init__(self, cfg: Any) -> None: ...
    def check(self, overrides: Sequence[str]) -> None:
        """A ConfigError, before anything starts, where the sweep of these overrides cannot start."""
        ...

    def study(self) -> str | None:
        """The name of what the sweep adds to (named here if the command line gave none); None: nothing."""
        ...

    def recorded_parent(self, config: Any) -> str | None:
        """The parent run of an earlier sweep that this one continues (None: a new parent)."""
        ...

    def trial(self, spec: Mapping[str, Any], metric: str) -> Trial:
        """The trial a job is, from what the sweep put in its TRIAL_ENV, judged by `metric`."""
        ...


def trial_spec() -> dict[str, Any] | None:
    """What the sweep that launched this job put in TRIAL_ENV (None outside such a sweep)."""
    raw = os.environ.get(TRIAL_ENV)
    if not raw:
        return None
    spec: dict[str, Any] = json.loads(raw)
    return spec


def parent_run_of_this_job() -> str | None:
    """The parent run the sweep handed down, in a job of a sweep; None elsewhere."""
    return os.environ.get(PARENT_RUN_ENV) or None


def run_name_of_this_job() -> str | None:
    """The name the sweep gave this job; None outside a sweep (or where it gave none)."""
    return os.environ.get(RUN_NAME_ENV) or None
