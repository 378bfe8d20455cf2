"""Ctrl-C or SIGTERM to a sweep whose jobs run in a launcher's workers (joblib's processes, Ray's) stops
it as it stops a run: each running job stops after its current step and ends KILLED with a last
checkpoint and its line to go on with, no job starts after, and then the sweep ends KILLED. Another
Ctrl-C or SIGTERM stops it at once.

A launcher tears its workers down as soon as its wait is interrupted (loky's in about 1.5 s), which cut
jobs short while they saved their checkpoints. So the sweep's process holds the signal back: it marks
the sweep stopping (a file in the sweep's directory, which each job's watch looks for, `orphans`) and
waits until no job holds its run directory (`framework.run_dirs`), JOBS_END_WAIT_S at most.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from framework.interrupts import JOB_INTERRUPTED
from framework.run_dirs import LOCK_FILE, held

from .orphans import POLL_S as WATCH_POLL_S

#: The file in a sweep's directory that says it is stopping.
STOP_FILE = ".sweep-stopping"
#: How long a stopping sweep waits for its jobs to end before its launcher stops them (a scheduler
#: gives 30 s or more between SIGTERM and SIGKILL; a job stops after its current step).
JOBS_END_WAIT_S = 60.0
#: How often it looks.
POLL_S = 0.2
NOTICE = (
    "\nStopping the sweep: each running job ends KILLED after its current step, with a checkpoint, and "
    "no job starts after them (Ctrl-C or SIGTERM again to stop at once)..."
)


def stop_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir).absolute() / STOP_FILE


def asked(sweep_dir: str | Path) -> bool:
    """Whether the sweep in `sweep_dir` is stopping."""
    return stop_file(sweep_dir).exists()


def forget(sweep_dir: str | Path) -> None:
    """The sweep is over (or starts again in its directory): its jobs are not stopping."""
    with contextlib.suppress(OSError):
        stop_file(sweep_dir).unlink(missing_ok=True)


def stop_gently(sweep_dir: str | Path) -> None:
    """In the sweep's process, whose launcher runs its jobs elsewhere: Ctrl-C and SIGTERM stop the
    sweep as this module says."""
    if threading.current_thread() is not threading.main_thread():
        return
    forget(sweep_dir)
    atexit.register(forget, Path(sweep_dir).absolute())
    handler = _Stopper(Path(sweep_dir).absolute())
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


class _Stopper:
    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.stopping = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.stopping:  # a second signal, while the jobs end: the launcher stops them now
            raise KeyboardInterrupt
        self.stopping = True
        JOB_INTERRUPTED.set()  # the parent ends KILLED
        print(NOTICE, file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            stop_file(self.sweep_dir).touch()
        asked_at = time.monotonic()
        # A job that is starting sees the file within its watch's poll, and then does not take its
        # run directory: until then, it may yet.
        while time.monotonic() < asked_at + JOBS_END_WAIT_S and (
            time.monotonic() < asked_at + 1.5 * WATCH_POLL_S or running_jobs(self.sweep_dir)
        ):
            time.sleep(POLL_S)
        raise KeyboardInterrupt  # the launcher's wait ends; the main process says the sweep stopped


def running_jobs(sweep_dir: Path) -> list[Path]:
    """The run directories in `sweep_dir` that a live run holds."""
    return [lock.parent for lock in sweep_dir.rglob(LOCK_FILE) if held(lock.parent)]
