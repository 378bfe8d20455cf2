"""Distributed self-play: `agent.workers` Ray actors (`RaySelfPlayWorker`), each playing its own
games with its own trees over the run's inference service, which each joins through the search
plugin (DistributedSearch.join); `RayAsyncRunner`, in the run's process, gathers their games.

Each call to a worker carries the runner's settings of the moment (the schedules' temperature,
Dirichlet ε and simulations). A worker that dies is restarted by Ray (`agent.worker_max_restarts`):
the death is counted once (by its incarnation), its unfinished games are discarded, and calls go
to it again once it answers. Workers are spread over the cluster's nodes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from framework.errors import ExplainedError
from framework_plugins.boardgames import BEST, Measured
from framework_plugins.ray_runtime import runtime as ray_runtime
from framework_plugins.ray_runtime.restarts import (
    SLICE_S,
    Incarnations,
    actor_errors,
    incarnation_here,
    settle,
)

if TYPE_CHECKING:
    from framework_plugins.boardgames import BoardGame, DistributedSearch, SelfPlaySource, SharedInference

    from .config import AlphaZeroConfig

log = logging.getLogger("framework")

#: Calls queued on each worker, so that it plays on while the run trains.
CALLS_PER_WORKER = 4
#: How long closing waits for the calls of the workers it stopped to end.
SETTLE_S = 10.0
#: Figures of a worker's search that add up over calls and workers; the others are means.
SUMS = ("perf/inference_failures",)


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """The agent's settings of its workers."""

    count: int
    num_cpus: float = 1.0
    max_restarts: int = 3
    timeout_s: float = 600.0

    @classmethod
    def of(cls, cfg: AlphaZeroConfig, count: int) -> WorkerSettings:
        return cls(count, cfg.worker_num_cpus, cfg.worker_max_restarts, cfg.worker_timeout_s)


@dataclasses.dataclass
class PlayResult:
    """One worker call: the moves played, the games finished, and the search's figures."""

    moves: int
    records: list[Any]
    simulations: int
    seconds: float
    figures: dict[str, float]
    """The worker's search's figures over the call (SearchEngine.perf_metrics)."""
    incarnation: int


class RaySelfPlayWorker:
    """A Ray actor: a self-play runner over a PUCT search on the run's inference service."""

    def __init__(
        self,
        plugin: DistributedSearch,
        game: BoardGame,
        address: Any,
        make_runner: Callable[[Any, int], SelfPlaySource],
        seed: int,
    ) -> None:
        import torch

        torch.set_num_threads(1)
        self.incarnation = incarnation_here()
        if self.incarnation > 1:
            seed += 1_000_003 * self.incarnation  # a restarted worker plays new games
        self.engine = plugin.join(address, game=game, model=BEST, seed=seed)
        self.runner = make_runner(self.engine, seed)

    def play(self, steps: int, settings: Mapping[str, float]) -> PlayResult:
        started, sims = time.perf_counter(), self.engine.simulations
        self.runner.configure(settings)
        moves, records = 0, []
        for _ in range(steps):
            played, finished = self.runner.step()
            moves += played
            records += finished
        return PlayResult(
            moves=moves,
            records=records,
            simulations=self.engine.simulations - sims,
            seconds=time.perf_counter() - started,
            figures=self.engine.perf_metrics(),
            incarnation=self.incarnation,
        )

    def where(self) -> dict[str, Any]:
        import os

        import ray

        return {
            "pid": os.getpid(),
            "incarnation": self.incarnation,
            "node_id": ray.get_runtime_context().get_node_id(),
        }


class RayAsyncRunner:
    """The run's side of distributed self-play: starts the workers, gathers their games, and sends
    calls again to a restarted worker once it answers."""

    def __init__(
        self,
        cfg: WorkerSettings,
        inference: SharedInference,
        make_runner: Callable[[Any, int], SelfPlaySource],
        *,
        plugin: DistributedSearch,
        game: BoardGame,
        seed: int,
        should_stop: Callable[[], bool],
    ) -> None:
        """`plugin` is what each worker makes its search with (`plugin.join`), over `inference`
        (the run's service, started by `plugin`); `make_runner` must be picklable."""
        ray = ray_runtime.ensure()
        self.cfg, self.inference, self.should_stop = cfg, inference, should_stop
        self.timeout_s = cfg.timeout_s
        ray_runtime.check_fits(
            "a self-play worker", cfg.num_cpus, 0, f"agent.worker_num_cpus={cfg.num_cpus:g}"
        )
        prefix = f"framework-selfplay-{uuid.uuid4().hex[:12]}"
        names = [f"{prefix}-{i}" for i in range(cfg.count)]
        remote = ray.remote(RaySelfPlayWorker)
        self.workers = [
            remote.options(
                name=name,
                num_cpus=cfg.num_cpus,
                max_restarts=cfg.max_restarts,
                max_task_retries=0,
                scheduling_strategy="SPREAD",
            ).remote(plugin, game, inference.address, make_runner, seed + 10_007 * (i + 1))
            for i, name in enumerate(names)
        ]
        self.incarnations = Incarnations(
            "self-play worker",
            names,
            max_restarts=cfg.max_restarts,
            timeout_s=self.timeout_s,
            setting="agent.worker_max_restarts",
        )
        self.incarnations.should_stop = should_stop
        self.settings: dict[str, float] = {}
        self.simulations = 0
        self.clamped: dict[tuple[int, int], float] = {}
        """Each worker incarnation's pending visits found already at 0 when taken back, over its
        life (a bookkeeping error: 0)."""
        self._results: list[PlayResult] = []
        """The calls that ended since the last figures."""
        self._calls: dict[Any, int] = {}
        self._dropped: list[Any] = []
        """Calls of a worker that died, given up: retrieved later (settle), so none is left unretrieved."""
        try:
            self.placement = [self._wait_alive(i) for i in range(len(self.workers))]
        except BaseException:
            self.close()
            raise
        for i in range(len(self.workers)):
            for _ in range(CALLS_PER_WORKER):
                self._submit(i)
        nodes = {w["node_id"] for w in self.placement}
        log.info("self-play: %d Ray worker(s) on %d node(s)", len(self.workers), len(nodes))

    @property
    def deaths(self) -> list[int]:
        return self.incarnations.deaths

    def configure(self, settings: Mapping[str, float]) -> None:
        """The settings the next calls carry (each worker's runner takes them before it plays)."""
        self.settings = dict(settings)

    def step(self) -> tuple[int, list[Any]]:
        """The moves and finished games of every worker call that ended (waits for at least one)."""
        import ray

        ready = self._wait_any()
        moves, records = 0, []
        for ref in ready:
            i = self._calls.pop(ref, None)
            if i is None:  # a call of a worker that died earlier in this loop
                continue
            try:
                result: PlayResult = ray.get(ref)
            except actor_errors() as e:
                self._worker_failed(i, e)
                continue
            except ray.exceptions.RayTaskError as e:
                raise _explained(e) from None
            if result.incarnation > self.incarnations.incarnations[i]:
                self.incarnations.note(i, {"incarnation": result.incarnation})
            moves += result.moves
            records += result.records
            self.simulations += result.simulations
            self.clamped[(i, result.incarnation)] = result.figures.get("perf/pending_clamped", 0.0)
            self._results.append(result)
            self._submit(i)
        return moves, records

    def perf_metrics(self) -> dict[str, float]:
        results, self._results = self._results, []
        metrics = fold(results, len(self.workers))
        metrics["perf/selfplay_workers"] = float(len(self.workers))
        # Every actor asked where it is: a restart no failed call has shown yet is counted too.
        for i in range(len(self.workers)):
            self._wait_alive(i)
        metrics["perf/worker_restarts"] = float(self.incarnations.total_deaths)
        if isinstance(self.inference, Measured):
            metrics.update(self.inference.perf_metrics())
        metrics["perf/pending_clamped"] = float(sum(self.clamped.values()))
        return metrics

    def close(self) -> None:
        """Stop the workers; every call still in flight is cancelled and its end retrieved."""
        import ray

        calls = [*self._calls, *self._dropped]
        self._calls.clear()
        self._dropped = []
        for ref in calls:
            try:
                ray.cancel(ref)
            except Exception as e:  # already finished
                log.debug("cancel: %s", e)
        for worker in self.workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception as e:  # Ray already shut down
                log.debug("kill worker: %s", e)
        self.workers = []
        if calls and ray.is_initialized():
            # Killed, the workers fail their calls at once: a few seconds cover a loaded machine.
            left = settle(calls, timeout_s=SETTLE_S)
            if left:
                log.debug("self-play: %d call(s) of stopped workers not ended", len(left))

    def _wait_any(self) -> list[Any]:
        """The calls that ended, waiting in slices so that Ctrl-C is seen within a second."""
        import ray

        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.should_stop():
                raise KeyboardInterrupt("stopped while waiting for the self-play workers")
            ready, rest = ray.wait(list(self._calls), num_returns=1, timeout=SLICE_S)
            if ready:
                if rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                return ready
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no self-play worker finished a move in {self.timeout_s:g} s (agent.worker_timeout_s)"
                )

    def _wait_alive(self, i: int, error: BaseException | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def where(timeout_s: float) -> dict[str, Any]:
            import ray

            found.update(ray.get(self.workers[i].where.remote(), timeout=timeout_s))
            return found

        self.incarnations.wait_alive(i, where, error)
        return found

    def _worker_failed(self, i: int, error: BaseException) -> None:
        """A call failed with its worker: drop its other calls, wait until Ray restarted it (a death
        counted once), then give it calls again; its unfinished games are lost."""
        for ref in [r for r, w in self._calls.items() if w == i]:
            self._calls.pop(ref)  # the worker's queued calls failed with it
            self._dropped.append(ref)
        self._dropped = settle(self._dropped, timeout_s=0)
        self._wait_alive(i, error)
        log.warning(
            "self-play worker %s: its unfinished games are discarded and the run goes on",
            self.incarnations.names[i],
        )
        for _ in range(CALLS_PER_WORKER):
            self._submit(i)

    def _submit(self, i: int) -> None:
        self._calls[self.workers[i].play.remote(1, self.settings)] = i


def fold(results: list[PlayResult], workers: int) -> dict[str, float]:
    """The figures of workers' calls as one search's: simulations a second over the workers
    together, counts added up (SUMS), the other figures the means of the calls' by their
    simulations."""
    sims, seconds = sum(r.simulations for r in results), sum(r.seconds for r in results)
    metrics: dict[str, float] = {}
    if sims and seconds > 0:
        metrics["perf/search_sims_per_s"] = sims / (seconds / max(workers, 1))
    weights: dict[str, float] = {}
    for result in results:
        for key, value in result.figures.items():
            if key in SUMS:
                metrics[key] = metrics.get(key, 0.0) + value
            elif key != "perf/search_sims_per_s" and result.simulations:
                metrics[key] = metrics.get(key, 0.0) + value * result.simulations
                weights[key] = weights.get(key, 0.0) + result.simulations
    for key, weight in weights.items():
        metrics[key] /= weight
    metrics.pop("perf/pending_clamped", None)  # each worker's over its life: the runner adds them up
    return metrics


def _explained(error: Any) -> BaseException:
    """A worker's call that raised: a worker's ExplainedError (an inference actor that cannot
    restart) as the one line it is, without the worker's traceback Ray wraps it in; else as Ray gave it."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, ExplainedError):
        return ExplainedError(str(cause).strip())
    return error


if TYPE_CHECKING:
    from framework_plugins.boardgames import SelfPlaySource as _Source

    _source: type[_Source] = RayAsyncRunner
