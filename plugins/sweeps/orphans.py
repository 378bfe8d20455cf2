"""A sweep's job in a launcher's worker (joblib's loky processes, a Ray worker of this machine) ends
when the sweep's own process is gone: killed outright, the sweep can no longer stop its jobs, and
loky keeps an idle worker for minutes, a busy one until its job is over.

The job watches the sweep's process (its pid and start time, so that a reused pid is not taken for
it); once that is gone, the job gets SIGTERM (its run ends KILLED with a last checkpoint, as a
scheduler's SIGTERM ends it) and the worker process exits right after, or at the latest
GRACE_S later.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from framework.interrupts import JOB_INTERRUPTED, STOP_ASKED, ask_to_stop

#: The sweep's process, as `pid:start_time` (start time in clock ticks after boot, from /proc).
COMMAND_ENV = "FRAMEWORK_COMMAND_PROCESS"
#: How often a job looks for the sweep's process.
POLL_S = 1.0
#: How long a job whose sweep is gone has to end KILLED before its process exits regardless.
GRACE_S = 8.0
#: The exit status of a worker whose sweep is gone (128 + SIGTERM).
EXIT_ORPHANED = 143


def start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat); None where it does not exist (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if fields[0] != "Z" else None


def mark_command_process() -> None:
    """In the command's own process: the identity its jobs' workers will watch."""
    started = start_time(os.getpid())
    if started is not None:
        os.environ[COMMAND_ENV] = f"{os.getpid()}:{started}"


def command_env() -> dict[str, str]:
    """The variable that names the command's process, for a worker that does not inherit it (a Ray's
    started before the sweep)."""
    return {COMMAND_ENV: os.environ[COMMAND_ENV]} if COMMAND_ENV in os.environ else {}


def _watched() -> tuple[int, str] | None:
    """The sweep's process this job runs for, where that is another process of this machine."""
    pid, _, started = os.environ.get(COMMAND_ENV, "").partition(":")
    if not pid.isdigit() or int(pid) == os.getpid() or start_time(int(pid)) != started:
        return None  # the command's own process, or a process of another machine
    return int(pid), started


class Watch:
    """A job's watch on the sweep's process (`Watch.start` as the job starts, `stop` as it ends):
    once that process is gone, the job gets SIGTERM, and its worker process exits when the run has
    ended KILLED (`JOB_INTERRUPTED`), or GRACE_S later at the latest. Once the sweep is stopping
    (`stop_file` exists: `stopping`), the job's run stops as at a first Ctrl-C."""

    def __init__(self, pid: int, started: str, stop_file: Path | None = None) -> None:
        self.pid, self.started, self.stop_file = pid, started, stop_file
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="sweep-watch", daemon=True).start()

    @classmethod
    def start(cls, stop_file: Path | None = None) -> Watch | None:
        """A watch where this job runs for another process of this machine (None: in the sweep's own
        process, or on another machine, or off the main thread)."""
        watched = _watched()
        if watched is None or threading.current_thread() is not threading.main_thread():
            return None
        return cls(*watched, stop_file=stop_file)

    def gone(self) -> bool:
        return start_time(self.pid) != self.started

    def stop(self, *, failed: bool) -> None:
        """The job is over: a job that failed because its sweep is gone takes its worker with it."""
        self._done.set()
        if failed and self.gone():
            os._exit(EXIT_ORPHANED)

    def _watch(self) -> None:
        while not self._done.wait(POLL_S):
            if self.stop_file is not None and not STOP_ASKED.is_set() and self.stop_file.exists():
                ask_to_stop()
            if self.gone():
                # The run stops after its step under way, or where it is if that takes long, and
                # ends KILLED with its last checkpoint.
                main = threading.main_thread().ident or 0
                signal.pthread_kill(main, signal.SIGTERM)
                if not JOB_INTERRUPTED.wait(GRACE_S / 2):
                    signal.pthread_kill(main, signal.SIGTERM)
                    JOB_INTERRUPTED.wait(GRACE_S / 2)
                os._exit(EXIT_ORPHANED)
