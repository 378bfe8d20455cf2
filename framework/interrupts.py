"""A run's Ctrl-C and SIGTERM handlers. CPython 3.11-3.13 marks a KeyboardInterrupt leaving a string `exec`
(dataclasses build methods so: a signal during an import) unhandled even if caught, so `python -m` exits by
SIGINT (-2), not the command's 130; `forget_caught_interrupt` clears the mark wherever one was handled."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Process exit status of a run stopped with Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_KILLED = 130
#: Set when an in-process sweep job (no sys.last_value to tell) or launcher wait stops: parent ends KILLED.
JOB_INTERRUPTED = threading.Event()
#: A stop asked of this process from elsewhere (its sweep stopping, `ask_to_stop`): the run going on
#: stops as at a first Ctrl-C, and a sweep's job that has not started does not start.
STOP_ASKED = threading.Event()
#: What a first Ctrl-C does to the run going on in this process (one at most; a list for the handover).
_first_stops: list[Callable[[], None]] = []
#: A Ctrl-C this process took before a run's own handling of it (`remember_ctrl_c`): its interrupt may
#: have been lost (one that landed as Hydra wrote a sweep job's config.yaml was, and the job trained on),
#: so a run that starts after it stops as the interrupt would have stopped it.
CTRL_C = threading.Event()


def remember_ctrl_c() -> None:
    """Ctrl-C interrupts as Python's own handler does, and is remembered (CTRL_C); where it is ignored
    (a background job's), it stays so."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _remembered)


def _remembered(signum: int, frame: Any) -> None:
    CTRL_C.set()
    raise KeyboardInterrupt


def forget_caught_interrupt() -> None:
    """Clear CPython's unhandled-interrupt mark (module docstring): the command's exit status stands."""
    exec("pass", {})  # a string exec: the one thing that clears the mark


#: How long a training run that SIGTERM stopped has to end its current step (an update under way
#: finishes, not saved half done) before it stops where it is; a scheduler's grace is 30 s or more.
SIGTERM_GRACE_S = 20.0


@contextmanager
def sigterm_as_interrupt(stop: threading.Event) -> Iterator[None]:
    """SIGTERM while the run trains stops it as a first Ctrl-C does, and as a second one SIGTERM_GRACE_S
    later if it is still training; otherwise (and after Ctrl-C) as a second Ctrl-C does at once (KILLED,
    last checkpoint, envs closed). It sets `stop` too, as an interrupt Python drops (raised in a weakref
    callback) must still stop the next step."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    timers: list[threading.Timer] = []
    main = threading.main_thread().ident or 0

    def handler(signum: int, frame: Any) -> None:
        if not stop.is_set() and _first_stops:
            first_stop = _first_stops[-1]
            first_stop()

            def still_training() -> None:  # its training over, the run's ending is not cut short
                if first_stop in _first_stops:  # a signal, not interrupt_main: it ends a blocking wait too
                    signal.pthread_kill(main, signal.SIGTERM)

            timer = threading.Timer(SIGTERM_GRACE_S, still_training)
            timer.daemon = True
            timer.start()
            timers.append(timer)
            return
        stop.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()
        signal.signal(signal.SIGTERM, previous)
        if stop.is_set():  # the run was stopped and has ended: what is left of the process may go
            exit_at_the_next_signal()


def exit_at_the_next_signal() -> None:
    """After a signal-stopped run ended, another SIGTERM or Ctrl-C exits at once with EXIT_KILLED, not -15
    or a traceback from wherever it lands (Ray's shutdown, tracker writes); Ray's reaper ends the rest."""

    def handler(signum: int, frame: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(EXIT_KILLED)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handler)


@contextmanager
def stop_on_sigint(
    stop: threading.Event, notice: str, on_stop: Callable[[], None] | None = None
) -> Iterator[None]:
    """Ctrl-C sets `stop`, calls `on_stop` (cuts searches short), prints `notice`; a second one interrupts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first_stop() -> None:
        if stop.is_set():
            return
        stop.set()
        if on_stop is not None:
            on_stop()
        print(notice, file=sys.stderr, flush=True)

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        first_stop()

    previous = signal.signal(signal.SIGINT, handler)
    _first_stops.append(first_stop)
    if STOP_ASKED.is_set() or CTRL_C.is_set():
        first_stop()
    try:
        yield
    finally:
        _first_stops.remove(first_stop)
        signal.signal(signal.SIGINT, previous)


def ask_to_stop() -> None:
    """Stop this process's run as its first Ctrl-C would, from any thread (its sweep is stopping); a run
    stopping already goes on ending, and one that starts later stops at once."""
    STOP_ASKED.set()
    for first_stop in list(_first_stops):
        first_stop()
