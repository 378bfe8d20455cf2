"""The weights keeper: where an inference actor that starts, or falls behind, finds the current
weights; and the guard, in the run's process, that keeps it seeded.

The run's process holds the authoritative weights: each model's current version and the ObjectRef
of its weights, which it owns, so that the object outlives any actor. The keeper holds a copy of
that table for the actors to read. Ray restarts a killed keeper, empty; until the run's process
has seeded it again it answers nothing about weights (`current` and `versions` wait), so that no
actor loads, and no search begins with, anything older than what the run last published. The
guard (`KeeperGuard`) looks at the keeper a few times a second from a thread of the run's process,
seeds it whenever it is unseeded (its first start and every restart), and counts its deaths.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from framework.errors import ExplainedError
from framework_plugins.ray_runtime.restarts import SLICE_S, Incarnations, incarnation_here, said, settle

log = logging.getLogger("framework")

#: A model's entry: (version, [ObjectRef of its weights]); in a list so that Ray hands the reference.
Entry = tuple[int, list[Any]]

#: How often the guard looks at the keeper.
GUARD_EVERY_S = 0.2


class WeightsKeeper:
    """A Ray actor (asyncio): each model's current version and weights, seeded by the run's process."""

    def __init__(self) -> None:
        self.models: dict[str, Entry] = {}
        self.incarnation = incarnation_here()
        self._seeded: asyncio.Event | None = None

    async def seed(self, models: dict[str, Entry]) -> int:
        """The run's whole table (each model's current entry): from now on the keeper answers."""
        for model, (version, holder) in models.items():
            self._keep(model, version, holder)
        self._event().set()
        return self.incarnation

    async def set(self, model: str, version: int, holder: list[Any]) -> int:
        """A newer version of one model (an older one is ignored: `seed` and `set` may cross)."""
        self._keep(model, version, holder)
        return version

    async def current(self) -> dict[str, Entry]:
        await self._event().wait()
        return dict(self.models)

    async def versions(self) -> dict[str, int]:
        await self._event().wait()
        return {model: version for model, (version, _) in self.models.items()}

    async def where(self) -> dict[str, Any]:
        """Its process and incarnation, whether it is seeded, and the versions it holds."""
        import os

        return {
            "pid": os.getpid(),
            "incarnation": self.incarnation,
            "seeded": self._event().is_set(),
            "versions": {model: version for model, (version, _) in self.models.items()},
        }

    def _keep(self, model: str, version: int, holder: list[Any]) -> None:
        if version > self.models.get(model, (-1, []))[0]:
            self.models[model] = (version, holder)

    def _event(self) -> asyncio.Event:
        # Made in the actor's event loop, at its first use there.
        if self._seeded is None:
            self._seeded = asyncio.Event()
        return self._seeded


def start_keeper(name: str) -> Any:
    """The keeper, by Ray name: no CPU reserved (it does no work), restarted by Ray without limit."""
    import ray

    return ray.remote(WeightsKeeper).options(name=name, num_cpus=0, max_restarts=-1).remote()


class KeeperGuard:
    """In the run's process: seeds the keeper from `table()` (the run's own entries) whenever it is
    found unseeded, and counts its deaths, from a thread (`start`) and when asked (`check`)."""

    def __init__(
        self, keeper: Any, name: str, table: Callable[[], dict[str, Entry]], *, timeout_s: float
    ) -> None:
        self.keeper, self.table, self.timeout_s = keeper, table, timeout_s
        self.incarnations = Incarnations("weights keeper", [name], max_restarts=None, timeout_s=timeout_s)
        self._lock = threading.Lock()
        self._asked: Any = None
        """The `where` call in flight, waited for again next time rather than sent anew."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def deaths(self) -> int:
        return self.incarnations.total_deaths

    def start(self) -> None:
        """Seed the keeper now (its first start), then keep it seeded from a thread."""
        self.check()
        self._thread = threading.Thread(target=self._watch, name="weights-keeper-guard", daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Wait until the keeper answers (a restart takes seconds), count a new incarnation, and seed
        it if it is unseeded; an ExplainedError when it does not answer in time."""
        from ray import exceptions

        found: dict[str, Any] = {}

        def where(timeout_s: float) -> dict[str, Any]:
            found.update(self._where(timeout_s))
            return found

        with self._lock:
            while True:
                self.incarnations.wait_alive(0, where)
                try:
                    self._seed_if_needed(found, self.timeout_s)
                    return
                except exceptions.ActorUnavailableError:  # it died again as it was seeded
                    continue
                except exceptions.GetTimeoutError:
                    raise ExplainedError(
                        f"the weights keeper {self.incarnations.names[0]} took no weights for "
                        f"{self.timeout_s:.0f} s (search.inference_timeout_s)"
                    ) from None

    def close(self) -> None:
        """Stop the thread (the keeper itself is the service's to stop)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s)
            self._thread = None

    def settle(self) -> None:
        """Retrieve the `where` call still in flight (once the keeper is stopped), so that Ray has
        no unretrieved result of ours to report."""

        asked, self._asked = self._asked, None
        if asked is not None:
            settle([asked], timeout_s=SLICE_S)

    def _watch(self) -> None:
        from ray import exceptions

        while not self._stop.wait(GUARD_EVERY_S):
            if not self._lock.acquire(timeout=SLICE_S):  # `check` is at it
                continue
            try:
                where = self._where(SLICE_S)
                self.incarnations.note(0, where)
                self._seed_if_needed(where, SLICE_S)
            except (exceptions.GetTimeoutError, exceptions.RayActorError) as e:
                # Restarting (a call waits for the new process), or stopped with the run.
                log.debug("weights keeper: no answer yet (%s)", said(e))
            except Exception as e:  # the thread never dies of it: the next look tries again
                log.debug("weights keeper: %s", said(e))
            finally:
                self._lock.release()

    def _where(self, timeout_s: float) -> dict[str, Any]:
        """The keeper's `where`, waited for at most `timeout_s` (a GetTimeoutError after that)."""
        import ray
        from ray import exceptions

        if self._asked is None:
            self._asked = self.keeper.where.remote()
        ready, _ = ray.wait([self._asked], timeout=timeout_s)
        if not ready:
            raise exceptions.GetTimeoutError(f"the weights keeper did not answer in {timeout_s:g} s")
        asked, self._asked = self._asked, None
        found: dict[str, Any] = ray.get(asked)
        return found

    def _seed_if_needed(self, where: dict[str, Any], timeout_s: float) -> None:
        """Seed the keeper that `where` came from if it is unseeded (a GetTimeoutError when it did
        not take the seed in `timeout_s`: the seed is then taken later, or sent again)."""
        import ray

        if where["seeded"]:
            return
        table = self.table()
        ray.get(self.keeper.seed.remote(table), timeout=timeout_s)
        if where["incarnation"] > 1:
            versions = ", ".join(f"{model} v{version}" for model, (version, _) in sorted(table.items()))
            log.info("weights keeper seeded again by the run (%s)", versions or "no weights yet")
