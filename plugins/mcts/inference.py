"""Batched inference on Ray: the actor that runs the network, the client that calls it, and the
manager that gathers leaves into batches and keeps several in flight.

The data flow of `search=ray_async`: the engine selects leaves → `BatchInferenceManager.enqueue`
→ a batch is sent (`RayInferenceClient.infer_async`, an ObjectRef back) when `batch_size` leaves
wait or the oldest has waited `max_wait_ms` → `InferenceActor.infer` on a CPU or GPU → the
manager collects finished batches (`drain_ready`) → the engine expands and backs them up.
Nothing here imports Ray at import time.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework import ray_runtime

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


class InferenceActor:
    """A Ray actor holding one copy of the evaluator: `infer` a batch, `load_weights` to keep in step.

    Built either from a portable evaluator's builder (its weights come by `load_weights`), or
    (an evaluator that is not portable) from the evaluator factory itself, called here.
    """

    def __init__(self, builder: Callable[..., Any], *, portable: bool, threads: int, use_gpu: bool) -> None:
        import torch

        torch.set_num_threads(max(1, threads))
        self.device = "cuda" if use_gpu and torch.cuda.is_available() else "cpu"
        self.kept_memory = self.device == "cpu" and keep_freed_memory()
        self.evaluator = builder(self.device) if portable else builder()
        self.version: int | None = None
        self.batches = 0
        self.positions = 0

    def infer(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(policy logits [B, A], values [B], seconds the evaluator took)."""
        started = time.perf_counter()
        # A copy as float32 (planes come compacted, and arrays from Ray's object store are read-only).
        logits, values = self.evaluator(np.array(planes, dtype=np.float32))
        self.batches += 1
        self.positions += len(planes)
        return np.asarray(logits), np.asarray(values), time.perf_counter() - started

    def load_weights(self, weights: Mapping[str, np.ndarray], version: int) -> int:
        self.evaluator.load_weights(weights)
        self.version = version
        return version

    def where(self) -> dict[str, Any]:
        """The process, node and device this actor runs on, its weights' version and what it served."""
        import os

        import ray

        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "device": self.device,
            "kept_memory": self.kept_memory,
            "version": self.version,
            "batches": self.batches,
            "positions": self.positions,
        }


def actor_errors() -> tuple[type[BaseException], ...]:
    """The errors a call to a dead or restarting actor raises."""
    from ray import exceptions

    return (exceptions.RayActorError, exceptions.ActorUnavailableError)


def compact(planes: np.ndarray) -> np.ndarray:
    """The planes as uint8 when that loses nothing (a board game's planes are 0s and 1s), else as
    they are: a quarter of the bytes keeps a batch of 128 9x9 positions under Ray's 100 KB limit
    for arguments sent inline, where float32 goes through the object store, which costs both
    processes ~3 ms a call here (`benchmarks/mcts_batching.py`); the actor converts them back."""
    small = planes.astype(np.uint8)
    return small if np.array_equal(small, planes) else planes


class RayInferenceClient:
    """Calls the inference actors (in turn, a batch each) and keeps their weights in step."""

    def __init__(self, actors: Mapping[str, Any], *, timeout_s: float) -> None:
        if not actors:
            raise ValueError("RayInferenceClient needs at least one inference actor")
        self.actors = list(actors.values())
        #: The actors' Ray names: what a restartable actor (a self-play worker) gets to find them,
        #: since Ray may not keep actor handles among its arguments (ray-project/ray#53727).
        self.names = list(actors)
        self.timeout_s = timeout_s
        self._next = 0

    def infer_async(self, planes: np.ndarray) -> Any:
        """Send a batch to the next actor; its ObjectRef of (logits, values, seconds)."""
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        return actor.infer.remote(compact(planes))

    def load_weights(self, weights: Mapping[str, np.ndarray], version: int) -> None:
        """Every actor gets the weights (one copy in the object store); waits until all have them."""
        import ray

        ref = ray.put(dict(weights))
        done = [actor.load_weights.remote(ref, version) for actor in self.actors]
        ray.get(done, timeout=self.timeout_s)

    def wait_alive(self, timeout_s: float) -> None:
        """Return once every actor answers: a restarting one is waited for (at most `timeout_s`);
        one that died for good raises Ray's ActorDiedError."""
        import ray
        from ray import exceptions

        deadline = time.monotonic() + timeout_s
        for actor in self.actors:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"an inference actor did not answer in {timeout_s:.0f} s")
                try:
                    ray.get(actor.where.remote(), timeout=left)
                    break
                except exceptions.ActorUnavailableError:
                    time.sleep(0.1)
                except exceptions.GetTimeoutError:
                    continue

    def where(self) -> list[dict[str, Any]]:
        import ray

        return list(ray.get([a.where.remote() for a in self.actors], timeout=self.timeout_s))

    def kill(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors, self.names = [], []


def start_inference_actors(
    builder: Callable[..., Any],
    *,
    portable: bool,
    count: int,
    num_cpus: float,
    num_gpus: float | None,
    max_restarts: int,
) -> dict[str, Any]:
    """`count` inference actors by their Ray names (unique to this call), placed by Ray; on a GPU
    when the cluster has one (num_gpus null). A portable evaluator's actors need its weights next
    (RayInferenceClient.load_weights)."""
    import ray

    if num_gpus is None:
        num_gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    ray_runtime.check_fits(
        "an inference actor",
        num_cpus,
        num_gpus,
        f"search.inference_num_cpus={num_cpus:g} search.inference_num_gpus={num_gpus:g}",
    )
    remote = ray.remote(InferenceActor)
    prefix = f"framework-inference-{uuid.uuid4().hex[:12]}"
    actors = {}
    for i in range(count):
        name = f"{prefix}-{i}"
        # No weights in the constructor: Ray does not keep a restartable actor's large arguments,
        # so they come by load_weights, after the start and after every restart.
        actors[name] = remote.options(
            name=name,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts,
            max_task_retries=0,
            max_concurrency=1,
        ).remote(builder, portable=portable, threads=max(1, int(num_cpus)), use_gpu=num_gpus > 0)
    return actors


@dataclass
class _Batch:
    ref: Any
    mapping: np.ndarray
    planes: np.ndarray
    queued_at: float
    sent_at: float


@dataclass
class InferenceStats:
    """What the manager saw since the last `take_stats`."""

    batches: int = 0
    positions: int = 0
    queue_wait_s: float = 0.0
    roundtrip_s: float = 0.0
    inference_s: float = 0.0
    inflight_sum: int = 0
    inflight_samples: int = 0
    resent: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, other: InferenceStats) -> None:
        """Fold another manager's figures (a self-play worker's) into these."""
        for name in ("batches", "positions", "queue_wait_s", "roundtrip_s", "inference_s", "inflight_sum",
                     "inflight_samples", "resent"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures


class BatchInferenceManager:
    """Leaves queue here and go to the inference actors in batches, several batches in flight.

    A batch is sent when `batch_size` leaves wait, or when the oldest has waited `max_wait_ms`
    (there is no minimum size), and only while fewer than `max_inflight_batches` are in flight.
    A batch whose actor died is sent again once Ray has restarted it (`on_actor_failure` waits for
    that and restores the actor's weights), at most `max_resends` times in a row; an actor that
    died for good fails the search, saying why.
    """

    def __init__(
        self,
        client: RayInferenceClient,
        *,
        batch_size: int,
        max_wait_ms: float,
        max_inflight_batches: int,
        timeout_s: float,
        max_resends: int,
        on_actor_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.client = client
        self.batch_size = batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_inflight_batches = max_inflight_batches
        self.timeout_s = timeout_s
        self.max_resends = max_resends
        self.on_actor_failure = on_actor_failure
        self._queue: deque[tuple[np.ndarray, np.ndarray, float]] = deque()
        self._queued = 0
        self._inflight: dict[Any, _Batch] = {}
        self._failures_in_a_row = 0
        self._given_back: list[np.ndarray] = []
        """Answered batches a failing drain_ready could not hand back (their leaves still pending)."""
        self.stats = InferenceStats()
        self.cancelled: list[Any] = []
        """ObjectRefs cancelled by the last cleanup()."""

    # -- the design's interface -------------------------------------------------------------------

    def enqueue(self, mapping: np.ndarray, planes: np.ndarray) -> None:
        """Queue leaves (`mapping[i]` names the leaf of `planes[i]`); full batches go at once."""
        if len(mapping) != len(planes):
            raise ValueError(f"enqueue: {len(mapping)} leaves for {len(planes)} positions")
        if len(mapping):
            self._queue.append((mapping, planes, time.perf_counter()))
            self._queued += len(mapping)
        while self._queued >= self.batch_size and len(self._inflight) < self.max_inflight_batches:
            self._send(self.batch_size)

    def dispatch_ready(self, force: bool = False) -> int:
        """Send what is due (a full batch, or a partial one past max_wait_ms, or anything if
        `force`), while there is room in flight; returns the batches sent."""
        sent = 0
        while self._queued and len(self._inflight) < self.max_inflight_batches:
            if not (force or self._queued >= self.batch_size or self._oldest_wait() >= self.max_wait_s):
                break
            self._send(min(self.batch_size, self._queued))
            sent += 1
        return sent

    def check_and_flush(self) -> int:
        """Send a partial batch whose oldest leaf has waited max_wait_ms."""
        return self.dispatch_ready(force=False)

    def drain_ready(self, timeout_s: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Finished batches as (mapping, logits, values), waiting at most `timeout_s` for the first;
        then whatever is due is sent."""
        import ray

        self.check_and_flush()
        results: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if not self._inflight:
            if self._queued:  # nothing in flight: wait for the partial batch's deadline, then send it
                time.sleep(max(0.0, min(timeout_s, self.max_wait_s - self._oldest_wait())))
                self.check_and_flush()
            return results
        refs = list(self._inflight)
        wait = min(timeout_s, max(0.0, self.max_wait_s - self._oldest_wait())) if self._queued else timeout_s
        ready, rest = ray.wait(refs, num_returns=1, timeout=wait)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        now = time.perf_counter()
        try:
            for ref in ready:
                batch = self._inflight[ref]
                try:
                    logits, values, seconds = ray.get(ref)
                except actor_errors() as e:
                    self._resend(batch, e)  # if it raises, the batch stays in flight, to be given up
                    del self._inflight[ref]
                    continue
                del self._inflight[ref]
                results.append((batch.mapping, np.asarray(logits), np.asarray(values)))
                self._count(batch, now, float(seconds))
        except BaseException:
            # The batches already answered go back to the caller as pending, to be given up too.
            self._given_back = [mapping for mapping, _, _ in results]
            raise
        self._check_overdue(now)
        self.dispatch_ready()
        return results

    def _count(self, batch: _Batch, now: float, seconds: float) -> None:
        self._failures_in_a_row = 0
        stats = self.stats
        stats.batches += 1
        stats.positions += len(batch.mapping)
        stats.queue_wait_s += batch.sent_at - batch.queued_at
        stats.roundtrip_s += now - batch.sent_at
        stats.inference_s += seconds

    def pending_count(self) -> int:
        """Leaves queued or in flight."""
        return self._queued + sum(len(b.mapping) for b in self._inflight.values())

    def pending_mappings(self) -> list[np.ndarray]:
        """The mappings of every leaf queued or in flight."""
        queued = [m for m, _, _ in self._queue]
        return queued + [b.mapping for b in self._inflight.values()] + self._given_back

    def cleanup(self) -> None:
        """Cancel what is in flight, and forget the queue and its clock."""
        import ray

        self.cancelled = list(self._inflight)
        for ref in self.cancelled:
            try:
                ray.cancel(ref)
            except Exception as e:  # an already finished or failed task: nothing to cancel
                log.debug("cancel %s: %s", ref, e)
        self._inflight.clear()
        self._queue.clear()
        self._queued = 0
        self._given_back = []

    def take_stats(self) -> InferenceStats:
        stats, self.stats = self.stats, InferenceStats()
        return stats

    # -- internals -------------------------------------------------------------------------------

    def _oldest_wait(self) -> float:
        return time.perf_counter() - self._queue[0][2] if self._queue else 0.0

    def _send(self, n: int) -> None:
        mappings, planes, queued_at = [], [], self._queue[0][2]
        need = n
        while need:
            mapping, block, at = self._queue.popleft()
            if len(mapping) > need:
                self._queue.appendleft((mapping[need:], block[need:], at))
                mapping, block = mapping[:need], block[:need]
            mappings.append(mapping)
            planes.append(block)
            need -= len(mapping)
        self._queued -= n
        batch_planes = planes[0] if len(planes) == 1 else np.concatenate(planes)
        batch_map = mappings[0] if len(mappings) == 1 else np.concatenate(mappings)
        self._submit(batch_map, batch_planes, queued_at)

    def _submit(self, mapping: np.ndarray, planes: np.ndarray, queued_at: float) -> None:
        sent_at = time.perf_counter()
        ref = self.client.infer_async(planes)
        self._inflight[ref] = _Batch(ref, mapping, planes, queued_at, sent_at)
        self.stats.inflight_sum += len(self._inflight)
        self.stats.inflight_samples += 1

    def _resend(self, batch: _Batch, error: BaseException) -> None:
        from ray import exceptions

        if not isinstance(error, exceptions.ActorUnavailableError):  # died, and not restarting
            raise RuntimeError(
                "the inference actor died and Ray cannot restart it (its search.max_restarts are spent): "
                f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            ) from error
        self._failures_in_a_row += 1
        self.stats.failures.append(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        if self._failures_in_a_row > self.max_resends:
            raise RuntimeError(
                f"the inference actor failed {self._failures_in_a_row} batches in a row: "
                f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            ) from error
        if self.on_actor_failure is not None:
            self.on_actor_failure(error)
        self.stats.resent += len(batch.mapping)
        self._submit(batch.mapping, batch.planes, batch.queued_at)

    def _check_overdue(self, now: float) -> None:
        for batch in self._inflight.values():
            if now - batch.sent_at > self.timeout_s:
                raise TimeoutError(
                    f"an inference batch of {len(batch.mapping)} positions has had no answer for "
                    f"{now - batch.sent_at:.0f} s (search.inference_timeout_s={self.timeout_s:g})"
                )
