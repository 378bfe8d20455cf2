"""`search=ray_async`: the pipelined, batched PUCT search, its network on Ray actors.

Trees, rules and reuse are `search=sequential`'s (the same arrays and kernels); what differs is
how leaves reach the network. Each search selects many leaves per tree (leaf parallelism), each
waiting leaf holding a pending visit on its path with a virtual loss so that the next selections
spread; a `BatchInferenceManager` sends them to the inference actors in batches of `batch_size`
(or after `max_wait_ms`), several batches in flight, and while the actor runs one the engine
selects, expands and backs up the others. With `batch_size=1, async_inflight_limit=1` a search is
the sequential one, visit for visit.

Invariants (tests/mcts/test_ray_async.py): a root's visits plus its pending visits never pass
the target; pending visits never go below zero, and are all taken back when a search ends,
also by an exception (the ObjectRefs still in flight are cancelled); noise only at start nodes;
a batch whose answer has another size fails the search.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from framework import ray_runtime
from framework.contracts import PortableEvaluator
from framework.errors import ConfigError, check_at_least

from . import tree as kernels
from .config import RayAsyncConfig
from .inference import BatchInferenceManager, RayInferenceClient, actor_errors, start_inference_actors
from .sequential import SequentialEngine, search_params
from .tree import Forest, entry_point

if TYPE_CHECKING:
    from framework.contracts import (
        BoardGame,
        BoardState,
        DistributedSearch,
        Evaluator,
        MeasuredSearch,
        SearchEngine,
        SelfPlaySource,
    )

log = logging.getLogger("framework")

#: How long the engine waits for a batch when it can select nothing more (it wakes at the first).
IDLE_WAIT_S = 0.05


class RayAsyncEngine(SequentialEngine):
    """PUCT with virtual loss; leaves evaluated in batches by Ray inference actors, pipelined."""

    Config: ClassVar[type] = RayAsyncConfig

    def __init__(
        self,
        cfg: RayAsyncConfig,
        *,
        game: BoardGame,
        evaluator_factory: Callable[[], Evaluator],
        seed: int,
        client: RayInferenceClient | None = None,
    ) -> None:
        _validate(cfg)
        super().__init__(cfg, game=game, evaluator_factory=evaluator_factory, seed=seed)
        self.cfg: RayAsyncConfig = cfg
        self._params = search_params(cfg, virtual_loss=cfg.virtual_loss)
        self._client = client
        self._owns_client = client is None
        self._manager: BatchInferenceManager | None = None
        self._local: PortableEvaluator | None = None
        """The evaluator in this process whose weights the actors copy (None: nothing to copy)."""
        self._pushed: int | None = None
        self._leaves: Any = None
        self._kernels_async: dict[str, Callable[..., Any]] = {}
        self._search_s = 0.0
        self._sims_mark = 0
        self.clamped = 0
        """Pending visits that were already 0 when taken back (a bookkeeping error; stays 0)."""
        self.actor_failures = 0
        self.debug_hook: Callable[[RayAsyncEngine, Forest], None] | None = None
        """Called at every turn of the pipeline (tests check the invariants with it)."""

    # -- the contract ----------------------------------------------------------------------------

    def search(self, roots: Sequence[BoardState], *, add_noise: bool = False) -> np.ndarray:
        started = time.perf_counter()
        try:
            if roots:
                self._connect()
                self.sync_weights()
            return super().search(roots, add_noise=add_noise)
        finally:
            self._search_s += time.perf_counter() - started

    def close(self) -> None:
        """Release the trees, and the inference actors this engine started."""
        if self._manager is not None:
            self._manager.cleanup()
            self._manager = None
        if self._owns_client and self._client is not None:
            try:
                self._client.kill()
            except Exception as e:  # Ray already shut down: its actors went with it
                log.debug("inference actors: %s", e)
            self._client = None
        self._local = None
        super().close()

    def perf_metrics(self) -> dict[str, float]:
        """perf/batch_fill, queue_wait_ms, inflight_mean, inference_ms, roundtrip_ms and
        search_sims_per_s since the last call."""
        sims, self._sims_mark = self.simulations - self._sims_mark, self.simulations
        seconds, self._search_s = self._search_s, 0.0
        if self._manager is None:
            return {}
        return inference_metrics(self._manager.take_stats(), self.cfg.batch_size, sims, seconds)

    def self_play(
        self, make_runner: Callable[[SearchEngine, int], SelfPlaySource], *, seed: int
    ) -> SelfPlaySource | None:
        """Self-play in `search.workers` Ray actors sharing this engine's inference actors (None
        with workers=0: the run's process plays)."""
        if self.cfg.workers < 1:
            return None
        from .distributed import RayAsyncRunner

        self._connect()
        self.sync_weights()
        assert self._client is not None
        return RayAsyncRunner(self, self._client, make_runner, seed=seed)

    # -- Ray -------------------------------------------------------------------------------------

    def _connect(self) -> BatchInferenceManager:
        cfg = self.cfg
        if self._client is None:
            # The self-play workers, and inference actors for this engine and the two of a gate.
            ray = ray_runtime.ensure(
                min_cpus=cfg.workers * cfg.worker_num_cpus + 3 * cfg.inference_actors * cfg.inference_num_cpus
            )
            local = self.evaluator_factory()
            builder: Callable[..., Any]
            if isinstance(local, PortableEvaluator):
                self._local = local
                builder, portable = local.portable(), True
            else:  # not portable: the factory itself goes to the actor (its weights never change)
                builder, portable = self.evaluator_factory, False
            actors = start_inference_actors(
                builder,
                portable=portable,
                count=cfg.inference_actors,
                num_cpus=cfg.inference_num_cpus,
                num_gpus=cfg.inference_num_gpus,
                max_restarts=cfg.max_restarts,
            )
            self._client = RayInferenceClient(actors, timeout_s=cfg.inference_timeout_s)
            try:
                self._client.wait_alive(cfg.inference_timeout_s)
            except TimeoutError:
                self._client.kill()
                self._client = None
                raise RuntimeError(
                    f"Ray could not start {cfg.inference_actors} inference actor(s) of "
                    f"search.inference_num_cpus={cfg.inference_num_cpus:g} CPUs and "
                    f"search.inference_num_gpus={cfg.inference_num_gpus} in {cfg.inference_timeout_s:g} s; "
                    "the cluster has "
                    f"{_resources(ray.available_resources())} free of {_resources(ray.cluster_resources())} "
                    "(fewer CPUs per actor, or more in the cluster: ray.num_cpus for a local Ray)"
                ) from None
            self._pushed = None
            self.sync_weights()
        if self._manager is None:
            self._manager = BatchInferenceManager(
                self._client,
                batch_size=cfg.batch_size,
                max_wait_ms=cfg.max_wait_ms,
                max_inflight_batches=cfg.max_inflight_batches,
                timeout_s=cfg.inference_timeout_s,
                # Every batch in flight fails with its actor: a restart may cost that many resends.
                max_resends=(cfg.max_restarts + 1) * cfg.max_inflight_batches,
                on_actor_failure=self._actor_failed,
            )
        return self._manager

    def sync_weights(self, *, force: bool = False) -> bool:
        """Send the local evaluator's weights to the actors if they changed; True if sent."""
        if self._local is None or self._client is None:
            return False
        version = self._local.weights_version()
        if version == self._pushed and not force:
            return False
        self._client.load_weights(self._local.weights(), version)
        self._pushed = version
        return True

    def _actor_failed(self, error: BaseException) -> None:
        self.actor_failures += 1
        log.warning(
            "an inference actor failed (%s); Ray restarts it (search.max_restarts=%d) and its batch "
            "is sent again",
            f"{type(error).__name__}: {str(error).splitlines()[0][:160]}",
            self.cfg.max_restarts,
        )
        assert self._client is not None
        try:
            self._client.wait_alive(self.cfg.inference_timeout_s)
            self.sync_weights(force=True)  # a restarted actor has its first weights
        except actor_errors() as e:
            raise RuntimeError(
                "the inference actor died and Ray cannot restart it (search.max_restarts="
                f"{self.cfg.max_restarts} spent): {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            ) from e

    # -- the pipelined search --------------------------------------------------------------------

    def _evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One blocking round trip through the manager (the roots' expansion)."""
        manager = self._connect()
        n = len(planes)
        manager.enqueue(np.arange(n, dtype=np.int64), planes.copy())
        logits = np.empty((n, self.game.n_actions), dtype=np.float32)
        values = np.empty(n, dtype=np.float32)
        got = 0
        try:
            while got < n:
                manager.dispatch_ready(force=True)
                for mapping, batch_logits, batch_values in manager.drain_ready(IDLE_WAIT_S):
                    _check_sizes(mapping, batch_logits, batch_values, self.game.n_actions)
                    logits[mapping], values[mapping] = batch_logits, batch_values
                    got += len(mapping)
        except BaseException:
            manager.cleanup()
            raise
        return logits, values

    def _simulate(self, forest: Forest, active: np.ndarray) -> None:
        cfg, game = self.cfg, self.game
        manager = self._connect()
        max_pending = (cfg.async_inflight_limit or int(active.sum())) * cfg.batch_size
        leaves = self._leaf_slots(max_pending, forest.n_trees)
        leaves.reset()
        select_args = (
            active,
            self.num_simulations,
            0,
            *self._tree_args(forest),
            leaves.free,
            leaves.n_free,
            leaves.tree,
            leaves.board,
            leaves.path,
            leaves.depth,
            leaves.planes,
            leaves.out,
            leaves.blocked,
        )
        select = self._compiled("select", kernels.select_async, select_args)
        finish: Callable[..., int] | None = None
        try:
            while True:
                budget = max_pending - manager.pending_count()
                k, backed, unfinished = select(*select_args[:2], budget, *select_args[3:])
                self.simulations += backed
                if k:
                    manager.enqueue(leaves.out[:k].copy(), leaves.planes[:k].copy())
                if not unfinished:
                    break
                manager.dispatch_ready()
                if self.debug_hook is not None:
                    self.debug_hook(self, forest)
                results = manager.drain_ready(IDLE_WAIT_S)
                for j, (mapping, logits, values) in enumerate(results):
                    try:
                        _check_sizes(mapping, logits, values, game.n_actions)
                    except RuntimeError:
                        unfinished_slots = np.concatenate([m for m, _, _ in results[j:]])
                        self.clamped += kernels.release_leaves(
                            unfinished_slots, leaves.tree, leaves.path, leaves.depth, forest.node_i
                        )
                        raise
                    finish_args = (
                        mapping,
                        np.ascontiguousarray(logits, dtype=np.float32),
                        np.ascontiguousarray(values, dtype=np.float32),
                        leaves.tree,
                        leaves.board,
                        leaves.path,
                        leaves.depth,
                        forest.node_i,
                        forest.value_sum,
                        forest.children,
                        forest.prior,
                    )
                    if finish is None:
                        finish = self._compiled("finish", kernels.finish_leaves, finish_args)
                    self.clamped += finish(*finish_args)
                    leaves.give_back(mapping)
                    self.simulations += len(mapping)
            if manager.pending_count():
                raise RuntimeError(f"search ended with {manager.pending_count()} leaves still pending")
        except BaseException:
            self._abandon(manager, leaves, forest)
            raise

    def _abandon(self, manager: BatchInferenceManager, leaves: _LeafSlots, forest: Forest) -> None:
        """Take back every waiting leaf's pending visits, and cancel what is in flight."""
        waiting = manager.pending_mappings()
        if waiting:
            slots = np.concatenate(waiting).astype(np.int64)
            self.clamped += kernels.release_leaves(
                slots, leaves.tree, leaves.path, leaves.depth, forest.node_i
            )
        manager.cleanup()

    def _leaf_slots(self, n: int, n_trees: int) -> _LeafSlots:
        slots = self._leaves
        if slots is None or slots.capacity < n or slots.blocked.size < n_trees:
            game = self.game
            slots = _LeafSlots(max(n, 1), max(n_trees, 1), game.n_actions, (game.n_planes, *game.board_shape))
            self._leaves = slots
        return slots

    def _compiled(self, name: str, dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
        compiled = self._kernels_async.get(name)
        if compiled is None:
            compiled = self._kernels_async[name] = entry_point(dispatcher, *args)
        return compiled


class _LeafSlots:
    """Room for `capacity` leaves waiting for their evaluation: tree, position, path, depth."""

    def __init__(self, capacity: int, n_trees: int, n_actions: int, plane_shape: tuple[int, ...]) -> None:
        self.capacity = capacity
        self.tree = np.zeros(capacity, dtype=np.int64)
        self.board = np.zeros((capacity, n_actions), dtype=np.int8)
        self.path = np.zeros((capacity, n_actions + 2), dtype=np.int64)
        self.depth = np.zeros(capacity, dtype=np.int64)
        self.planes = np.zeros((capacity, *plane_shape), dtype=np.float32)
        self.out = np.zeros(capacity, dtype=np.int64)
        self.free = np.arange(capacity, dtype=np.int64)
        self.n_free = np.array([capacity], dtype=np.int64)
        self.blocked = np.zeros(n_trees, dtype=np.bool_)

    def reset(self) -> None:
        self.free[:] = np.arange(self.capacity)
        self.n_free[0] = self.capacity

    def give_back(self, slots: np.ndarray) -> None:
        n = int(self.n_free[0])
        self.free[n : n + len(slots)] = slots
        self.n_free[0] = n + len(slots)


def _resources(resources: dict[str, float]) -> str:
    return f"{resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs"


def _check_sizes(mapping: np.ndarray, logits: np.ndarray, values: np.ndarray, n_actions: int) -> None:
    if len(logits) != len(mapping) or len(values) != len(mapping):
        raise RuntimeError(
            f"the inference actor returned {len(logits)} policies and {len(values)} values for a batch "
            f"of {len(mapping)} positions"
        )
    if logits.ndim != 2 or logits.shape[1] != n_actions:
        raise RuntimeError(
            f"the inference actor returned policies of shape {tuple(logits.shape)}; this game's are "
            f"[batch, {n_actions}] (flat action indices)"
        )


def inference_metrics(stats: Any, batch_size: int, sims: int, seconds: float) -> dict[str, float]:
    """The tuning figures of a manager's stats (and of the simulations run in `seconds` of search)."""
    metrics: dict[str, float] = {}
    if sims and seconds > 0:
        metrics["perf/search_sims_per_s"] = sims / seconds
    if stats.batches:
        metrics.update(
            {
                "perf/batch_fill": stats.positions / stats.batches / batch_size,
                "perf/queue_wait_ms": 1000.0 * stats.queue_wait_s / stats.batches,
                "perf/inference_ms": 1000.0 * stats.inference_s / stats.batches,
                "perf/roundtrip_ms": 1000.0 * stats.roundtrip_s / stats.batches,
            }
        )
    if stats.inflight_samples:
        metrics["perf/inflight_mean"] = stats.inflight_sum / stats.inflight_samples
    if stats.failures:
        metrics["perf/inference_failures"] = float(len(stats.failures))
    return metrics


def _validate(cfg: RayAsyncConfig) -> None:
    check_at_least("search", cfg, 1, "batch_size", "max_inflight_batches", "inference_actors")
    if cfg.async_inflight_limit is not None and cfg.async_inflight_limit < 1:
        raise ConfigError(
            f"search.async_inflight_limit={cfg.async_inflight_limit} must be >= 1, "
            "or null (one batch per root)"
        )
    check_at_least("search", cfg, 0, "max_wait_ms", "virtual_loss", "workers", "max_restarts")
    if cfg.inference_num_cpus <= 0 or cfg.worker_num_cpus <= 0:
        raise ConfigError("search.inference_num_cpus and search.worker_num_cpus must be > 0")
    if cfg.inference_num_gpus is not None and cfg.inference_num_gpus < 0:
        raise ConfigError(f"search.inference_num_gpus={cfg.inference_num_gpus} must be >= 0, or null (auto)")
    if cfg.inference_timeout_s <= 0:
        raise ConfigError(f"search.inference_timeout_s={cfg.inference_timeout_s} must be > 0")


if TYPE_CHECKING:
    _search_contract: type[SearchEngine] = RayAsyncEngine
    _measured: type[MeasuredSearch] = RayAsyncEngine
    _distributed: type[DistributedSearch] = RayAsyncEngine
