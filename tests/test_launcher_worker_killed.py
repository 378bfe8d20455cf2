"""A joblib sweep one of whose worker processes is killed outright (SIGKILL, the OOM killer's): loky
stops the sweep, said in one line rather than its 40-line traceback."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import start_cli
from tests.test_launchers import PID_LOG_FORMAT, _started_by

pytestmark = pytest.mark.slow


def test_a_killed_joblib_worker_stops_the_sweep_in_one_line(tmp_path: Path) -> None:
    p = start_cli(
        "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=1,2", "total_steps=400000",
        "eval.every_steps=0", "progress=log", "log_every_s=0.5", "tracking=none", PID_LOG_FORMAT,
        cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (pids := re.findall(r"pid=(\d+) step ", _logs(tmp_path))):
            assert p.poll() is None and time.monotonic() < deadline, "no job trained within 120 s"
            time.sleep(0.2)
        worker = int(pids[0])  # a loky worker running a job
        assert _started_by(p.pid, worker, tmp_path.resolve())  # the sweep's own worker
        os.kill(worker, signal.SIGKILL)
        out = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    said = " ".join(out.split())
    assert "A worker process of the sweep's launcher died (TerminatedWorkerError: killed?)" in said, said


def _logs(root: Path) -> str:
    return "".join(f.read_text() for f in root.glob("multirun/*/*/*/framework.log"))
