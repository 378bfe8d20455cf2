"""A search's loop with the network in this process: the trees walked on the run's CPU threads, and
the roots split into groups so that one group's trees are walked while the network evaluates
another's (KataGo's and EnvPool's way of keeping an accelerator busy, without Ray).

With one group the loop alternates: walk every tree a turn (`walk.turn` on `threads`
threads), evaluate the leaves in one batch, again. With G groups (contiguous ranges of tree slots,
as many searched roots in each), the network runs in a thread of its own: while it evaluates group
g's batch, this thread finishes and walks the groups whose answers are back. Each group's batch is
the same whatever the number of threads, so visits are too; groups change the batches (B/G leaves
each), not what a tree does with its answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import walk
from .batching import Evaluated
from .game_calls import entry_point
from .leaves import release_leaves
from .threads import chunks_for, usable_threads

if TYPE_CHECKING:
    from .evaluation import InProcess
    from .game_calls import GameKernels
    from .leaves import Leaves
    from .tree import SearchParams, Tree

#: What the turn kernels answer: (slots, logits, values, draws) of one group's evaluated leaves.
Answers = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass
class _Search:
    """One search's trees and the parts of its loop (`compiled`: the turn, walk.turn.parallel or
    .serial, for these arguments' types)."""

    tree: Tree
    leaves: Leaves
    active: np.ndarray
    params: SearchParams
    game: GameKernels
    compiled: Callable[..., tuple[int, int, int, int]]
    chunks: int
    deadline: Callable[[], float | None]
    answered: Callable[[list[Evaluated]], Answers]
    none: Answers
    tally: Callable[[int, int], None]
    hook: Callable[[Tree], None] | None

    def selecting(self) -> bool:
        """Whether to select more: not once the deadline passed and every root has a visited move."""
        deadline = self.deadline()
        return not (
            deadline is not None
            and time.perf_counter() >= deadline
            and bool((self.tree.visits[self.active, 0] > 1).all())
        )

    def walk(self, lo: int, hi: int, selecting: bool, answers: Answers) -> int:
        """A turn over trees [lo, hi); the leaves taken (in leaves.taken[lo:lo+k])."""
        k, simulated, _, clamped = self.compiled(
            self.tree,
            self.params,
            self.game,
            self.leaves,
            self.active,
            lo,
            hi,
            selecting,
            *answers,
            self.chunks,
        )
        self.tally(simulated, clamped)
        if self.hook is not None:
            self.hook(self.tree)
        return k

    def give_up(self, ranges: list[tuple[int, int]]) -> None:
        """Give up every leaf still waiting in these ranges of trees (their pending visits taken
        back): tree b's, in slot b, waits where the root has a pending visit. A kernel is never
        interrupted halfway (a signal is seen between calls), so this holds at any point of the loop."""
        for lo, hi in ranges:
            slots = lo + np.flatnonzero(self.tree.pending_visits[lo:hi, 0] > 0)
            if len(slots):
                self.tally(0, release_leaves(self.tree, self.leaves, slots.astype(np.int64)))


class GroupedWalk:
    """The loop of a search whose leaves an `InProcess` evaluation answers, on `threads` threads in
    `groups` groups; the time the network took and the wall time of the loops, for perf/network_busy."""

    def __init__(self, evaluation: InProcess, *, threads: int, groups: int) -> None:
        self.evaluation = evaluation
        self.threads = usable_threads(threads)
        self.groups = max(1, groups)
        self.network_seconds = 0.0
        self.walk_seconds = 0.0
        self._network: ThreadPoolExecutor | None = None
        self._compiled: dict[bool, Callable[..., tuple[int, int, int, int]]] = {}

    def run(
        self,
        tree: Tree,
        leaves: Leaves,
        active: np.ndarray,
        *,
        params: SearchParams,
        game: GameKernels,
        deadline: Callable[[], float | None],
        answered: Callable[[list[Evaluated]], Answers],
        none: Answers,
        tally: Callable[[int, int], None],
        hook: Callable[[Tree], None] | None = None,
    ) -> None:
        """Search the active trees to their targets (or the deadline), telling `tally` the
        simulations of each turn and the pending visits it found already at 0."""
        ranges = _ranges(active, self.groups)
        if not ranges:
            return
        # Threads pay where each has trees to walk: a few roots (a player's one) walk on this thread.
        # Pipelined, the network's thread keeps a core of its own: it launches the GPU's work, and
        # a walk on every core would take that core from it for a time slice at a time.
        threads = self.threads - 1 if len(ranges) > 1 and self.threads > 2 else self.threads
        chunks = chunks_for(int(active.sum()), threads)
        compiled = self._compile(chunks > 1, tree, params, game, leaves, active, none)
        search = _Search(
            tree, leaves, active, params, game, compiled, chunks, deadline, answered, none, tally, hook
        )
        started = time.perf_counter()
        try:
            if len(ranges) == 1:
                self._alternate(search, *ranges[0])
            else:
                self._pipelined(search, ranges)
        finally:
            self.walk_seconds += time.perf_counter() - started

    def take_busy(self) -> tuple[float, float]:
        """(seconds the network computed, seconds the loops took) since the last call."""
        busy, wall = self.network_seconds, self.walk_seconds
        self.network_seconds = self.walk_seconds = 0.0
        return busy, wall

    def take_metrics(self, *, on_gpu: bool) -> dict[str, float]:
        """perf/pipeline_groups and the share of the walk the network was busy (perf/network_busy,
        and perf/gpu_busy with the network on a GPU) since the last call."""
        metrics = {"perf/pipeline_groups": float(self.groups)}
        busy, wall = self.take_busy()
        if wall > 0:
            metrics["perf/network_busy"] = busy / wall
            if on_gpu:
                metrics["perf/gpu_busy"] = busy / wall
        return metrics

    def close(self) -> None:
        if self._network is not None:
            self._network.shutdown(wait=False)
            self._network = None

    def _alternate(self, search: _Search, lo: int, hi: int) -> None:
        """One group: walk every tree, evaluate their leaves, again. Kept short: a search of one root
        turns once a simulation, ~20 µs, and each call here is a part of it."""
        compiled, chunks, answered, hook = search.compiled, search.chunks, search.answered, search.hook
        exchange, deadline = self.evaluation.exchange, search.deadline
        tree, leaves, params, game, active = (
            search.tree,
            search.leaves,
            search.params,
            search.game,
            search.active,
        )
        clock = time.perf_counter
        slots, logits, values, draws = search.none
        selecting = True
        simulations = clamped = 0
        network = 0.0
        try:
            while True:
                if selecting and deadline() is not None:
                    selecting = search.selecting()
                k, simulated, _, lost = compiled(
                    tree,
                    params,
                    game,
                    leaves,
                    active,
                    lo,
                    hi,
                    selecting,
                    slots,
                    logits,
                    values,
                    draws,
                    chunks,
                )
                simulations += simulated
                clamped += lost
                if hook is not None:
                    hook(tree)
                if not k:
                    return
                # The slots are the kernel's array, read by its next turn before it writes them: no copy.
                started = clock()
                got = exchange(leaves.taken[lo : lo + k], leaves.planes[lo : lo + k], 0.0)
                network += clock() - started
                slots, logits, values, draws = answered(got)
        except BaseException:
            search.give_up([(lo, hi)])
            raise
        finally:
            search.tally(simulations, clamped)
            self.network_seconds += network

    def _pipelined(self, search: _Search, ranges: list[tuple[int, int]]) -> None:
        """Several groups: each group's leaves go to the network's thread, and the groups whose
        answers are back are walked meanwhile."""
        none, leaves = search.none, search.leaves
        futures: list[Future[tuple[list[Evaluated], float]] | None] = [None] * len(ranges)
        done = [False] * len(ranges)
        selecting = True
        try:
            while not all(done):
                for g, (lo, hi) in enumerate(ranges):
                    if done[g]:
                        continue
                    answers, future = none, futures[g]
                    if future is not None:
                        futures[g] = None
                        got, seconds = future.result()
                        self.network_seconds += seconds
                        answers = search.answered(got)
                    selecting = selecting and search.selecting()
                    k = search.walk(lo, hi, selecting, answers)
                    if not k:  # every tree of the group at its target (or time is up), nothing waits
                        done[g] = True
                        continue
                    # A copy: the group's next turn overwrites the array while another's is walked.
                    slots = leaves.taken[lo : lo + k].copy()
                    futures[g] = self._network_thread().submit(
                        _timed, self.evaluation, slots, leaves.planes[lo : lo + k]
                    )
        except BaseException:
            for future in futures:
                if future is not None:
                    future.exception()  # the network is done with the group's planes
            search.give_up(ranges)
            raise

    def _network_thread(self) -> ThreadPoolExecutor:
        if self._network is None:
            self._network = ThreadPoolExecutor(1, thread_name_prefix="network")
        return self._network

    def _compile(self, parallel: bool, *args: Any) -> Callable[..., tuple[int, int, int, int]]:
        """The compiled turn for these arguments' types, resolved once (numba types a call's ~30
        arrays anew each time otherwise: tens of microseconds a turn)."""
        found = self._compiled.get(parallel)
        if found is None:
            dispatcher = walk.turn.parallel if parallel else walk.turn.serial
            tree, params, game, leaves, active, none = args
            found = self._compiled[parallel] = entry_point(
                dispatcher, tree, params, game, leaves, active, 0, 1, True, *none, 1
            )
        return found


def _timed(evaluation: Any, slots: np.ndarray, planes: np.ndarray) -> tuple[list[Evaluated], float]:
    started = time.perf_counter()
    answers = evaluation.exchange(slots, planes, 0.0)
    return answers, time.perf_counter() - started


def _ranges(active: np.ndarray, groups: int) -> list[tuple[int, int]]:
    """Contiguous ranges of tree slots, each holding about as many active ones, at most `groups`."""
    slots = np.flatnonzero(active)
    if len(slots) == 0:
        return []
    parts = np.array_split(slots, min(groups, len(slots)))
    return [(int(p[0]), int(p[-1]) + 1) for p in parts]
