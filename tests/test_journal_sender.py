"""A tracking process's sender of a run's journal where its notices go unread (its training process
killed), its journal's progress cannot be written (a full disk), or the store does not answer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from framework_plugins.trackers.mlflow_session import MlflowSession


class _GoneReader:
    """A stderr whose reader is gone (the training process was killed): every write is EPIPE."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def _session_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MlflowSession, str]:
    """A session with a run started, whose journal cannot write what it sent (a full disk)."""
    from framework_plugins.trackers import journal

    monkeypatch.chdir(tmp_path)
    session = MlflowSession(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "full",
        flush_every_s=0.0,
        outage_wait_s=1.0,
        finish_timeout_s=300.0,
    )
    run_id = session.start_run(run_name="r", tags={"framework.run_dir": str(tmp_path / "run")})["run_id"]

    def disk_full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal.os, "replace", disk_full)
    return session, run_id


def test_a_sender_whose_notices_nobody_reads_goes_on_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its training process killed, a tracking process's notices fail (EPIPE): its sender goes on, and
    ending the run neither stops at the first notice nor waits out finish_timeout_s for a dead sender."""
    session, run_id = _session_on_a_full_disk(tmp_path, monkeypatch)  # a notice: progress not written
    monkeypatch.setattr(sys, "stderr", _GoneReader())
    session.log_metrics({"m": 1.0}, 1)
    started = time.monotonic()
    assert session.end_run("KILLED")["unsent"] == ""
    assert time.monotonic() - started < 60, "it waited for a sender that had died"
    run = session.client.get_run(run_id)
    assert run.info.status == "KILLED" and run.data.metrics == {"m": 1.0}


def test_a_journal_whose_progress_cannot_be_written_sends_each_point_once_and_ends(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk under the run's journal: what was sent is not sent again, and the run's end is sent
    without waiting out finish_timeout_s; the failure is said once."""
    session, run_id = _session_on_a_full_disk(tmp_path, monkeypatch)
    for step in range(1, 4):
        session.log_metrics({"m": float(step)}, step)
    started = time.monotonic()
    assert session.end_run("FINISHED")["unsent"] == ""
    assert time.monotonic() - started < 60
    history = session.client.get_metric_history(run_id, "m")
    assert sorted(m.step for m in history) == [1, 2, 3], "a point was sent again"
    assert session.client.get_run(run_id).info.status == "FINISHED"
    assert capfd.readouterr().err.count("No space left on device") == 1


def test_a_stopped_run_waits_seconds_not_its_outage_wait_for_a_store_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM with the server down: the run waited tracking.outage_wait_s (30 s) before it ended, as
    long as a scheduler waits before its SIGKILL, which then cut its last lines (the sync command)."""
    from framework_plugins.trackers.journal_sender import JournalSender

    monkeypatch.chdir(tmp_path)
    session = MlflowSession(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "stopped", flush_every_s=0.0, outage_wait_s=60.0
    )
    session.start_run(run_name="r", tags={"framework.run_dir": str(tmp_path / "run")})

    def store_down(self: JournalSender, group: list[object]) -> None:
        raise ConnectionError("Connection refused")

    monkeypatch.setattr(JournalSender, "_send", store_down)
    session.log_metrics({"m": 1.0}, 1)
    started = time.monotonic()
    unsent = session.end_run("KILLED")["unsent"]
    assert time.monotonic() - started < 20
    assert "the run's end (KILLED)" in unsent  # kept, for `sync`


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (OSError(28, "No space left on device", "/store/mlflow.db"), "No space left on device"),
        (ConnectionError("[Errno 111] Connection refused"), "Connection refused"),
    ],
)
def test_a_store_that_does_not_answer_is_said_in_its_reasons_words(error: BaseException, said: str) -> None:
    from framework_plugins.trackers.journal_sender import short_reason

    assert short_reason(error) == said  # "No space left on device:" had the colon before the path


def test_a_server_that_does_not_answer_as_a_run_starts_is_said_in_a_short_whole_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from framework_plugins.trackers.mlflow_session import MlflowSession
    from tests.conftest import free_port

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    session = MlflowSession(f"http://127.0.0.1:{free_port()}", "framework", flush_every_s=0.0)
    with pytest.raises(ConnectionError) as refused:
        session._experiment_id()
    assert str(refused.value) == "the tracking store does not answer (Connection refused)"
