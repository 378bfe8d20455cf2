"""A tracking store that cannot be written refuses the run before it starts, in one line naming the
path and what to do (issue 38, point 9).

Root writes through file modes, so as root a path is made read-only for real: a read-only bind
mount over it, else the immutable attribute (chattr +i); where neither is permitted the test says
so as a skip, never passes without having tried.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework_plugins.trackers.mlflow_session import MlflowSession
from framework_plugins.trackers.store_checks import TrackingUnavailable, check_writable
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def _tool(*command: str) -> bool:
    if shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[str]:
    """`path` (a file or a folder) read-only while the block runs; yields how it was made so."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield "chmod a-w"
        finally:
            path.chmod(mode)
        return
    if _tool("mount", "--bind", str(path), str(path)):
        if _tool("mount", "-o", "remount,bind,ro", str(path)):
            try:
                yield "a read-only bind mount"
            finally:
                # A process of the refused run may still hold the store open for a moment: lazily.
                _tool("umount", str(path)) or _tool("umount", "-l", str(path))
            return
        _tool("umount", str(path))
    if _tool("chattr", "+i", str(path)):
        try:
            yield "chattr +i"
        finally:
            _tool("chattr", "-i", str(path))
        return
    pytest.skip(f"running as root, and neither a read-only bind mount nor chattr +i is permitted on {path}")


def _writes_fail(path: Path) -> bool:
    """Whether the read-only state holds, tried for real."""
    try:
        if path.is_dir():
            (path / ".probe").write_text("x")
            (path / ".probe").unlink()
        else:
            os.close(os.open(path, os.O_RDWR))
    except OSError:
        return True
    return False


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with one finished run in experiment `framework`, its artifacts in ./mlruns."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()
    path = tmp_path / "store" / "mlflow.db"
    session = MlflowSession(f"sqlite:///{path}", "framework", flush_every_s=0.0)
    session.start_run(run_name="first", tags={"framework.run_dir": str(tmp_path / "first")})
    session.log_artifact(__file__)
    session.end_run("FINISHED")
    assert (tmp_path / "mlruns" / "1").is_dir()
    return path


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("store/mlflow.db", "the store {path} is read-only"),
        ("store", "the store's folder {path} is read-only"),
        ("mlruns/1", "the artifact folder {path} of experiment 'framework' is read-only"),
    ],
    ids=["store", "store-folder", "artifact-folder"],
)
def test_a_read_only_store_is_refused_before_the_run_in_one_line(
    store: Path, tmp_path: Path, target: str, said: str
) -> None:
    uri = f"sqlite:///{store}"
    check_writable(uri, "framework")  # writable: no refusal
    path = tmp_path / target
    with read_only(path) as how:
        assert _writes_fail(path), f"{path} is still writable under {how}"
        with pytest.raises(TrackingUnavailable):
            check_writable(uri, "framework")
        r = run_cli("total_steps=500", f"tracking.uri={uri}", cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.output[-3000:]
    assert "Traceback" not in r.output
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"Error: tracking.uri={uri}: {said.format(path=path)}"), line
    assert "Make it writable" in line or "Make the folder writable" in line
    assert "tracking=none" in line
    assert not (tmp_path / "outputs").exists()  # a refused run leaves no run directory
