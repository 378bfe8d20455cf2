"""A sweep through the Ray launcher that starts its own Ray leaves no session directory behind (Ray
leaves one in its temp folder at every start: a sweep a day filled /tmp/ray); one that joins a Ray
leaves that Ray's alone (tests/test_launchers.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_a_ray_launchers_own_ray_goes_with_its_session_directory(
    cli: Any, request: pytest.FixtureRequest
) -> None:
    temp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's sockets take 107 bytes at most
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    r = cli(
        "-m", "hydra/launcher=ray", "seed=1", "total_steps=256", "eval.episodes=1", "tracking=none",
        "progress=off", timeout=240, env={"RAY_TMPDIR": str(temp)},
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    assert "Started a local Ray" in r.output and "Ray is already running" not in r.output, r.output[-3000:]
    assert not list(temp.glob("**/session_*")), sorted(str(p) for p in temp.glob("**/session_*"))
