"""A sweep's job as the core sees it, and a Hydra sweeper shipped as a plugin (`hydra/sweeper=NAME`).

A sweep's parent run is the sweeps plugin's (`plugins/sweeps`, a Hydra callback): it hands each job
its parent run and its name in the environment (PARENT_RUN_ENV, RUN_NAME_ENV), which the core's run
reads to become the parent's child.

The core knows a sweeper only through this contract: the sweep's parent run asks it to check and
name its sweep before the first job, and a job launched by it finds its trial in the environment
(TRIAL_ENV: a JSON object whose "sweeper" names the plugin that reads the rest, and whose "number"
says which trial it is). Hydra itself is told of the sweeper class (`hydra_sweeper`) when the app
starts, as an editable install hides it from Hydra's own scan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

#: Environment variables that hand a sweep's job its parent run and its name (in-process or spawned).
PARENT_RUN_ENV = "FRAMEWORK_PARENT_RUN_ID"
RUN_NAME_ENV = "FRAMEWORK_RUN_NAME"
#: The environment variable a sweeper sets in each job it launches: which trial the job is.
TRIAL_ENV = "FRAMEWORK_TRIAL"
#: The status a pruned trial's run ends with: it did not run its budget (FINISHED would compare it
#: with runs that did), and nothing failed; its state tag tells it from a run stopped by Ctrl-C.
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
        """The run's tags for its trial ending in `state` (COMPLETE, PRUNED, FAIL)."""
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
    """The Hydra Sweeper class Hydra is told of."""

    def __init__(self, cfg: Any) -> None: ...
    def check(self) -> None:
        """A ConfigError, before anything starts, where the sweep cannot start."""
        ...

    def study(self) -> str | None:
        """The name of what the sweep adds to (named here when the command line named none), shown
        in the parent run's name; None when it adds to nothing."""
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
