"""Distributed self-play for `search=ray_async`: `search.workers` Ray actors (`RaySelfPlayWorker`),
each playing its own games with its own trees, all sharing the run's inference actors, whose
weights the run keeps in step (`RayAsyncRunner`, in the run's process).

A worker that dies is restarted by Ray (`search.max_restarts`); the games it had not finished
are discarded, the run says so and goes on. Workers are spread over the cluster's nodes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from framework import ray_runtime

from .inference import InferenceStats, RayInferenceClient, actor_errors

if TYPE_CHECKING:
    from framework.contracts import SearchEngine, SelfPlaySource

    from .ray_async import RayAsyncEngine

log = logging.getLogger("framework")

#: Calls queued on each worker, so that it plays on while the run trains.
CALLS_PER_WORKER = 4


@dataclasses.dataclass
class PlayResult:
    """One worker call: the moves played, the games finished, and the search's figures."""

    moves: int
    records: list[Any]
    simulations: int
    seconds: float
    stats: InferenceStats


class RaySelfPlayWorker:
    """A Ray actor running a self-play runner over a `RayAsyncEngine` that uses the shared actors."""

    def __init__(
        self,
        cfg: Any,
        game: Any,
        actors: list[str],
        make_runner: Callable[[SearchEngine, int], SelfPlaySource],
        seed: int,
    ) -> None:
        import ray
        import torch

        from .ray_async import RayAsyncEngine

        torch.set_num_threads(1)
        # The inference actors come by name: Ray may not keep actor handles among a restartable
        # actor's arguments (ray-project/ray#53727), and says so on every start.
        client = RayInferenceClient({n: ray.get_actor(n) for n in actors}, timeout_s=cfg.inference_timeout_s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Ray's own use of its actor_id
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        if restarted:
            seed += int(time.time_ns() % 1_000_003)  # a restarted worker plays new games
        self.engine = RayAsyncEngine(
            cfg, game=game, evaluator_factory=_no_local_evaluator, seed=seed, client=client
        )
        self.runner = make_runner(self.engine, seed)

    def play(self, steps: int) -> PlayResult:
        started, sims = time.perf_counter(), self.engine.simulations
        moves, records = 0, []
        for _ in range(steps):
            played, finished = self.runner.step()
            moves += played
            records += finished
        assert self.engine._manager is not None
        return PlayResult(
            moves=moves,
            records=records,
            simulations=self.engine.simulations - sims,
            seconds=time.perf_counter() - started,
            stats=self.engine._manager.take_stats(),
        )

    def where(self) -> dict[str, Any]:
        import os

        import ray

        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}


def _no_local_evaluator() -> Any:
    raise RuntimeError("a self-play worker evaluates on the run's inference actors only")


class RayAsyncRunner:
    """The run's side of distributed self-play: starts the workers, gathers their games, keeps the
    inference actors' weights in step with the run's network, and restarts what dies."""

    def __init__(
        self,
        engine: RayAsyncEngine,
        client: RayInferenceClient,
        make_runner: Callable[[SearchEngine, int], SelfPlaySource],
        *,
        seed: int,
    ) -> None:
        ray = ray_runtime.ensure()
        cfg = engine.cfg
        self.engine, self.cfg = engine, cfg
        self.timeout_s = 5 * cfg.inference_timeout_s
        ray_runtime.check_fits(
            "a self-play worker", cfg.worker_num_cpus, 0, f"search.worker_num_cpus={cfg.worker_num_cpus:g}"
        )
        worker_cfg = dataclasses.replace(cfg, workers=0)
        remote = ray.remote(RaySelfPlayWorker).options(
            num_cpus=cfg.worker_num_cpus,
            max_restarts=cfg.max_restarts,
            max_task_retries=0,
            scheduling_strategy="SPREAD",
        )
        self.workers = [
            remote.remote(worker_cfg, engine.game, list(client.names), make_runner, seed + 10_007 * (i + 1))
            for i in range(cfg.workers)
        ]
        self.deaths = [0] * len(self.workers)
        self.stats = InferenceStats()
        self.simulations = 0
        self._sims_mark = 0
        self._search_s = 0.0
        self._calls: dict[Any, int] = {}
        for i in range(len(self.workers)):
            for _ in range(CALLS_PER_WORKER):
                self._submit(i)
        self.placement = self._where()
        nodes = {w["node_id"] for w in self.placement}
        log.info("self-play: %d Ray worker(s) on %d node(s)", len(self.workers), len(nodes))

    def step(self) -> tuple[int, list[Any]]:
        """The moves and finished games of every worker call that ended (waits for at least one)."""
        import ray

        self.engine.sync_weights()
        ready, rest = ray.wait(list(self._calls), num_returns=1, timeout=self.timeout_s)
        if not ready:
            raise TimeoutError(
                f"no self-play worker finished a move in {self.timeout_s:.0f} s "
                "(5 × search.inference_timeout_s)"
            )
        if rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        moves, records = 0, []
        for ref in ready:
            i = self._calls.pop(ref, None)
            if i is None:  # a call of a worker that died earlier in this loop
                continue
            try:
                result: PlayResult = ray.get(ref)
            except actor_errors() as e:
                self._worker_died(i, e)
                self._submit(i)
                continue
            moves += result.moves
            records += result.records
            self.simulations += result.simulations
            self.engine.simulations += result.simulations
            self._search_s += result.seconds
            self.stats.add(result.stats)
            if result.stats.failures:  # a restarted inference actor has its first weights
                self.engine.sync_weights(force=True)
            self._submit(i)
        return moves, records

    def perf_metrics(self) -> dict[str, float]:
        from .ray_async import inference_metrics

        sims, self._sims_mark = self.simulations - self._sims_mark, self.simulations
        seconds, self._search_s = self._search_s, 0.0
        stats, self.stats = self.stats, InferenceStats()
        metrics = inference_metrics(stats, self.cfg.batch_size, sims, seconds / max(len(self.workers), 1))
        metrics["perf/selfplay_workers"] = float(len(self.workers))
        return metrics

    def close(self) -> None:
        import ray

        for ref in list(self._calls):
            try:
                ray.cancel(ref)
            except Exception as e:  # already finished
                log.debug("cancel: %s", e)
        self._calls.clear()
        for worker in self.workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception as e:  # Ray already shut down
                log.debug("kill worker: %s", e)
        self.workers = []

    def _submit(self, i: int) -> None:
        self._calls[self.workers[i].play.remote(1)] = i

    def _worker_died(self, i: int, error: BaseException) -> None:
        self.deaths[i] += 1
        for ref in [r for r, w in self._calls.items() if w == i]:
            self._calls.pop(ref)  # the dead worker's queued calls failed with it
        if self.deaths[i] > self.cfg.max_restarts:
            raise RuntimeError(
                f"self-play worker {i} died {self.deaths[i]} times (search.max_restarts="
                f"{self.cfg.max_restarts}): {type(error).__name__}: {str(error).splitlines()[0][:300]}"
            ) from error
        log.warning(
            "self-play worker %d died (%s); Ray restarts it (%d of search.max_restarts=%d), its "
            "unfinished games are discarded and the run goes on",
            i,
            type(error).__name__,
            self.deaths[i],
            self.cfg.max_restarts,
        )
        for _ in range(CALLS_PER_WORKER - 1):
            self._submit(i)

    def _where(self) -> list[dict[str, Any]]:
        import ray

        return list(ray.get([w.where.remote() for w in self.workers], timeout=self.timeout_s))


def worker_nodes(placement: list[dict[str, Any]]) -> dict[str, int]:
    """How many workers each node holds."""
    counts: dict[str, int] = {}
    for w in placement:
        counts[w["node_id"]] = counts.get(w["node_id"], 0) + 1
    return counts


if TYPE_CHECKING:
    _source: type[SelfPlaySource] = RayAsyncRunner
