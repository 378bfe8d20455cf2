"""Training and gating beside self-play (`agent.background_training`): the run's process plays its
games while a trainer thread runs the training phases they make due and a gate thread plays the
gates, each on a CUDA stream of its own on a GPU, so that the accelerator never waits for a phase.

Self-play stays in the run's main thread and keeps the learning's proportions: a phase falls due
each `agent.train_every` moves as before, and self-play waits while two phases are due and not
yet done (the one under way and the next), so a position is trained on as often as in the
serial loop. A gate falls due every `agent.gate_every` phases; one due while the last still plays
is skipped (the next due gate takes the newer network), so the gates never hold training back.

The threads share nothing with self-play but the learner's locks: new weights for self-play are
handed to the main thread, which publishes them between its searches (its searches see weights
change between searches only, as in the serial loop); metrics too are logged by the main thread.
A gate's incumbent searches with a copy of the best network (INCUMBENT), not with self-play's.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from framework.contracts import RunContext
from framework_plugins.boardgames.searches import run_searches

from . import gating

if TYPE_CHECKING:
    from .config import AlphaZeroConfig
    from .learner import Learner

log = logging.getLogger("framework")

#: The model a background gate's incumbent searches with (a copy of the best network's weights).
INCUMBENT = "incumbent"
#: Phases due and not done before self-play waits for the trainer.
MOST_DUE = 2
#: How long closing waits for a thread to finish what it is doing (a phase, a gate's turn).
JOIN_S = 120.0


class Learning(Protocol):
    """What the threads work on: the agent's settings, learner and counts (the AlphaZero agent)."""

    cfg: AlphaZeroConfig
    learner: Learner
    counters: dict[str, int]
    elo: float

    def learning_rate(self, ctx: RunContext, step: int) -> float: ...
    def gate_metrics(self, score: float, accepted: bool) -> dict[str, float]: ...
    def publish_best(self, ctx: RunContext, weights: Mapping[str, np.ndarray]) -> None: ...


class BackgroundLearning:
    """The trainer and gate threads of one `learn()`; the main thread drives them."""

    def __init__(self, agent: Learning, ctx: RunContext, game: Any, rng: np.random.Generator) -> None:
        self.agent, self.ctx, self.game = agent, ctx, game
        self.rng = rng
        self._cond = threading.Condition()
        self._due: list[int] = []  # the steps at which the phases due fell due
        self._busy = False  # the trainer is in a phase
        self._closing = threading.Event()
        self._errors: list[BaseException] = []
        self._outbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._gates: queue.SimpleQueue[tuple[dict[str, np.ndarray], int, int] | None] = queue.SimpleQueue()
        self._gating = False  # a gate is due or playing
        self.phases_done = 0
        self._started = time.perf_counter()
        self._waited_s = 0.0  # self-play's wait for the trainer
        self._phase_s: list[float] = []
        self._gate_s: list[float] = []
        self._gates_skipped = 0
        self._window = (self._started, 0.0)  # perf_metrics' last (time, waited)
        self._trainer = threading.Thread(target=self._guarded(self._train_loop), name="alphazero-trainer")
        self._gater = threading.Thread(target=self._guarded(self._gate_loop), name="alphazero-gate")
        self._trainer.daemon = self._gater.daemon = True
        self._trainer.start()
        if agent.cfg.gating:
            self._gater.start()

    # -- the main thread's side --------------------------------------------------------------------

    def owe_phase(self, step: int) -> None:
        """A training phase fell due at `step`; waits while MOST_DUE are due (the replay ratio holds)."""
        with self._cond:
            self._due.append(step)
            self._cond.notify_all()
            if self._owed() > MOST_DUE:
                began = time.perf_counter()
                while self._owed() > MOST_DUE and not self._should_end():
                    self._cond.wait(0.1)
                self._waited_s += time.perf_counter() - began
        self.check()

    def perf_metrics(self) -> dict[str, float]:
        """Since the last call: the share of the time self-play waited for the trainer
        (`perf/selfplay_waiting`: near 0, training keeps up; near 1, it sets the pace), the mean
        seconds of a phase and of a gate, and the gates skipped because the last still played."""
        now = time.perf_counter()
        (then, waited_then), waited = self._window, self._waited_s
        self._window = (now, waited)
        phases, self._phase_s = self._phase_s, []
        gates, self._gate_s = self._gate_s, []
        metrics = {"perf/selfplay_waiting": (waited - waited_then) / max(now - then, 1e-9)}
        if phases:
            metrics["perf/train_phase_s"] = float(np.mean(phases))
        if gates:
            metrics["perf/gate_s"] = float(np.mean(gates))
        metrics["perf/gates_skipped"] = float(self._gates_skipped)
        return metrics

    def summary(self) -> str:
        """One line: what the threads did over the run, and what set its pace."""
        wall = time.perf_counter() - self._started
        return (
            f"training in the background: {self.phases_done} phases, self-play waited for the trainer "
            f"{self._waited_s:.1f} s of {wall:.1f} s ({100 * self._waited_s / max(wall, 1e-9):.0f} %), "
            f"{self._gates_skipped} gates skipped while one played"
        )

    def deliver(self) -> list[tuple[dict[str, float], int]]:
        """Publish the weights the threads handed over (in this thread, between searches) and take
        the metrics they made, to log; raises what failed in a thread."""
        self.check()
        metrics: list[tuple[dict[str, float], int]] = []
        while True:
            try:
                kind, item = self._outbox.get_nowait()
            except queue.Empty:
                return metrics
            if kind == "weights":
                self.agent.publish_best(self.ctx, item)
            else:
                metrics.append(item)

    def check(self) -> None:
        """Raise, in this thread, what failed in a background thread."""
        if self._errors:
            raise self._errors[0]

    def close(self) -> None:
        """Let the threads finish what they are doing (a phase; a gate stops within a turn) and end."""
        self._closing.set()
        with self._cond:
            self._cond.notify_all()
        self._gates.put(None)
        for thread in (self._trainer, self._gater):
            if thread.is_alive():
                thread.join(JOIN_S)
                if thread.is_alive():
                    log.warning("the %s thread did not end within %.0f s", thread.name, JOIN_S)

    def idle(self, timeout_s: float = JOIN_S, *, gates: bool = False) -> None:
        """Wait until the trainer has no phase due (and, with `gates`, no gate plays): the run's last
        checkpoint holds them all. A stop or a thread's failure ends the wait."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (
                (self._owed() or (gates and self._gating))
                and not self._should_end()
                and time.monotonic() < deadline
            ):
                self._cond.wait(0.1)
            late = self._owed() or (gates and self._gating)
        self.check()
        if late and not self._should_end():
            log.warning(
                "training in the background: %d phases due%s after %.0f s; going on without them",
                self._owed(),
                " and a gate playing" if self._gating else "",
                timeout_s,
            )

    # -- the threads ---------------------------------------------------------------------------------

    def _owed(self) -> int:
        return len(self._due) + int(self._busy)

    def _should_end(self) -> bool:
        return self._closing.is_set() or self.ctx.stop.is_set() or bool(self._errors)

    def _guarded(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                with self._stream():
                    loop()
            except BaseException as e:  # handed to the main thread, which raises it
                self._errors.append(e)
                with self._cond:
                    self._cond.notify_all()

        return run

    @contextlib.contextmanager
    def _stream(self) -> Iterator[None]:
        """A CUDA stream of the thread's own on a GPU (its work overlaps self-play's), else nothing."""
        device = self.agent.learner.device
        if device.type != "cuda":
            yield
            return
        with torch.cuda.device(device), torch.cuda.stream(torch.cuda.Stream(device)):
            yield

    def _train_loop(self) -> None:
        agent, cfg = self.agent, self.agent.cfg
        learner = agent.learner
        while True:
            with self._cond:
                while not self._due and not self._should_end():
                    self._cond.wait(0.1)
                if self._should_end():
                    return
                step = self._due.pop(0)
                self._busy = True
            began = time.perf_counter()
            try:
                with learner.lock:
                    learner.train_phase(self.rng, agent.learning_rate(self.ctx, step))
                    agent.counters["phases"] += 1
                    agent.counters["updates"] += cfg.updates_per_phase
                    phases = agent.counters["phases"]
                    best = None if cfg.gating else learner.weights("best")
                    due = cfg.gating and phases % cfg.gate_every == 0
                    candidate = learner.weights("net") if due and not self._gating else None
                    self._gates_skipped += int(due and candidate is None)
                if best is not None:
                    self._outbox.put(("weights", best))
                if candidate is not None:
                    self._gating = True
                    self._gates.put((candidate, agent.counters["gates"], step))
                self._phase_s.append(time.perf_counter() - began)
                self.phases_done += 1
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _gate_loop(self) -> None:
        agent, cfg, ctx = self.agent, self.agent.cfg, self.ctx
        learner = agent.learner
        while True:
            due = self._gates.get()
            if due is None or self._should_end():
                return
            candidate, index, step = due
            began = time.perf_counter()
            try:
                with learner.lock:
                    incumbent = learner.weights("best")
                run_searches(ctx).inference.publish(INCUMBENT, incumbent)
                result = gating.gate(
                    cfg, ctx, self.game, candidate, index, incumbent=INCUMBENT, should_stop=self._should_end
                )
                if result is None:  # the run is stopping
                    return
                accepted = result.score >= cfg.gate_threshold
                with learner.lock:
                    agent.counters["gates"] += 1
                    if accepted:
                        learner.accept(candidate)
                        agent.counters["generation"] += 1
                        agent.elo += result.elo_difference()
                    best = learner.weights("best") if accepted else None
                    metrics = agent.gate_metrics(result.score, accepted)
                if best is not None:
                    self._outbox.put(("weights", best))
                self._outbox.put(("metrics", (metrics, step)))
                self._gate_s.append(time.perf_counter() - began)
            finally:
                with self._cond:
                    self._gating = False
                    self._cond.notify_all()
