"""How a search's leaves get evaluated: a part the search is given, not a kind of search.

`InProcess`: the leaves of all the trees go to the evaluator in this process as one batch per
simulation (one leaf per tree at a time, so nothing waits: no virtual loss). `Pipelined`: leaves
go through a `BatchInferenceManager` to the Ray inference actors, several batches in flight, many
leaves per tree waiting at once under virtual loss. Both answer with the weights' version used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .answers import checked
from .batching import BatchInferenceManager, Evaluated, InferenceStats
from .inference import evaluated

if TYPE_CHECKING:
    from framework_plugins.boardgames import Evaluator


class LeafEvaluation(Protocol):
    """What a PUCT search needs of whatever evaluates its leaves."""

    virtual_loss: float
    """What a waiting leaf counts as on its path (0 where no leaf of a tree ever waits beside another)."""
    leaves_per_tree: int
    """Leaves one tree may have waiting at once."""

    def max_pending(self, n_trees: int) -> int:
        """Leaves that may wait for their evaluation at once, over all trees."""
        ...

    def begin(self) -> int:
        """A search begins: the weights' version its answers will be at least; returned."""
        ...

    def evaluate(self, planes: np.ndarray) -> Evaluated:
        """Evaluate now (the roots)."""
        ...

    def exchange(self, slots: np.ndarray, planes: np.ndarray, timeout_s: float) -> list[Evaluated]:
        """Hand over the leaves just selected (`planes[i]` is slot `slots[i]`'s; none is fine) and
        take back what is evaluated, waiting at most `timeout_s` for any. The arrays are the
        search's and change at its next turn."""
        ...

    def pending(self) -> int: ...

    def abandon(self) -> list[np.ndarray]:
        """The slots of every leaf still waiting, whose evaluation is given up (cancelled)."""
        ...

    def take_stats(self) -> InferenceStats | None: ...


class InProcess:
    """Every queued leaf evaluated in one call, in this process; its weights' version from `version`.

    `threads` are the CPU threads the searches over it walk their trees on (the run's `threads`),
    `device` where the network runs (a GPU: the searches pipeline groups of roots by default)."""

    virtual_loss = 0.0
    leaves_per_tree = 1

    def __init__(
        self,
        evaluator: Evaluator,
        version: Callable[[], int] = lambda: 0,
        *,
        threads: int = 1,
        device: str = "cpu",
    ) -> None:
        self.evaluator, self.version = evaluator, version
        self.threads, self.device = threads, str(device)
        self._version = 0

    def max_pending(self, n_trees: int) -> int:
        return n_trees

    def begin(self) -> int:
        # Weights change between searches only (this process publishes them): read once a search.
        self._version = self.version()
        return self._version

    def evaluate(self, planes: np.ndarray) -> Evaluated:
        logits, values, draws = evaluated(self.evaluator(planes))
        return Evaluated(np.arange(len(planes), dtype=np.int64), logits, values, self._version, draws)

    def exchange(self, slots: np.ndarray, planes: np.ndarray, timeout_s: float) -> list[Evaluated]:
        if not len(slots):
            return []
        logits, values, draws = evaluated(self.evaluator(planes))
        # The slots are the search's array, read by its next turn before it changes them: no copy.
        return [Evaluated(slots, logits, values, self._version, draws)]

    def pending(self) -> int:
        return 0

    def abandon(self) -> list[np.ndarray]:
        return []  # nothing waits: every exchange answers at once

    def take_stats(self) -> InferenceStats | None:
        return None


class Pipelined:
    """Leaves batched to the Ray inference actors through a BatchInferenceManager."""

    def __init__(
        self,
        manager: BatchInferenceManager,
        *,
        virtual_loss: float,
        async_inflight_limit: int | None,
        version: Callable[[], int],
    ) -> None:
        self.manager, self.virtual_loss = manager, virtual_loss
        self.leaves_per_tree = 1 << 30
        self.async_inflight_limit, self.version = async_inflight_limit, version

    def max_pending(self, n_trees: int) -> int:
        return (self.async_inflight_limit or n_trees) * self.manager.batch_size

    def begin(self) -> int:
        self.manager.min_version = self.version()
        return self.manager.min_version

    def evaluate(self, planes: np.ndarray) -> Evaluated:
        manager, n = self.manager, len(planes)
        manager.enqueue(np.arange(n, dtype=np.int64), planes.copy())
        got: list[Evaluated] = []
        try:
            while sum(len(e.mapping) for e in got) < n:
                manager.dispatch_ready(force=True)
                got += manager.drain_ready(0.05)
        except BaseException:
            manager.cleanup()
            raise
        order = np.concatenate([e.mapping for e in got])
        logits = np.empty((n, *got[0].logits.shape[1:]), dtype=np.float32)
        values = np.empty(n, dtype=np.float32)
        draws = None if got[0].draws is None else np.zeros(n, dtype=np.float32)
        for e in got:
            e = checked(e, None)
            logits[e.mapping], values[e.mapping] = e.logits, e.values
            if draws is not None and e.draws is not None:
                draws[e.mapping] = e.draws
        assert len(order) == n
        return Evaluated(np.arange(n), logits, values, min(e.version for e in got), draws)

    def exchange(self, slots: np.ndarray, planes: np.ndarray, timeout_s: float) -> list[Evaluated]:
        if len(slots):
            self.manager.enqueue(slots.copy(), planes.copy())
        self.manager.dispatch_ready()
        return self.manager.drain_ready(timeout_s)

    def pending(self) -> int:
        return self.manager.pending_count()

    def abandon(self) -> list[np.ndarray]:
        waiting = self.manager.pending_mappings()
        self.manager.cleanup()
        return waiting

    def take_stats(self) -> InferenceStats | None:
        return self.manager.take_stats()
