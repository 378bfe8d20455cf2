"""Deaths of restartable Ray actors, counted once per incarnation.

A killed actor fails every call it had queued, some while Ray is still restarting it; counting
failed calls would count one death several times. A death is a new incarnation: an actor reads,
as it starts, how many times Ray has restarted it (`incarnation_here`) and says that number with
every `where`. The count is Ray's own, kept by its control store (GCS), not by any actor of ours:
it holds whichever actors die and in whatever order, the weights keeper included. Calls are sent
again only once the actor answers; when Ray gives up on it (its restarts spent) the run ends in
one line naming the actor. `settle` retrieves the calls given up on, so that none is left unread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from framework.errors import ExplainedError

log = logging.getLogger("framework")

#: How long one wait for an answer lasts before the stop flag is looked at again.
SLICE_S = 0.25


def actor_errors() -> tuple[type[BaseException], ...]:
    """The errors a call to a dead or restarting actor raises."""
    from ray import exceptions

    return (exceptions.RayActorError, exceptions.ActorUnavailableError)


def incarnation_here() -> int:
    """The incarnation of the actor running this code: 1 at its first start, n + 1 after Ray's n-th
    restart of it.

    Ray's control store counts an actor's restarts before it starts the new process, and is the one
    place that outlives every actor; Ray offers the count publicly only through its state API, which
    needs the dashboard (a local Ray of a run has none), hence its global state accessor here.
    """
    import ray
    from ray._private import state

    actor_id = ray.get_runtime_context().get_actor_id()
    if actor_id is None:
        raise RuntimeError("incarnation_here() is called in a Ray actor only")
    info = state.actors(actor_id=actor_id)
    if "NumRestarts" not in info:
        raise RuntimeError(
            f"Ray {ray.__version__} did not tell the restarts of actor {actor_id} "
            "(ray._private.state.actors has no NumRestarts): this framework needs a Ray 2.x that does"
        )
    return int(info["NumRestarts"]) + 1


class Incarnations:
    """The incarnations of a group of restartable actors, and the deaths seen of each.

    `loud`: each death is a warning line. Only the run's process says them (each once, whoever finds
    the death first); a self-play worker's copy waits for restarts quietly, as the run counts them.
    `max_restarts` None: Ray restarts the actors without limit (the weights keeper).
    """

    def __init__(
        self,
        what: str,
        names: list[str],
        *,
        max_restarts: int | None,
        timeout_s: float,
        loud: bool = True,
        setting: str = "search.max_restarts",
    ) -> None:
        self.what, self.names, self.setting = what, list(names), setting
        """`setting`: the key that sets `max_restarts`, as its messages name it."""
        self.max_restarts, self.timeout_s, self.loud = max_restarts, timeout_s, loud
        self.incarnations = [1] * len(names)
        self.deaths = [0] * len(names)
        self.should_stop: Callable[[], bool] = lambda: False
        """Looked at while waiting for a restart: True ends the wait with KeyboardInterrupt (Ctrl-C)."""
        self._lock = threading.Lock()  # a guard thread notes the keeper's incarnations too

    @property
    def total_deaths(self) -> int:
        return sum(self.deaths)

    def note(self, i: int, where: dict[str, Any]) -> bool:
        """Actor i says where it runs; True (its deaths counted, said once) if it is a new incarnation."""
        incarnation = int(where["incarnation"])
        with self._lock:
            if incarnation <= self.incarnations[i]:
                return False
            new = incarnation - self.incarnations[i]
            self.incarnations[i] = incarnation
            self.deaths[i] = incarnation - 1
        limit = (
            "Ray restarts it without limit"
            if self.max_restarts is None
            else f"of {self.setting}={self.max_restarts}"
        )
        log.log(
            logging.WARNING if self.loud else logging.DEBUG,
            "%s %s died%s; Ray restarted it (pid %s now; restart %d, %s)",
            self.what,
            self.names[i],
            f" {new} times" if new > 1 else "",
            where.get("pid", "?"),
            self.deaths[i],
            limit,
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
                    + (f" ({said(error)})" if error is not None else "")
                )
            try:
                return self.note(i, where(min(left, SLICE_S)))
            except exceptions.GetTimeoutError:
                continue
            except exceptions.ActorUnavailableError:
                time.sleep(0.05)
            except exceptions.RayActorError as e:  # died, and Ray will not restart it
                spent = (
                    f": its {self.setting}={self.max_restarts} are spent"
                    if self.max_restarts is not None
                    else ""  # stopped for good (the run's own close)
                )
                raise ExplainedError(
                    f"{self.what} {self.names[i]} died and Ray cannot restart it{spent} ({said(e)})"
                ) from None


def said(error: BaseException) -> str:
    """An error in one short line: its type and the first line of its message."""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"


def settle(refs: list[Any], *, timeout_s: float) -> list[Any]:
    """Wait at most `timeout_s` for calls that are given up (cancelled, or of an actor that died) and
    retrieve each that ended, its error included; the ones still running.

    Ray reports a call's error that nobody retrieved as an "Unhandled error", with the remote
    traceback, when its ObjectRef goes: a run that stops must leave no such call behind."""
    import ray

    if not refs:
        return []
    ready, rest = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in ready:
        try:
            ray.get(ref, timeout=0)
        except Exception as e:  # given up already: only retrieved
            log.debug("settled: %s", type(e).__name__)
    return rest
