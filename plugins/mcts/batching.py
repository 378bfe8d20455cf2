"""Leaves gathered into batches for the inference actors, several batches in flight.

The data flow of a pipelined search: the search selects leaves → `BatchInferenceManager.enqueue`
→ a batch is sent (`RayInferenceClient.infer_async`, an ObjectRef back) when `batch_size` leaves
wait or the oldest has waited `max_wait_ms` → `InferenceActor.infer` on a CPU or GPU → the manager
collects finished batches (`drain_ready`) → the search expands and backs them up.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from framework_plugins.ray_runtime.restarts import actor_errors, settle

from .inference import RayInferenceClient

log = logging.getLogger("framework")

#: How long cleanup() waits for the cancelled batches to end (the one an actor is evaluating).
SETTLE_S = 2.0


class Evaluated(NamedTuple):
    """A batch's answer: the leaves it was for, their logits and values, the weights' version, and
    their draw probabilities where the network has them (a win/draw/loss value head)."""

    mapping: np.ndarray
    logits: np.ndarray
    values: np.ndarray
    version: int
    draws: np.ndarray | None = None


@dataclass
class _Batch:
    ref: Any
    actor: int
    mapping: np.ndarray
    planes: np.ndarray
    min_version: int
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
    batch_size: int = 0
    """The batch size the batches were meant to fill."""

    def add(self, other: InferenceStats) -> None:
        """Fold another manager's figures (a self-play worker's) into these."""
        for name in ("batches", "positions", "queue_wait_s", "roundtrip_s", "inference_s", "inflight_sum",
                     "inflight_samples", "resent"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures
        self.batch_size = self.batch_size or other.batch_size


def inference_metrics(stats: InferenceStats | None, sims: int, seconds: float) -> dict[str, float]:
    """The tuning figures (perf/*) of a manager's stats, and of `sims` simulations in `seconds` of search."""
    metrics: dict[str, float] = {}
    if sims and seconds > 0:
        metrics["perf/search_sims_per_s"] = sims / seconds
    if stats is None:
        return metrics
    if stats.batches:
        metrics.update(
            {
                "perf/batch_fill": stats.positions / stats.batches / max(stats.batch_size, 1),
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


#: What the manager calls when actor i failed a batch: returns once that actor is alive again (a
#: new incarnation, counted once), raises when it is dead for good.
ActorFailureHandler = Callable[[int, BaseException], None]


class BatchInferenceManager:
    """Leaves queue here and go to the inference actors in batches, several batches in flight.

    A batch is sent when `batch_size` leaves wait, or when the oldest has waited `max_wait_ms`
    (there is no minimum size), and only while fewer than `max_inflight_batches` are in flight.
    A batch whose actor died is sent again once Ray has restarted it (`on_actor_failure` waits for
    that), at most `max_resends` times in a row; an actor that died for good fails the search.
    """

    def __init__(
        self,
        client: RayInferenceClient,
        *,
        model: str,
        batch_size: int,
        max_wait_ms: float,
        max_inflight_batches: int,
        timeout_s: float,
        max_resends: int,
        on_actor_failure: ActorFailureHandler,
    ) -> None:
        self.client, self.model = client, model
        self.batch_size = batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_inflight_batches = max_inflight_batches
        self.timeout_s = timeout_s
        self.max_resends = max_resends
        self.on_actor_failure = on_actor_failure
        self.min_version = 0
        """The oldest weights a batch sent now may be answered with (the version its search began with)."""
        self._queue: deque[tuple[np.ndarray, np.ndarray, float]] = deque()
        self._queued = 0
        self._inflight: dict[Any, _Batch] = {}
        self._failures_in_a_row = 0
        self._given_back: list[np.ndarray] = []
        """Answered batches a failing drain_ready could not hand back (their leaves still pending)."""
        self.stats = InferenceStats(batch_size=batch_size)
        self.cancelled: list[Any] = []
        """ObjectRefs cancelled by the last cleanup()."""
        self._unsettled: list[Any] = []
        """Cancelled ObjectRefs not ended yet, retrieved at the next cleanup()."""

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

    def drain_ready(self, timeout_s: float) -> list[Evaluated]:
        """Finished batches, waiting at most `timeout_s` for the first; then whatever is due is sent."""
        import ray

        self.dispatch_ready()
        results: list[Evaluated] = []
        if not self._inflight:
            if self._queued:  # nothing in flight: wait for the partial batch's deadline, then send it
                time.sleep(max(0.0, min(timeout_s, self.max_wait_s - self._oldest_wait())))
                self.dispatch_ready()
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
                    answer = ray.get(ref)
                except actor_errors() as e:
                    self._resend(batch, e)  # if it raises, the batch stays in flight, to be given up
                    del self._inflight[ref]
                    continue
                del self._inflight[ref]
                if answer.version < batch.min_version:
                    raise RuntimeError(
                        f"an inference actor answered with weights of version {answer.version}, older "
                        f"than the {batch.min_version} the search began with"
                    )
                results.append(
                    Evaluated(
                        batch.mapping,
                        np.asarray(answer.logits),
                        np.asarray(answer.values),
                        answer.version,
                        None if answer.draws is None else np.asarray(answer.draws),
                    )
                )
                self._count(batch, now, float(answer.seconds))
        except BaseException:
            # The batches already answered go back to the caller as pending, to be given up too.
            self._given_back = [r.mapping for r in results]
            raise
        self._check_overdue(now)
        self.dispatch_ready()
        return results

    def pending_count(self) -> int:
        """Leaves queued or in flight."""
        return self._queued + sum(len(b.mapping) for b in self._inflight.values())

    def pending_mappings(self) -> list[np.ndarray]:
        """The mappings of every leaf queued or in flight."""
        queued = [m for m, _, _ in self._queue]
        return queued + [b.mapping for b in self._inflight.values()] + self._given_back

    def cleanup(self) -> None:
        """Cancel what is in flight, retrieve how it ended (a batch being evaluated ends in
        moments), and forget the queue and its clock."""
        import ray

        self.cancelled = list(self._inflight)
        for ref in self.cancelled:
            try:
                ray.cancel(ref)
            except Exception as e:  # an already finished or failed task: nothing to cancel
                log.debug("cancel %s: %s", ref, e)
        self._unsettled = settle(self._unsettled + self.cancelled, timeout_s=SETTLE_S)
        self._inflight.clear()
        self._queue.clear()
        self._queued = 0
        self._given_back = []

    def take_stats(self) -> InferenceStats:
        stats, self.stats = self.stats, InferenceStats(batch_size=self.batch_size)
        return stats

    # -- internals -------------------------------------------------------------------------------

    def _count(self, batch: _Batch, now: float, seconds: float) -> None:
        self._failures_in_a_row = 0
        stats = self.stats
        stats.batches += 1
        stats.positions += len(batch.mapping)
        stats.queue_wait_s += batch.sent_at - batch.queued_at
        stats.roundtrip_s += now - batch.sent_at
        stats.inference_s += seconds

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
        self._submit(batch_map, batch_planes, queued_at, self.min_version)

    def _submit(self, mapping: np.ndarray, planes: np.ndarray, queued_at: float, min_version: int) -> None:
        sent_at = time.perf_counter()
        ref, actor = self.client.infer_async(self.model, planes, min_version)
        self._inflight[ref] = _Batch(ref, actor, mapping, planes, min_version, queued_at, sent_at)
        self.stats.inflight_sum += len(self._inflight)
        self.stats.inflight_samples += 1

    def _resend(self, batch: _Batch, error: BaseException) -> None:
        self._failures_in_a_row += 1
        self.stats.failures.append(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        if self._failures_in_a_row > self.max_resends:
            raise RuntimeError(
                f"the inference actors failed {self._failures_in_a_row} batches in a row: "
                f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            ) from error
        self.on_actor_failure(batch.actor, error)  # returns once the actor is alive again
        self.stats.resent += len(batch.mapping)
        self._submit(batch.mapping, batch.planes, batch.queued_at, batch.min_version)

    def _check_overdue(self, now: float) -> None:
        for batch in self._inflight.values():
            if now - batch.sent_at > self.timeout_s:
                raise TimeoutError(
                    f"an inference batch of {len(batch.mapping)} positions has had no answer for "
                    f"{now - batch.sent_at:.0f} s (search.inference_timeout_s={self.timeout_s:g})"
                )
