"""A Gomocup brain, `python -m framework gomocup ...`, in a subprocess the tests speak to a line at a time."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path

from framework_plugins.gomoku.rules import Gomoku
from tests.conftest import popen_cli

#: The board of the brains the tests train (9x9, five in a row).
GAME = Gomoku(9, 5)
MOVE = re.compile(r"^(\d+),(\d+)$")


class Brain:
    """`python -m framework gomocup ...` in a subprocess, spoken to a line at a time."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = popen_cli(
            "gomocup", *args, cwd=cwd, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.messages: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        # Its stderr read all along: a full pipe would block the brain's next write (its exit too).
        self._err: list[str] = []
        self._err_reader = threading.Thread(target=lambda: self._err.extend(self.process.stderr), daemon=True)  # type: ignore[arg-type]
        self._err_reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, *lines: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("".join(line + "\n" for line in lines))
        self.process.stdin.flush()

    def answer(self, timeout: float = 60) -> str:
        """The next line that is not a MESSAGE."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"the brain exited: {self.stderr()}"
            if line.startswith("MESSAGE"):
                self.messages.append(line)
                continue
            return line

    def move(self, *lines: str) -> int:
        self.send(*lines)
        answer = self.answer()
        found = MOVE.match(answer)
        assert found, answer
        return GAME.from_xy(int(found[1]), int(found[2]))

    def stderr(self) -> str:
        """All it wrote to stderr (it is killed first if it still runs)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._err_reader.join(timeout=10)
        return "".join(self._err)

    def exit_status(self, timeout: float) -> int:
        """Its exit status, once it ends within `timeout`; else a failure that shows its stderr."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the brain did not end in {timeout:g} s: {self.stderr()[-3000:]}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
