"""Deaths of restartable Ray actors, counted once per incarnation.

A killed actor fails every call it had queued, some while Ray is still restarting it; counting
failed calls would count one death several times. A death is a new incarnation: each start of an
actor is told to the run's keeper, which numbers them, and the actor says its number with every
`where`. Calls are sent again only once it answers; when Ray gives up on it (its restarts spent)
the run ends in one line naming the actor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from framework.errors import ExplainedError

log = logging.getLogger("framework")

#: How long one wait for an answer lasts before the stop flag is looked at again.
SLICE_S = 0.25


class Incarnations:
    """The pids of a group of restartable actors, and the deaths seen of each."""

    def __init__(self, what: str, names: list[str], *, max_restarts: int, timeout_s: float) -> None:
        self.what, self.names = what, list(names)
        self.max_restarts, self.timeout_s = max_restarts, timeout_s
        self.incarnations = [1] * len(names)
        self.deaths = [0] * len(names)
        self.should_stop: Callable[[], bool] = lambda: False
        """Looked at while waiting for a restart: True ends the wait with KeyboardInterrupt (Ctrl-C)."""

    @property
    def total_deaths(self) -> int:
        return sum(self.deaths)

    def note(self, i: int, where: dict[str, Any]) -> bool:
        """Actor i says where it runs; True (its deaths counted) if it is a new incarnation."""
        incarnation = int(where["incarnation"])
        if incarnation <= self.incarnations[i]:
            return False
        self.incarnations[i] = incarnation
        self.deaths[i] = incarnation - 1
        log.warning(
            "%s %s died; Ray restarted it (pid %s now; %d of search.max_restarts=%d restarts)",
            self.what,
            self.names[i],
            where.get("pid"),
            self.deaths[i],
            self.max_restarts,
        )
        return True

    def wait_alive(
        self, i: int, where: Callable[[float], dict[str, Any]], error: BaseException | None = None
    ) -> bool:
        """Wait until actor i answers `where` (a restart may take seconds); True if it is a new
        incarnation. An actor Ray will not restart is an ExplainedError naming it."""
        from ray import exceptions

        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.should_stop():
                raise KeyboardInterrupt(f"stopped while waiting for {self.what} {self.names[i]}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ExplainedError(
                    f"{self.what} {self.names[i]} did not answer for {self.timeout_s:.0f} s after it failed"
                    + (f" ({_said(error)})" if error is not None else "")
                )
            try:
                return self.note(i, where(min(left, SLICE_S)))
            except exceptions.GetTimeoutError:
                continue
            except exceptions.ActorUnavailableError:
                time.sleep(0.05)
            except exceptions.RayActorError as e:  # died, and Ray will not restart it
                raise ExplainedError(
                    f"{self.what} {self.names[i]} died and Ray cannot restart it: its "
                    f"search.max_restarts={self.max_restarts} are spent ({self.deaths[i]} restarts; "
                    f"{_said(e)})"
                ) from None


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
