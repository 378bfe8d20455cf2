"""A Gomocup brain in a long search stops when its manager goes (its input ends) or on Ctrl-C and
SIGTERM, at once: it searched on for ever once the manager had gone, and a signal waited up to 78 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LONG = "search.num_simulations=5000000"  # hours on this machine


def _thinking(tmp_path: Path) -> subprocess.Popen[str]:
    brain = subprocess.Popen(
        [sys.executable, "-m", "framework", "gomocup", "gomoku_15x15", LONG],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert brain.stdin is not None and brain.stdout is not None
    brain.stdin.write("START 15\n")
    brain.stdin.flush()
    assert brain.stdout.readline().strip() == "OK"
    before = _cpu_s(brain.pid)
    brain.stdin.write("BEGIN\n")
    brain.stdin.flush()
    deadline = time.monotonic() + 60
    while _cpu_s(brain.pid) < before + 1.0:  # searching: a second of CPU spent on BEGIN, however loaded
        assert brain.poll() is None and time.monotonic() < deadline, "the brain did not search"
        time.sleep(0.05)
    return brain


def _cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user and system, /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_brain_whose_manager_has_gone_stops_searching_answers_and_exits(tmp_path: Path) -> None:
    brain = _thinking(tmp_path)
    assert brain.stdin is not None and brain.stdout is not None and brain.stderr is not None
    brain.stdin.close()
    try:
        brain.wait(timeout=60)
    finally:
        brain.kill()
    assert brain.returncode == 0, brain.stderr.read()[-3000:]
    lines = brain.stdout.read().splitlines()
    assert lines[0].startswith("MESSAGE value") and "," in lines[1], lines


def test_a_signal_stops_a_long_search_at_once(tmp_path: Path) -> None:
    """SIGTERM here; Ctrl-C raises the same KeyboardInterrupt (gomoku.commands._stop_on_signals)."""
    brain = _thinking(tmp_path)
    assert brain.stderr is not None
    sent = time.monotonic()
    brain.send_signal(signal.SIGTERM)
    try:
        brain.wait(timeout=60)
    finally:
        brain.kill()
    said = brain.stderr.read()
    assert brain.returncode == 130, said[-3000:]  # not an abort (-6) as a search thread went on
    assert time.monotonic() - sent < 15 and "terminate called" not in said, said[-3000:]
