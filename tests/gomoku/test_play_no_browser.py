"""`play RUN --browser` where no browser can be opened (no display) says so, rather than only the
address it would have opened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_play_with_browser_asked_and_none_to_open_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "play", "gomoku_15x15", "--browser", "--port", "0",
         "search.num_simulations=8"],
        cwd=tmp_path, env={**env, "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen, deadline = "", time.monotonic() + 180
    try:
        while "No browser could be opened" not in seen:
            line = process.stdout.readline()
            assert line and time.monotonic() < deadline, seen[-3000:]
            seen += line
    finally:
        process.send_signal(signal.SIGINT)
        seen += process.communicate(timeout=60)[0]
    assert "No browser could be opened here (--browser): open the address above in one." in seen, seen
    assert "Traceback" not in seen, seen
