"""Tracking I/O in a process of its own: the training loop never waits on a database or server.

The training process writes JSON-line requests to the child's stdin (from a writer thread,
so a slow store never blocks a step) and reads JSON-line answers from its stdout. One-way
requests (metrics, params, tags, artifacts) return at once; requests that need an answer
wait for it with a timeout. (The session keeps a run's writes in the run's journal before it sends
them: see mlflow_session.) The child runs in its own session, so Ctrl-C in a terminal stops
training but not the tracking that must record the run as KILLED; when the training process
dies (SIGTERM, SIGKILL), the child sees its stdin close and ends the open run FAILED, and a sweep's
open parent run KILLED, with its summary.

    python -m framework_plugins.trackers.tracking_process MODULE:FACTORY JSON_ARGS [JSON_KWARGS]
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

CLOSE = "__close__"
#: The signal that tells the tracking process to stop waiting for its store (a request could not get
#: through: the process serves one at a time, and is waiting in one).
STOP_WAITING = signal.SIGUSR1

log = logging.getLogger("framework.tracking")


class TrackingError(RuntimeError):
    """A tracking request that failed, timed out, or found the tracking process gone."""


class TrackingProcess:
    """Runs `factory(*args, **kwargs)` ("module:attr") in a child process and forwards method calls to it."""

    def __init__(self, factory: str, *args: Any, **kwargs: Any) -> None:
        self.process = launch([factory, json.dumps(args), json.dumps(kwargs)])
        self._seq = 0
        self._outbox: queue.Queue[str | None] = queue.Queue()
        self._answers: dict[int, tuple[bool, Any]] = {}
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._write, daemon=True, name="tracking-writer").start()
        threading.Thread(target=self._read, daemon=True, name="tracking-reader").start()
        threading.Thread(target=self._relay_stderr, daemon=True, name="tracking-stderr").start()

    def send(self, method: str, *args: Any, **kwargs: Any) -> None:
        """A one-way request; a failure is reported on the tracking process's stderr."""
        self._put(method, args, kwargs, reply=False)

    def ask(self, method: str, *args: Any, **kwargs: Any) -> int:
        """Send a request whose answer `wait` collects later."""
        return self._put(method, args, kwargs, reply=True)

    def call(self, method: str, *args: Any, timeout: float, **kwargs: Any) -> Any:
        return self.wait(self.ask(method, *args, **kwargs), timeout=timeout)

    def wait(self, ticket: int, *, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while ticket not in self._answers:
            try:
                answer = self._inbox.get(timeout=0.1)
                self._answers[int(answer["id"])] = (bool(answer["ok"]), answer["value"])
            except queue.Empty:
                if self.process.poll() is not None:
                    raise TrackingError(
                        f"The tracking process exited (code {self.process.returncode}) before answering"
                    ) from None
                if time.monotonic() > deadline:
                    raise TrackingError(
                        f"No answer from the tracking process within {timeout:.0f} s"
                    ) from None
        ok, value = self._answers.pop(ticket)
        if not ok:
            raise TrackingError(value)
        return value

    def stop_waiting(self) -> None:
        """Tell the process to wait for its store no longer (the run was stopped as its end waited)."""
        with contextlib.suppress(OSError):
            self.process.send_signal(STOP_WAITING)

    def close(self, timeout: float = 30.0) -> None:
        """Ask the process to flush and exit; once it has answered, nothing is left to wait for. A
        process asked nothing (a run refused before it was tracked) has nothing to flush: it ends at
        once, its start (MLflow's import, a second or more) not waited for."""
        if self.process.poll() is None and self._seq == 0:
            self.process.kill()
        elif self.process.poll() is None:
            try:
                self.call(CLOSE, timeout=timeout)
            except TrackingError:
                self.process.kill()
        self._outbox.put(None)
        # Its interpreter shutdown (half a second with MLflow loaded) need not hold up ours.
        threading.Thread(target=self.process.wait, daemon=True, name="tracking-reaper").start()

    def _put(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, reply: bool) -> int:
        if self.process.poll() is not None:
            raise TrackingError(f"The tracking process is not running (exit code {self.process.returncode})")
        self._seq += 1
        message = {"id": self._seq, "method": method, "args": args, "kwargs": kwargs, "reply": reply}
        self._outbox.put(json.dumps(message, default=_encode))
        return self._seq

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        while (line := self._outbox.get()) is not None:
            try:
                stdin.write(line + "\n")
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return
        with contextlib.suppress(OSError):
            stdin.close()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            with contextlib.suppress(ValueError):
                self._inbox.put(json.loads(line))

    def _relay_stderr(self) -> None:
        """What the tracking process prints becomes log records here, shown like the run's own."""
        stderr = self.process.stderr
        assert stderr is not None
        with contextlib.suppress(ValueError, OSError):
            for line in stderr:
                if line.strip():
                    log.warning(line.rstrip())


def launch(argv: list[str]) -> subprocess.Popen[str]:
    """The tracking process: `python -m framework_plugins.trackers.tracking_process ARGV` in a session
    of its own, its stdin, stdout and stderr text pipes. (The tests' zygote puts a fork of
    itself in its place: tests/zygote_tracking.py.)"""
    return subprocess.Popen(
        [sys.executable, "-m", __name__, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        start_new_session=True,
    )


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"Cannot send {type(value).__name__} to the tracking process")


def serve(
    factory: str, args: list[Any], requests: TextIO, answers: TextIO, kwargs: dict[str, Any] | None = None
) -> None:
    """The tracking process: build the session, then serve requests until closed or orphaned. The
    session paces its own writes (a run's are sent from its journal by a thread of its own)."""
    module, _, attr = factory.partition(":")
    session = getattr(importlib.import_module(module), attr)(*args, **(kwargs or {}))
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in requests:
            lines.put(line)
        lines.put(None)  # stdin closed: the training process is gone

    threading.Thread(target=read, daemon=True).start()
    if hasattr(session, "stop_waiting") and threading.current_thread() is threading.main_thread():
        # From the training process, stopped: it waits for no store (TrackingProcess.stop_waiting)
        signal.signal(STOP_WAITING, lambda signum, frame: session.stop_waiting())
    failures: dict[str, int] = {}
    while True:
        line = lines.get()
        if line is None:
            _guarded(lambda: session.abandon("the training process ended without ending its run"))
            return
        request = json.loads(line)
        if request["method"] == CLOSE:
            _guarded(lambda: session.abandon("tracking was closed before the run was ended"))
            _report_repeats(failures)
            _answer(answers, request["id"], True, None)
            return
        try:
            value, ok = getattr(session, request["method"])(*request["args"], **request["kwargs"]), True
        except Exception as e:
            value, ok = f"{type(e).__name__}: {e}", False
            if not request["reply"]:
                _report_failure(failures, request["method"], value)
        if request["reply"]:
            _answer(answers, request["id"], ok, value)


def _report_failure(failures: dict[str, int], method: str, error: str) -> None:
    """The first failure of each one-way request is printed; repeats are counted, not repeated."""
    failures[method] = failures.get(method, 0) + 1
    if failures[method] == 1:
        print(
            f"tracking: {method} failed: {error} (repeats are counted, not shown)",
            file=sys.stderr,
            flush=True,
        )


def _report_repeats(failures: dict[str, int]) -> None:
    for method, count in failures.items():
        if count > 1:
            print(f"tracking: {method} failed {count} times in all", file=sys.stderr, flush=True)


def _answer(answers: TextIO, seq: int, ok: bool, value: Any) -> None:
    answers.write(json.dumps({"id": seq, "ok": ok, "value": value}, default=_encode) + "\n")
    answers.flush()


def _guarded(fn: Any) -> None:
    try:
        fn()
    except Exception as e:
        print(f"tracking: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    """The tracking process, given `launch`'s ARGV (the command line's by default)."""
    argv = sys.argv[1:] if argv is None else argv
    # Answers get the real stdout; anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    kwargs = json.loads(argv[2]) if len(argv) > 2 else {}
    serve(argv[0], json.loads(argv[1]), sys.stdin, answers, kwargs)


if __name__ == "__main__":
    main()
