"""A sweep's job whose tracking server does not answer as it starts (it is restarting) waits for it, up
to tracking.outage_wait_s, instead of failing the job: the server answered for its sweep. A single
run, or a sweep's first check, is refused at once; a refusal says only the wait that happened."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.contracts.sweeper import PARENT_RUN_ENV
from framework_plugins.trackers.mlflow_tracker import MlflowConfig, MlflowTracker
from framework_plugins.trackers.store_checks import TrackingUnavailable, check_reachable
from tests.conftest import free_port


class Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        """No line per request: the test's output stays its own."""


@pytest.fixture
def late_server() -> Iterator[tuple[str, threading.Event]]:
    """A server on a free port that begins to answer once the event is set (refused until then)."""
    port, ready, done = free_port(), threading.Event(), threading.Event()

    def serve() -> None:
        ready.wait()
        if done.is_set():
            return
        with http.server.ThreadingHTTPServer(("127.0.0.1", port), Answering) as server:
            server.timeout = 0.2
            while not done.is_set():
                server.handle_request()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", ready
    done.set()
    ready.set()
    thread.join(10)


def test_a_job_waits_for_a_server_that_comes_back_and_says_so(
    late_server: tuple[str, threading.Event], caplog: pytest.LogCaptureFixture
) -> None:
    uri, ready = late_server
    threading.Timer(0.8, ready.set).start()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="framework.tracking"):
        check_reachable(uri, timeout_s=1.0, patience_s=60.0)
    assert 0.8 <= time.monotonic() - began < 30
    said = [record.getMessage() for record in caplog.records]
    assert any(
        "does not answer" in line and "waiting up to 60 s (tracking.outage_wait_s)" in line for line in said
    )
    assert any(line == f"The MLflow tracking server {uri} answers again: the job starts" for line in said)


def test_a_job_whose_server_stays_down_is_refused_saying_how_long_it_waited() -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(TrackingUnavailable) as refused:
        check_reachable(uri, timeout_s=1.0, patience_s=0.6)
    assert time.monotonic() - began >= 0.6
    assert "does not answer (" in str(refused.value)
    assert "in the 0.6 s this job waited for it (tracking.outage_wait_s)" in str(refused.value)


def test_a_refused_connection_is_refused_at_once_and_no_wait_is_claimed() -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(TrackingUnavailable) as refused:
        check_reachable(uri, timeout_s=15.0)
    assert time.monotonic() - began < 10
    assert "Connection refused" in str(refused.value) and "within" not in str(refused.value)


@pytest.mark.parametrize("in_a_sweep", [True, False])
def test_the_tracker_waits_only_as_a_sweeps_job(monkeypatch: pytest.MonkeyPatch, in_a_sweep: bool) -> None:
    if in_a_sweep:
        monkeypatch.setenv(PARENT_RUN_ENV, "0123456789abcdef0123456789abcdef")
    else:
        monkeypatch.delenv(PARENT_RUN_ENV, raising=False)
    uri = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(TrackingUnavailable) as refused:
        MlflowTracker(MlflowConfig(uri=uri, outage_wait_s=0.6))
    waited = time.monotonic() - began
    assert ("this job waited" in str(refused.value)) is in_a_sweep
    assert waited >= 0.6 or not in_a_sweep  # outside a sweep: refused at once (the message says no wait)


def test_a_sweeps_end_sends_the_journal_of_a_job_that_ended_while_its_server_was_down(tmp_path: Path) -> None:
    """Its server back by the sweep's end, a job whose end its journal holds is sent, not ended FAILED,
    and the sweep's summary counts it; a job that left no end is ended by the parent as before."""
    from framework_plugins.trackers.journal import Journal, RunRecord
    from framework_plugins.trackers.mlflow_session import MlflowSession
    from framework_plugins.trackers.sweep_parents import ENDED_BY_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "e", flush_every_s=0.0, outage_wait_s=1.0, finish_timeout_s=300.0)
    parent = session.start_parent(run_name="sweep", tags={}, params={})
    client, children = session.client, {}
    for name in ("journaled", "killed"):
        run = client.create_run(
            session._experiment_id(),
            run_name=name,
            tags={"mlflow.parentRunId": parent, "framework.run_dir": str(tmp_path / name)},
        )
        children[name] = run.info.run_id
    record = RunRecord(uri, "e", session._experiment_id(), children["journaled"])
    journal = Journal.open(tmp_path / "journaled" / "tracking", record)
    journal.append("metrics", metrics={"eval/return_mean": 420.0}, step=6000, time_ms=1_000_000)
    journal.append("end", status="FINISHED", end_time_ms=1_000_500)
    journal.close()
    session.end_parent(parent, "FINISHED", None)
    journaled, killed = (client.get_run(children[name]) for name in ("journaled", "killed"))
    assert journaled.info.status == "FINISHED" and journaled.info.end_time == 1_000_500
    assert journaled.data.metrics == {"eval/return_mean": 420.0}
    assert ENDED_BY_TAG not in journaled.data.tags
    assert killed.info.status == "FAILED" and killed.data.tags[ENDED_BY_TAG] == "sweep parent"
    again = Journal.reopen(journal.path)
    assert again.all_sent()
    again.close()
