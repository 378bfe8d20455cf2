"""A fighter run stopped by Ctrl-C or SIGTERM, or killed as a crash is: no game client and no
temporary directory left behind (the Python peer and a headless Chromium alike)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.conftest import descendants, require_tool
from tests.fighter.transport_checks import wait_for

pytestmark = pytest.mark.slow


#: A progress line's step.
STEP = re.compile(r"\bstep (\d+)/1000000\b")


def mentions(pid: int, path: Path) -> bool:
    try:
        return str(path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    "stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"]
)
@pytest.mark.parametrize(
    "transport_args",
    [["env.transport=python"], ["env.transport=browser", "env.headless=true"]],
    ids=["python", "headless"],
)
def test_a_stopped_or_killed_run_leaves_no_client_or_temporary_directory(
    tmp_path: Path, transport_args: list[str], stop: signal.Signals
) -> None:
    """Ctrl-C (the run stops after its step) and SIGTERM (at once): the run ends KILLED and cleans
    up; SIGKILL (as a crash): the clients notice that
    their trainer is gone (the Python peer, Chromium's guard: their standard input closes) and end,
    taking their temporary files with them."""
    if "env.headless=true" in transport_args:
        require_tool("chromium")
    tmp = Path(tempfile.mkdtemp(prefix="fw-", dir="/tmp"))  # short: Chromium's socket paths are limited
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "env=fighter", *transport_args, "env.n_envs=1", "agent=ppo",
         "total_steps=1000000", "eval.every_steps=0", "eval.at_start=false", "log_every_s=0",
         "tracking=none"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp)},
        start_new_session=True,  # a terminal of its own: Ctrl-C reaches its whole process group
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        wait_for(lambda: any("run started" in line for line in lines), 120, "the run's start")
        wait_for(lambda: len(descendants(process.pid)) > 0, 60, "the game client's start")
        # Training over the client: its steps' progress lines (log_every_s=0: one a step).
        wait_for(lambda: any(int(n) >= 3 for line in lines for n in STEP.findall(line)), 120, "training")
        children = descendants(process.pid)
        if stop == signal.SIGINT:
            os.killpg(process.pid, stop)  # as a terminal sends Ctrl-C
        else:
            process.send_signal(stop)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=10)
    output = "".join(lines)
    if stop != signal.SIGKILL:
        assert "KILLED" in output and process.returncode == 130, output[-3000:]
    else:  # nobody cleaned up in the trainer: its clients do, within seconds
        wait_for(lambda: not any(alive(pid) for pid in children), 20, "the clients' end")
        left_files = lambda: [p for p in tmp.iterdir() if not p.name.startswith("torchinductor")]  # noqa: E731
        wait_for(lambda: not left_files(), 10, "the removal of their temporary files")
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in children if alive(pid)}
    assert children and not left, (left, output[-2000:])
    # Nor anything that left the process tree on its own (Chromium's crash handlers do), found by
    # the temporary directory its command line names.
    strays = [
        pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if alive(pid) and mentions(pid, tmp)
    ]
    assert not strays, [Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in strays]
    # No profile, nothing of Chromium's or the peer's (torch's compile cache is torch's to keep).
    assert not [p for p in tmp.iterdir() if not p.name.startswith("torchinductor")]
    shutil.rmtree(tmp)
    assert "Traceback" not in output
    assert "aioice" not in output and "aiortc" not in output  # quiet libraries
