"""The run's inference service: one per run, started by the run, shared by every search of it.

Self-play, gating, evaluation, `play` and `gomocup` all search over it. It holds the network under
model names ("best": the one self-play and evaluation use; "candidate": one under gating), each
with a version that `publish` raises. `LocalInference` runs the network in the run's own process
(search=sequential); `RayInference` on Ray inference actors (search=ray_async), which every
process of the cluster reaches by name (`RayInference.join`, in a self-play worker).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from framework.errors import ExplainedError
from framework_plugins.boardgames import BEST, PortableEvaluator
from framework_plugins.ray_runtime.restarts import Incarnations, said, settle

from .batching import BatchInferenceManager
from .evaluation import InProcess, Pipelined
from .inference import RayInferenceClient, start_inference_actors
from .keeper import Entry, KeeperGuard

if TYPE_CHECKING:
    from framework_plugins.boardgames import Evaluator

    from .config import RayAsyncConfig

log = logging.getLogger("framework")


class LocalInference:
    """The network in this process: an evaluator per model, built from the source's portable form
    (a copy, whose weights only `publish` changes), or the source itself where it is not portable."""

    def __init__(
        self,
        source: Callable[[], Evaluator],
        *,
        device: str = "cpu",
        backend: str | None = None,
        threads: int = 1,
    ) -> None:
        first = source()
        self._source, self.device, self.backend, self.threads = source, device, backend, threads
        self._portable = first if isinstance(first, PortableEvaluator) else None
        self._evaluators: dict[str, Evaluator] = {}
        if self._portable is None:  # an evaluator made by the source is used as it is, made once
            self._evaluators[BEST] = first
        self._versions: dict[str, int] = {}

    def publish(self, model: str, weights: Mapping[str, np.ndarray]) -> int:
        """New weights for `model`; its new version."""
        evaluator = self._evaluator(model)
        if not isinstance(evaluator, PortableEvaluator):
            raise TypeError(f"model {model!r}: its evaluator takes no weights (it is not portable)")
        evaluator.load_weights(weights)
        self._versions[model] = self._versions.get(model, 0) + 1
        return self._versions[model]

    def version(self, model: str) -> int:
        return self._versions.get(model, 0)

    def evaluation(self, model: str) -> InProcess:
        return InProcess(
            self._evaluator(model), lambda: self.version(model), threads=self.threads, device=self.device
        )

    def close(self) -> None:
        self._evaluators.clear()

    def _evaluator(self, model: str) -> Evaluator:
        evaluator = self._evaluators.get(model)
        if evaluator is None:
            if self._portable is None:
                evaluator = self._source()
            else:  # a copy, starting from the source's weights of now
                evaluator = self._portable.portable(self.backend)(self.device)
                evaluator.load_weights(self._portable.weights())
            self._evaluators[model] = evaluator
        return evaluator


@dataclass(frozen=True)
class RayServiceAddress:
    """What a process of the cluster needs to join a RayInference: the actors' and keeper's names."""

    actors: tuple[str, ...]
    keeper: str


class RayInference:
    """The network on Ray inference actors: started once (`start`), joined anywhere (`join`).

    The process that starts it (the run's) holds the authoritative weights: each model's version and
    the ObjectRef of its weights, which it owns, so that they outlive any actor. It hands them to the
    weights keeper, seeds a restarted keeper again (`KeeperGuard`), and is the one that says and
    counts the deaths of the inference actors and of the keeper; a joined service only waits for
    restarts.
    """

    def __init__(
        self,
        cfg: RayAsyncConfig,
        address: RayServiceAddress,
        *,
        owner: bool,
        handles: dict[str, Any] | None = None,
    ) -> None:
        self.cfg, self.address, self.owner = cfg, address, owner
        self.client = RayInferenceClient(
            list(address.actors), address.keeper, timeout_s=cfg.inference_timeout_s, handles=handles
        )
        self.actors = Incarnations(
            "inference actor",
            list(address.actors),
            max_restarts=cfg.max_restarts,
            timeout_s=cfg.inference_timeout_s,
            loud=owner,
        )
        self._versions: dict[str, int] = {}
        self._published: dict[str, Entry] = {}
        """Each model's current entry, (version, [ObjectRef of its weights]): what seeds the keeper."""
        self._lock = threading.Lock()
        self.guard: KeeperGuard | None = None
        """The owner's: keeps the weights keeper seeded, and counts its deaths."""
        self._unsettled: list[Any] = []
        """Weight pushes not ended when `publish` returned, retrieved later."""

    @classmethod
    def start(
        cls,
        cfg: RayAsyncConfig,
        source: Callable[[], Evaluator],
        *,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> RayInference:
        """Start the actors; a portable source's weights become the first version of BEST."""
        first = source()
        builder: Callable[..., Any]
        if isinstance(first, PortableEvaluator):
            builder, portable = first.portable(cfg.inference.backend), True
        else:  # not portable: the factory itself goes to the actor (its weights never change)
            builder, portable = source, False
        names, keeper, handles = start_inference_actors(
            builder,
            portable=portable,
            count=cfg.inference_actors,
            num_cpus=cfg.inference_num_cpus,
            num_gpus=cfg.inference_num_gpus,
            max_restarts=cfg.max_restarts,
            timeout_s=cfg.inference_timeout_s,
        )
        service = cls(cfg, RayServiceAddress(tuple(names), keeper), owner=True, handles=handles)
        service.actors.should_stop = should_stop
        try:
            # The actors, starting now, wait for the keeper to be seeded (empty here) before they answer.
            service.guard = KeeperGuard(
                service.client.keeper, keeper, service.published, timeout_s=cfg.inference_timeout_s
            )
            service.guard.incarnations.should_stop = should_stop
            service.guard.start()
            service.wait_started()
            if isinstance(first, PortableEvaluator):
                service.publish(BEST, first.weights())
        except BaseException:
            service.close()
            raise
        return service

    @classmethod
    def join(cls, cfg: RayAsyncConfig, address: RayServiceAddress) -> RayInference:
        """The service another process started (a self-play worker's view of it), its batches sent
        to the inference actors of this process's node where there are any."""
        service = cls(cfg, address, owner=False)
        service.client.prefer_local()
        return service

    def publish(self, model: str, weights: Mapping[str, np.ndarray]) -> int:
        """New weights for `model`: in the object store (held here), with the keeper, then pushed to
        every actor. Once it returns, no search that begins answers with an older version: a worker
        begins at the keeper's version, and an actor behind a batch's version loads the keeper's."""
        import ray

        if not self.owner:
            raise RuntimeError("only the process that started the inference service publishes weights")
        version = self._versions.get(model, 0) + 1
        ref = ray.put({k: np.asarray(v) for k, v in weights.items()})
        with self._lock:  # the guard may be seeding a restarted keeper from the table right now
            self._published[model] = (version, [ref])
            self._versions[model] = version
        self._hand_to_keeper(model, version, [ref])
        pushed = [a.load_weights.remote(model, version, ref) for a in self.client.actors]
        # An actor that dies now loads the version from the keeper as it starts again; its push failed.
        self._unsettled = settle(self._unsettled + pushed, timeout_s=self.cfg.inference_timeout_s)
        return version

    def published(self) -> dict[str, Entry]:
        """Each model's current entry, as this process last published it (what seeds the keeper)."""
        with self._lock:
            return dict(self._published)

    def version(self, model: str) -> int:
        """The model's current version: this process's own count where it publishes, else the keeper's."""
        if self.owner:
            return self._versions.get(model, 0)
        return self.client.current_versions().get(model, 0)

    def evaluation(self, model: str) -> Pipelined:
        cfg = self.cfg
        manager = BatchInferenceManager(
            self.client,
            model=model,
            batch_size=cfg.batch_size,
            max_wait_ms=cfg.max_wait_ms,
            max_inflight_batches=cfg.max_inflight_batches,
            timeout_s=cfg.inference_timeout_s,
            # Every batch in flight fails with its actor: a restart may cost that many resends.
            max_resends=(cfg.max_restarts + 1) * cfg.max_inflight_batches * max(cfg.inference_actors, 1),
            on_actor_failure=self._actor_failed,
        )
        return Pipelined(
            manager,
            virtual_loss=cfg.virtual_loss,
            async_inflight_limit=cfg.async_inflight_limit,
            version=lambda: self.version(model),
        )

    def wait_started(self) -> None:
        """Return once every actor answers (Ray places and builds them: seconds)."""
        self.check_actors()

    def check_actors(self) -> int:
        """Ask every actor, and the keeper, where it runs, counting restarts not seen yet (a restarted
        keeper seeded again); the inference actors' total restarts."""
        for i in range(len(self.client.actors)):
            self.actors.wait_alive(i, functools.partial(self.client.where, i))
        if self.guard is not None:
            self.guard.check()
        return self.actors.total_deaths

    @property
    def keeper_deaths(self) -> int:
        """The weights keeper's deaths seen by the process that started it (0 elsewhere)."""
        return self.guard.deaths if self.guard is not None else 0

    def perf_metrics(self) -> dict[str, float]:
        """The restarts of its actors and of its weights keeper, counted so far (every actor asked)."""
        return {
            "perf/inference_restarts": float(self.check_actors()),
            "perf/weights_keeper_restarts": float(self.keeper_deaths),
        }

    def close(self) -> None:
        """Stop the actors and the keeper (the process that started them only)."""
        import ray

        if not self.owner:
            return
        if self.guard is not None:
            self.guard.close()
        for actor in [*self.client.actors, self.client.keeper]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as e:  # Ray already shut down: its actors went with it
                log.debug("inference actors: %s", e)
        self.client.actors = []
        if ray.is_initialized():
            if self.guard is not None:
                self.guard.settle()
            self._unsettled = settle(self._unsettled, timeout_s=1.0)

    def _actor_failed(self, i: int, error: BaseException) -> None:
        # Said once, as a death, by the process that started the actors (`Incarnations.note`).
        log.debug(
            "inference actor %s failed a batch (%s); sent again once it is back",
            self.address.actors[i],
            said(error),
        )
        self.actors.wait_alive(i, functools.partial(self.client.where, i), error)

    def _hand_to_keeper(self, model: str, version: int, holder: list[Any]) -> None:
        """`set` on the keeper until it holds the version (a keeper Ray is restarting takes it once up)."""
        import ray
        from ray import exceptions

        deadline = time.monotonic() + self.cfg.inference_timeout_s
        while True:
            try:
                ray.get(
                    self.client.keeper.set.remote(model, version, holder),
                    timeout=max(0.0, deadline - time.monotonic()),
                )
                return
            except exceptions.ActorUnavailableError:  # it died as it took it: its next incarnation
                time.sleep(0.05)
            except exceptions.GetTimeoutError:
                raise ExplainedError(
                    f"the weights keeper {self.address.keeper} took no weights for "
                    f"{self.cfg.inference_timeout_s:.0f} s (search.inference_timeout_s)"
                ) from None


if TYPE_CHECKING:
    from framework_plugins.boardgames import InferenceService, SharedInference

    _local: type[InferenceService] = LocalInference
    _shared: type[SharedInference] = RayInference
