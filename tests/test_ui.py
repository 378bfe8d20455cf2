"""`python -m framework ui`: the MLflow UI on the runs' store, opened on the experiment's runs; a second
call finds the server running; Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from framework_plugins.trackers.mlflow_session import MlflowSession
from tests.conftest import chromium_env, run_cli

OPEN = re.compile(r"^  open\s+(http://127\.0\.0\.1:(\d+)/\S+)$", re.MULTILINE)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with one run named `first-run` in the experiment `framework`; the ui's records in tmp."""
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path / "cache"))
    session = MlflowSession(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", flush_every_s=1.0)
    session.start_run(run_name="first-run", tags={})
    session.log_metrics({"eval/return_mean": 1.0}, 1)
    session.end_run("FINISHED")
    return tmp_path


def _start(cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "framework", "ui", "--no-browser"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def _address(process: subprocess.Popen[str], timeout: float = 240) -> str:
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        found = OPEN.search(seen)
        if found:
            return found.group(1)
    raise AssertionError(f"no address printed: {seen}")


@pytest.mark.slow
def test_ui_serves_the_store_opens_the_runs_and_a_second_call_finds_it(store: Path) -> None:
    first = _start(store)
    try:
        address = _address(first)
        assert address.endswith("/runs?workflowType=machine_learning") and "#/experiments/1/" in address
        with urllib.request.urlopen(address.split("#")[0], timeout=10) as page:
            assert page.status == 200
        # The page lands on the runs, in the model-training view, in a real browser.
        if shutil.which("chromium"):
            dom = subprocess.run(
                ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run", f"--user-data-dir={store / 'chromium'}", "--virtual-time-budget=20000",
                 "--dump-dom", address],
                capture_output=True, text=True, timeout=120, env=chromium_env(),
            ).stdout  # fmt: skip
            assert "first-run" in dom and "Evaluation runs" not in dom
        # A second call, from anywhere the store is: the same server, nothing started.
        second = run_cli("ui", "--no-browser", "--run", "nope", cwd=store, timeout=120)
        assert second.returncode == 0, second.output
        assert "running already" in second.stdout and address.split("#")[0] in second.stdout
    finally:
        first.send_signal(signal.SIGINT)
        try:
            out, _ = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
    assert first.returncode == 0, out
    # The server went with it, and so did its record.
    with pytest.raises(OSError):
        urllib.request.urlopen(address.split("#")[0], timeout=5)
    assert not list((store / "cache").glob("ui-*.json"))


def test_ui_without_a_store_says_how_to_make_one(cli: Any, tmp_path: Path) -> None:
    r = cli("ui", "--no-browser")
    assert r.returncode == 1 and "Traceback" not in r.output
    assert "no runs at" in r.stderr and "python -m framework" in r.stderr
    assert not (tmp_path / "mlflow.db").exists()
    wrong = cli("ui", "env=cartpole")
    assert (
        wrong.returncode == 1
        and "`ui` takes tracking.uri=... and tracking.experiment=... only" in wrong.stderr
    )
