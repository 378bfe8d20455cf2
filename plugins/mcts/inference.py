"""The run's network on Ray: inference actors holding versioned weights, and the client that calls them.

Every model (the network self-play uses, a candidate under gating) has a version that goes up with
each `publish`. The weights keeper (keeper.py) holds, per model, the current version and its
weights in Ray's object store, as the run's process last published them; every batch carries the
oldest version its search may use (`min_version`) and every answer the version it used. An actor
behind that version (a restarted one: Ray builds it anew, with no weights) fetches the current
weights from the keeper before it answers, so no batch is ever answered with weights older than
the version current when its search began. Nothing here imports Ray at import time.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from framework_plugins.ray_runtime import runtime as ray_runtime
from framework_plugins.ray_runtime.restarts import actor_errors, incarnation_here

from .keeper import start_keeper

log = logging.getLogger("framework")


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory (blocks up to 32 MiB from its heap, no trimming);
    False where it is not glibc or refuses.

    A CPU forward's activations are MiBs: by default glibc maps them for the call and gives them
    back after it, and the next call page-faults them in again, thousands of faults a call at
    batch 128 (measured with `benchmarks/mcts_batching.py`). A process that does nothing but
    forwards (an inference actor) loses nothing by keeping them.
    """
    import ctypes
    import ctypes.util
    import sys

    name = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or name is None:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt"):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 1 << 30))


class Answer(NamedTuple):
    """An evaluated batch: policy logits [B, A], values [B], the weights' version, seconds taken,
    and draw probabilities [B] where the network has them."""

    logits: np.ndarray
    values: np.ndarray
    version: int
    seconds: float
    draws: np.ndarray | None = None


def evaluated(answer: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """An evaluator's answer as (logits, values, draws): draws None where it gives two arrays."""
    if len(answer) == 2:
        return answer[0], answer[1], None
    logits, values, draws = answer
    return logits, values, draws


class StaleWeights(RuntimeError):
    """An actor could not get weights as new as a batch asked for (the keeper did not give them in time)."""


class InferenceActor:
    """A Ray actor holding one evaluator per model: `infer` a batch, `load_weights` to keep in step.

    Built either from a portable evaluator's builder (its weights come from the keeper and by
    `load_weights`), or (an evaluator that is not portable) from the evaluator factory itself,
    called here; such an evaluator's weights never change (version 0).
    """

    def __init__(
        self,
        builder: Callable[..., Any],
        *,
        portable: bool,
        threads: int,
        use_gpu: bool,
        keeper: str,
        timeout_s: float,
    ) -> None:
        import torch

        torch.set_num_threads(max(1, threads))
        self.device = "cuda" if use_gpu and torch.cuda.is_available() else "cpu"
        self.kept_memory = self.device == "cpu" and keep_freed_memory()
        self.builder, self.portable, self.keeper_name = builder, portable, keeper
        self.timeout_s = timeout_s
        self.evaluators: dict[str, Any] = {}
        self.versions: dict[str, int] = {}
        self.batches = 0
        self.positions = 0
        self.incarnation = incarnation_here()
        if portable:  # a restarted actor starts from the current weights, before it answers anything
            self._refresh()

    def infer(self, model: str, planes: np.ndarray, min_version: int) -> Answer:
        """The evaluation of a batch, with weights of `min_version` or newer."""
        started = time.perf_counter()
        evaluator = self._evaluator(model)
        if self.versions[model] < min_version:
            self._refresh()
            if self.versions.get(model, -1) < min_version:
                raise StaleWeights(
                    f"model {model!r} is at version {self.versions.get(model)} here, and a batch asked "
                    f"for version {min_version} or newer, which its weights keeper does not hold"
                )
        # A copy as float32 (planes come compacted, and arrays from Ray's object store are read-only).
        logits, values, draws = evaluated(evaluator(np.array(planes, dtype=np.float32)))
        self.batches += 1
        self.positions += len(planes)
        return Answer(
            np.asarray(logits),
            np.asarray(values),
            self.versions[model],
            time.perf_counter() - started,
            None if draws is None else np.asarray(draws),
        )

    def load_weights(self, model: str, version: int, weights: Mapping[str, np.ndarray]) -> int:
        if version > self.versions.get(model, -1):
            self._evaluator(model).load_weights(weights)
            self.versions[model] = version
        return self.versions[model]

    def where(self) -> dict[str, Any]:
        """The process, node and device this actor runs on, its weights' versions and what it served."""
        import os

        import ray

        return {
            "pid": os.getpid(),
            "incarnation": self.incarnation,
            "node_id": ray.get_runtime_context().get_node_id(),
            "device": self.device,
            "kept_memory": self.kept_memory,
            "versions": dict(self.versions),
            "batches": self.batches,
            "positions": self.positions,
        }

    def _evaluator(self, model: str) -> Any:
        evaluator = self.evaluators.get(model)
        if evaluator is None:
            evaluator = self.evaluators[model] = (
                self.builder(self.device) if self.portable else self.builder()
            )
            # A portable evaluator's own first weights are nobody's: version -1 until it gets some.
            self.versions.setdefault(model, -1 if self.portable else 0)
        return evaluator

    def _refresh(self) -> None:
        """Load the keeper's current weights where they are newer. A keeper that Ray is restarting
        answers once the run's process has seeded it again: this actor waits for that."""
        import ray
        from ray import exceptions

        if not self.portable:
            return
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                ref: Any = ray.get_actor(self.keeper_name).current.remote()
                current: dict[str, tuple[int, list[Any]]] = ray.get(ref, timeout=_left(deadline))
                for model, (version, holder) in current.items():
                    if version > self.versions.get(model, -1):
                        self.load_weights(model, version, ray.get(holder[0], timeout=_left(deadline)))
                return
            except exceptions.ActorUnavailableError:  # it died as it answered: ask its next incarnation
                time.sleep(0.05)
            except exceptions.GetTimeoutError:
                raise StaleWeights(
                    f"the weights keeper {self.keeper_name} gave no weights in {self.timeout_s:.0f} s "
                    "(search.inference_timeout_s)"
                ) from None


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def compact(planes: np.ndarray) -> np.ndarray:
    """The planes as uint8 when that loses nothing (a board game's planes are 0s and 1s), else as
    they are: a quarter of the bytes keeps a batch of 128 9x9 positions under Ray's 100 KB limit
    for arguments sent inline, where float32 goes through the object store, which costs both
    processes ~3 ms a call here (`benchmarks/mcts_batching.py`); the actor converts them back."""
    small = planes.astype(np.uint8)
    return small if np.array_equal(small, planes) else planes


class RayInferenceClient:
    """Calls the inference actors (in turn, a batch each); found by their Ray names, so that any
    process of the cluster (a self-play worker) can build one."""

    def __init__(
        self, names: list[str], keeper: str, *, timeout_s: float, handles: dict[str, Any] | None = None
    ) -> None:
        import ray

        if not names:
            raise ValueError("RayInferenceClient needs at least one inference actor")
        #: The actors' Ray names: what a restartable actor (a self-play worker) gets to find them,
        #: since Ray may not keep actor handles among its arguments (ray-project/ray#53727). The
        #: process that made them has their handles (a name is registered a moment later).
        self.names, self.keeper_name = list(names), keeper
        found = handles or {}
        self.actors = [found[n] if n in found else ray.get_actor(n) for n in names]
        self.keeper = found[keeper] if keeper in found else ray.get_actor(keeper)
        self.timeout_s = timeout_s
        self._next = 0
        self.turns = list(range(len(self.actors)))
        """The actors batches go to, in turn: every one, or those of this process's node."""

    def prefer_local(self) -> None:
        """Send batches only to the actors on this process's node, where it has any: a worker of a
        cluster feeds its own node's GPU, and the nodes' rates add up instead of crossing the network.
        An actor that does not answer now leaves every actor in the turn."""
        import ray

        if len(self.actors) < 2:
            return
        from ray.exceptions import GetTimeoutError

        here = ray.get_runtime_context().get_node_id()
        unanswered: tuple[type[BaseException], ...] = (*actor_errors(), GetTimeoutError)
        try:
            nodes = [w["node_id"] for w in self.where()]
        except unanswered as e:
            log.debug("inference actors: where they run is not known (%s): batches go to all", e)
            return
        local = [i for i, node in enumerate(nodes) if node == here]
        if local:
            self.turns = local

    def infer_async(self, model: str, planes: np.ndarray, min_version: int) -> tuple[Any, int]:
        """Send a batch to the next actor of the turn; (its ObjectRef of an Answer, the actor's index)."""
        i = self.turns[self._next % len(self.turns)]
        self._next += 1
        return self.actors[i].infer.remote(model, compact(planes), min_version), i

    def current_versions(self) -> dict[str, int]:
        """Each model's current version, as the keeper holds it (a restarted keeper answers once
        the run's process has seeded it again)."""
        import ray
        from ray import exceptions

        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return dict(ray.get(self.keeper.versions.remote(), timeout=_left(deadline)))
            except exceptions.ActorUnavailableError:  # it died as it answered: ask its next incarnation
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def where(self, i: int | None = None, timeout_s: float | None = None) -> Any:
        """Where actor i runs (every actor's, with i None)."""
        import ray

        actors = self.actors if i is None else [self.actors[i]]
        found: list[dict[str, Any]] = ray.get(
            [a.where.remote() for a in actors], timeout=timeout_s or self.timeout_s
        )
        return found if i is None else found[0]


def start_inference_actors(
    builder: Callable[..., Any],
    *,
    portable: bool,
    count: int,
    num_cpus: float,
    num_gpus: float | None,
    max_restarts: int,
    timeout_s: float,
) -> tuple[list[str], str, dict[str, Any]]:
    """`count` inference actors and their weights keeper, by Ray names unique to this call:
    (actor names, keeper name, handles by name). On a GPU when the cluster has one (num_gpus null)."""
    import ray

    if num_gpus is None:
        num_gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    ray_runtime.check_fits(
        "an inference actor",
        num_cpus,
        num_gpus,
        f"search.inference_num_cpus={num_cpus:g} search.inference_num_gpus={num_gpus:g}",
    )
    prefix = f"framework-inference-{uuid.uuid4().hex[:12]}"
    keeper = f"{prefix}-weights"
    handles: dict[str, Any] = {keeper: start_keeper(keeper)}
    remote = ray.remote(InferenceActor)
    names = []
    for i in range(count):
        name = f"{prefix}-{i}"
        # No weights in the constructor: Ray does not keep a restartable actor's large arguments,
        # so they come from the keeper, at the start and after every restart.
        handles[name] = remote.options(
            name=name,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts,
            max_task_retries=0,
            max_concurrency=1,
            # One on each node before two on one: a node's workers send their batches to its own.
            scheduling_strategy="SPREAD",
        ).remote(
            builder,
            portable=portable,
            threads=max(1, int(num_cpus)),
            use_gpu=num_gpus > 0,
            keeper=keeper,
            timeout_s=timeout_s,
        )
        names.append(name)
    return names, keeper, handles
