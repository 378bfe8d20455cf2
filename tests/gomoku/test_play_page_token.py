"""`python -m framework play`, a real process serving the shipped 15x15 agent: its token in no line
of its stderr (where Python writes aiohttp's errors when nothing else configured logging), whatever
requests carry it, with either of aiohttp's HTTP parsers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.token_leaks import exchange, hostile_requests, percent_encoded, token_traces

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("parser", ["c", "python"])
def test_play_writes_no_part_of_its_token_to_stderr(tmp_path: Path, parser: str) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if parser == "python":
        env["AIOHTTP_NO_EXTENSIONS"] = "1"  # the pure-Python parser, whose messages quote differently
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "framework",
            "play",
            "gomoku_15x15",
            "--no-browser",
            "search.num_simulations=8",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    stderr: list[str] = []
    assert process.stderr is not None
    reader = threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the one place the token is said: the address to open
        found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        assert found, line + "".join(stderr)
        port, token = int(found[1]), found[2]
        for data in hostile_requests("/api/state", token):
            answer = exchange(port, data)
            assert not answer or re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer[:200]
        for form in (token, percent_encoded(token, every=2)):  # the page still opens with its token
            request = f"GET /api/state?token={form} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            answer = exchange(port, request.encode(), half_close=False)
            assert answer.startswith(b"HTTP/1.1 200 ") and b'"board_size": 15' in answer, answer[:300]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    reader.join(timeout=30)
    said = "".join(stderr)
    assert "Error handling request" in said  # aiohttp's errors were written, one line each
    assert "Traceback" not in said
    assert not [line for line in said.splitlines() if token_traces(line, token)]
