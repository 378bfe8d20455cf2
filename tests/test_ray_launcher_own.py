"""A sweep through the Ray launcher that starts its own Ray leaves no session directory behind (Ray
leaves one in its temp folder at every start: a sweep a day filled /tmp/ray); one that joins a Ray
leaves that Ray's alone (tests/test_ray_launcher.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_a_ray_launchers_own_ray_goes_with_its_session_directory(
    cli: Any, request: pytest.FixtureRequest
) -> None:
    temp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's sockets take 107 bytes at most
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    done = threading.Event()
    niceness: dict[int, int] = {}  # of each worker process of that Ray's, as it was seen
    watcher = threading.Thread(target=_watch_workers, args=(f"RAY_TMPDIR={temp}", niceness, done))
    watcher.start()
    try:
        r = cli(
            "-m", "hydra/launcher=ray", "seed=1", "total_steps=256", "eval.episodes=1", "tracking=none",
            "progress=off", timeout=240, env={"RAY_TMPDIR": str(temp)},
        )  # fmt: skip
    finally:
        done.set()
        watcher.join()
    assert r.returncode == 0, r.output[-3000:]
    assert "Started a local Ray" in r.output and "Ray is already running" not in r.output, r.output[-3000:]
    assert not list(temp.glob("**/session_*")), sorted(str(p) for p in temp.glob("**/session_*"))
    # Its workers, the job's among them, run at the sweep's own priority, not Ray's nice 15: beside
    # any other work, a job at nice 15 got a few percent of a core.
    assert niceness and set(niceness.values()) == {0}, niceness


def _watch_workers(environ: str, niceness: dict[int, int], done: threading.Event) -> None:
    """The niceness of each Ray worker process (`ray::...`) whose environment holds `environ`."""
    wanted = environ.encode() + b"\0"
    while not done.wait(0.05):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if not f.read().startswith(b"ray::"):
                        continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if wanted not in f.read() + b"\0":
                        continue
                with open(f"/proc/{pid}/stat") as f:
                    niceness[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[16])
            except OSError:  # ended meanwhile
                continue
