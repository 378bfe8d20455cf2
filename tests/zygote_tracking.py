"""A run's tracking process (framework_plugins.trackers.tracking_process) forked by the tests' zygote
(tests/cli_zygote.py), where MLflow and its SQL store are imported already (2 to 3 s of CPU a run
less): the command line's child asks for one over a socket of its own, passing the three pipe ends the
process reads and writes, and learns its pid and, later, its exit status. It runs
`tracking_process.main` in a session of its own, as `launch` starts it. The tracking process is the
zygote's child then, not the run's."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

#: The largest message between the zygote and a child (a tracking process's environment and arguments).
MESSAGE = 1 << 20


class TrackingLauncher:
    """In a command line's child: `tracking_process.launch`, answered by the zygote with a fork of
    itself (the one given, `fallback`, where the zygote cannot answer)."""

    def __init__(self, zygote: socket.socket, fallback: Any) -> None:
        self.zygote = zygote
        self.fallback = fallback
        self.lock = threading.Lock()
        self.started: queue.Queue[int] = queue.Queue()
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        self.gone = False
        self.reader: threading.Thread | None = None

    def launch(self, argv: list[str]) -> Any:
        ends = [os.pipe() for _ in range(3)]
        theirs = [ends[0][0], ends[1][1], ends[2][1]]  # its stdin to read, its stdout and stderr to write
        ours = [ends[0][1], ends[1][0], ends[2][0]]
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        pid = None
        with self.lock:
            if self.reader is None:
                self.reader = threading.Thread(target=self._read, daemon=True, name="zygote-tracking")
                self.reader.start()
            if not self.gone:
                try:
                    socket.send_fds(self.zygote, [json.dumps(request).encode()], theirs)
                    pid = self.started.get(timeout=30)
                except (OSError, queue.Empty):
                    pid = None
        for fd in theirs:
            os.close(fd)
        if pid is None:
            for fd in ours:
                os.close(fd)
            return self.fallback(argv)
        return ForkedTracking(self, pid, ours)

    def _read(self) -> None:
        while True:
            try:
                data = self.zygote.recv(MESSAGE)
            except OSError:
                data = b""
            if not data:
                with self.changed:
                    self.gone = True
                    self.changed.notify_all()
                return
            message = json.loads(data)
            if "exited" in message:
                with self.changed:
                    self.exits[int(message["exited"])] = int(message["code"])
                    self.changed.notify_all()
            else:
                self.started.put(int(message["pid"]))


class ForkedTracking:
    """A tracking process the zygote forked, as `subprocess.Popen` shows one to TrackingProcess:
    its pipes (text), `poll`, `wait`, `kill`, `returncode`; its exit status is the zygote's word."""

    def __init__(self, launcher: TrackingLauncher, pid: int, fds: list[int]) -> None:
        self.launcher, self.pid = launcher, pid
        self.returncode: int | None = None
        self.args = ["tracking", str(pid)]
        self.stdin = open(fds[0], "w", encoding="utf-8")  # noqa: SIM115
        self.stdout = open(fds[1], encoding="utf-8")  # noqa: SIM115
        self.stderr = open(fds[2], encoding="utf-8")  # noqa: SIM115

    def poll(self) -> int | None:
        if self.returncode is None:
            code = self.launcher.exits.get(self.pid)
            if code is None and self.launcher.gone and not _alive(self.pid):
                code = -1  # the zygote ended first: the status is nobody's to tell
            self.returncode = code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self.launcher.changed:
            self.launcher.changed.wait_for(lambda: self.poll() is not None or self.launcher.gone, timeout)
        while self.poll() is None:
            if timeout is not None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            threading.Event().wait(0.1)  # the zygote is gone: the process ends on its own
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_tracking(request: dict[str, Any], fds: list[int], held: list[Any]) -> None:
    """In a tracking process the zygote forked: `tracking_process.main` on the pipes it was given."""
    import atexit

    code = 1
    try:
        for thing in held:  # what the zygote holds: its sockets to children, its selector
            thing.close()
        os.setsid()
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        from framework_plugins.trackers import tracking_process

        tracking_process.main(request["argv"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
