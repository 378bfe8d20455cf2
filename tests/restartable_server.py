"""A real `mlflow server` on 127.0.0.1 that a test kills outright and starts again on the same port,
backend store and artifacts; a running command's output read line by line, every wait with a deadline."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from framework_plugins.trackers.ui import server_env
from tests.conftest import _health, free_port


class RestartableServer:
    """`mlflow server` on 127.0.0.1 (as tests/conftest.py's fixture starts it) that a test kills
    outright and starts again on the same port with the same backend store and artifacts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 180.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "server.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
                    "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                    "--artifacts-destination", str(self.root / "artifacts"), "--workers", "1",
                ],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root, env=server_env(),
                start_new_session=True,  # its workers die with it
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while (state := _health(self.uri)) != "up":
            log_tail = (self.root / "server.log").read_text(errors="replace")[-2000:]
            assert self.process.poll() is None, f"mlflow server exited ({state}):\n{log_tail}"
            assert time.monotonic() < deadline, f"mlflow server not up within {timeout_s:.0f} s:\n{log_tail}"
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to the server and its workers: gone at once, as a crashed machine's would be."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _health(self.uri) != "down":
            assert time.monotonic() < deadline, "the killed server still answers"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)


class Output:
    """A running command's output lines, read as they come; every wait has a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, found: Callable[[str], bool], what: str, timeout_s: float = 180.0) -> str:
        """The next line for which `found` holds."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {what} within {timeout_s:.0f} s:\n{self.text[-3000:]}") from None
            if line is None:
                raise AssertionError(f"the run ended before {what}:\n{self.text[-3000:]}")
            self.lines.append(line)
            if found(line):
                return line

    def finish(self, timeout_s: float = 600.0) -> int:
        code = self.process.wait(timeout=timeout_s)
        while (line := self._queue.get(timeout=30)) is not None:
            self.lines.append(line)
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)
