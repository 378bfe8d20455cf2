"""Ctrl-C and SIGTERM in the command line's process: the signal handlers a run installs, and the
exit status a caught interrupt must still give.

CPython (3.11 to 3.13) marks a KeyboardInterrupt that leaves a string `exec`/`eval` as unhandled
even when a caller catches it; `dataclasses` and `namedtuple` build their methods that way, so a
signal that lands during an import (torch's dataclasses, say) sets the mark. Under `python -m`
the interpreter then ends the process by SIGINT (status -2) instead of the status the command
chose (130 after a run ended KILLED). A string `exec` clears the mark when it starts:
`forget_caught_interrupt` is called wherever an interrupt has been caught and dealt with."""

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
#: Set when a sweep's job run in this process was stopped (Ctrl-C, SIGTERM: it ended KILLED and
#: exits with RunKilled, a SystemExit, which leaves no sys.last_value), or a launcher's wait for its
#: jobs was: the sweep's parent run then ends KILLED too (plugins/sweeps).
JOB_INTERRUPTED = threading.Event()


def forget_caught_interrupt() -> None:
    """Clear CPython's mark of an unhandled KeyboardInterrupt (see the module's docstring): the
    interrupt was handled, and the process exits with the status its command gives."""
    exec("pass", {})  # a string exec: the one thing that clears the mark


@contextmanager
def sigterm_as_interrupt(stop: threading.Event) -> Iterator[None]:
    """SIGTERM stops the run as a second Ctrl-C does: at once, ending KILLED with a last checkpoint,
    every env closed on the way out (the game clients, browsers and temporary directories they
    started with it). `stop` is set too: an interrupt raised where Python cannot raise it (a
    weakref callback prints it and drops it) still stops the run at its next step."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if stop.is_set():  # the run was stopped and has ended: what is left of the process may go
            exit_at_the_next_signal()


def exit_at_the_next_signal() -> None:
    """A run stopped by a signal has ended (KILLED, its checkpoint written): another SIGTERM or
    Ctrl-C while the process finishes (its Ray shutting down, the tracker's last writes) ends the
    process at once with EXIT_KILLED, not by the signal's default (-15) nor with a traceback from
    wherever it landed. What it leaves running, a local Ray's processes, its reaper ends."""

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
    """The first Ctrl-C sets `stop` (the run stops after its current step), calls `on_stop` (which
    cuts a long step short: the searches under way) and prints `notice`; a second one interrupts at
    once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        if on_stop is not None:
            on_stop()
        print(notice, file=sys.stderr)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
