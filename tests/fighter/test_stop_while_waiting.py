"""A fighter run stopped by Ctrl-C or SIGTERM while it waits for its game page (before its first step,
or for a page that went away) ends at once, KILLED: the wait had no step for the stop to land after,
and ran its whole timeout (90 s for Ctrl-C; SIGTERM's 20 s grace)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import start_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_run_waiting_for_its_page_stops_at_once(tmp_path: Path, stop: signal.Signals) -> None:
    p = start_cli(
        "env=fighter", "agent=ppo", "env.transport=browser", "env.headless=false", "env.open_browser=false",
        "env.connect_timeout_s=120", "total_steps=3000", "hydra.run.dir=outputs/run", cwd=tmp_path,
    )  # fmt: skip
    assert p.stdout is not None
    seen, deadline = "", time.monotonic() + 120
    while "waiting for its page" not in seen:
        line = p.stdout.readline()
        assert line and time.monotonic() < deadline, seen[-3000:]
        seen += line
    sent = time.monotonic()
    p.send_signal(stop)
    out = seen + p.communicate(timeout=120)[0]
    took = time.monotonic() - sent
    assert p.returncode == 130, out[-3000:]
    assert took < 15, f"{took:.1f} s to stop: {out[-2000:]}"  # was 90 s (Ctrl-C), 20 s (SIGTERM)
    assert "Run KILLED at step 0 of 3000." in out and "Traceback" not in out, out[-3000:]
