"""A Gomocup brain's time per move; its input read ahead on a thread of its own, and its searches run on
another: a signal (Ctrl-C, SIGTERM) or the manager's input ending stops the search under way at once, where a
long search held them off (78 s after Ctrl-C, and on for ever once the manager had gone)."""

from __future__ import annotations

import os
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

#: How often a waiting brain looks at its search and its input (seconds).
POLL_S = 0.1
#: The part of a move's time allowance kept back for the answer to reach the manager: a fraction,
#: and up to SAFETY_MS more (a tenth of the allowance at most, so that short limits are used too).
SAFETY_FRACTION = 0.15
SAFETY_MS = 80.0
#: Moves a match's remaining time is shared over, when the match has a time limit.
MOVES_TO_PLAN_FOR = 20
#: The most bytes of input one read takes, and the most reads kept ahead of the lines answered.
READ_BYTES = 1 << 16
BATCHES_AHEAD = 4


class ReadAhead:
    """The manager's lines, in order, read as they come on a thread of its own (in the batches
    `batches` gives them: one queue item a read, not a line)."""

    def __init__(self, batches: Iterable[Sequence[str]]) -> None:
        # Bounded: input that comes faster than it is answered waits in the pipe, not in memory here.
        self._batches: queue.Queue[Sequence[str] | None] = queue.Queue(maxsize=BATCHES_AHEAD)
        self._batch: deque[str] = deque()
        """The lines of the batch being answered, not yet given."""
        self.ended = threading.Event()
        threading.Thread(target=self._read, args=(batches,), name="gomocup-input", daemon=True).start()

    def _read(self, batches: Iterable[Sequence[str]]) -> None:
        try:
            for batch in batches:
                self._batches.put(batch)
        finally:
            self.ended.set()
            self._batches.put(None)

    def gone(self) -> bool:
        """Whether the input has ended with no line left to answer: the manager has gone."""
        return self.ended.is_set() and not self._batch and self._batches.qsize() <= 1  # its end's mark alone

    def __iter__(self) -> Iterator[str]:
        while True:
            if self._batch:
                yield self._batch.popleft()
                continue
            try:
                batch = self._batches.get(timeout=POLL_S)  # a timed wait: a signal is taken at once
            except queue.Empty:
                continue
            if batch is None:
                return
            self._batch.extend(batch)


def input_lines(fd: int, max_line: int) -> Iterator[list[str]]:
    """The lines of file descriptor `fd` as they come (a manager waits for each answer before its next
    command), a batch per read, decoded whatever their bytes (one that is not UTF-8 becomes U+FFFD),
    without their line ends; a line longer than `max_line` bytes is cut after `max_line` + 1 (to be
    answered ERROR), its rest skipped. Read in blocks: a read per byte took ~30 CPU-s a million lines."""
    pending, skipping = b"", False
    while True:
        block = os.read(fd, READ_BYTES)
        if not block:
            if pending and not skipping:
                yield [pending.decode("utf-8", errors="replace")]
            return
        *complete, pending = (pending + block).split(b"\n")
        batch = []
        for line in complete:
            if skipping:  # the rest of an overlong line
                skipping = False
                continue
            batch.append(line[: max_line + 1].decode("utf-8", errors="replace"))
        if skipping:
            pending = b""
        elif len(pending) > max_line:
            batch.append(pending[: max_line + 1].decode("utf-8", errors="replace"))
            pending, skipping = b"", True
        if batch:
            yield batch


def search_until_stopped(engine: Any, roots: list[Any], request: Any, stop: Callable[[], bool]) -> Any:
    """`engine.search(roots, request)` on a thread of its own, interrupted (its result as at its deadline)
    once `stop()`, or at once where this thread is interrupted (the exception raised on)."""
    done: list[Any] = []
    ended = threading.Event()  # not Thread.join: a KeyboardInterrupt in it leaves is_alive() False

    def run() -> None:
        # Signals are the main thread's: one landing here (or in a thread the search starts) would
        # cut a call of torch's short.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            done.append(engine.search(roots, request))
        except BaseException as e:  # raised where the search was asked for
            done.append(e)
        finally:
            ended.set()

    threading.Thread(target=run, name="gomocup-search", daemon=True).start()
    try:
        while not ended.wait(POLL_S):
            if stop():
                engine.interrupt()
    except BaseException:  # Ctrl-C, SIGTERM: the search ends before the brain does
        engine.interrupt()
        ended.wait(10)
        raise
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def budget_s(info: Mapping[str, int]) -> float | None:
    """Seconds a move may take: from INFO timeout_turn and the match's time left (None: no limit)."""
    limits: list[float] = []
    turn = info.get("timeout_turn")
    if turn is not None:
        limits.append(turn)
    match, left = info.get("timeout_match"), info.get("time_left")
    if match and left is not None:  # time_left may be below 0 (the match time is overrun): play at once
        limits.append(left / MOVES_TO_PLAN_FOR)
    if not limits:
        return None
    allowed = min(limits)
    return max(0.0, allowed * (1 - SAFETY_FRACTION) - min(SAFETY_MS, allowed / 10)) / 1000.0
