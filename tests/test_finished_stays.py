"""A FINISHED run resumed for more steps whose new part fails or is stopped before it logs a point is
left as it was: FINISHED, its name, budget and end time kept, so `compare` and filters still find it;
the part's end and error are tags of its own. A part that logged points is what it made of the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mlflow.tracking import MlflowClient

from framework.provenance import TOTAL_STEPS_TAG, resume_tags, run_tags

if TYPE_CHECKING:
    from framework_plugins.trackers.mlflow_session import MlflowSession


def _finished_then_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MlflowSession, str]:
    from framework_plugins.trackers.mlflow_session import MlflowSession

    monkeypatch.chdir(tmp_path)
    session = MlflowSession(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", flush_every_s=0.0)
    first = tmp_path / "first"
    run_id = session.start_run(run_name="cartpole dqn steps=1k", tags=run_tags({}, first, []))["run_id"]
    session.log_params({"total_steps": 1000})
    session.log_metrics({"eval/return_mean": 200.0}, 1000)
    assert session.end_run("FINISHED", end_time=1_000_000.0)["unsent"] == ""
    tags = resume_tags(1, tmp_path / "second", ["total_steps=2000"], 1000, 2000)
    session.start_run(run_name="cartpole dqn steps=2k", tags=tags, resume_run_id=run_id)
    return session, run_id


@pytest.mark.parametrize("status", ["FAILED", "KILLED"])
def test_a_resumed_part_that_logged_nothing_leaves_the_run_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    session, run_id = _finished_then_resumed(tmp_path, monkeypatch)
    if status == "FAILED":
        session.set_tags({"framework.error": "TimeoutError: no page connected within 2 s"})
    assert session.end_run(status, end_time=2_000_000.0)["unsent"] == ""
    run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.end_time == 1_000_000_000
    assert run.info.run_name == "cartpole dqn steps=1k" and run.data.tags[TOTAL_STEPS_TAG] == "1000"
    assert run.data.tags["framework.resume1.ended"] == status
    assert "framework.error" not in run.data.tags
    if status == "FAILED":
        assert run.data.tags["framework.resume1.error"].startswith("TimeoutError: no page connected")
    assert run.data.metrics == {"eval/return_mean": 200.0}


def test_a_resumed_part_that_logged_points_ends_the_run_as_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, run_id = _finished_then_resumed(tmp_path, monkeypatch)
    session.log_metrics({"train/loss": 0.5}, 1200)
    session.set_tags({"framework.error": "RuntimeError: CUDA out of memory"})
    assert session.end_run("FAILED", end_time=2_000_000.0)["unsent"] == ""
    run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time == 2_000_000_000
    assert run.info.run_name == "cartpole dqn steps=2k" and run.data.tags[TOTAL_STEPS_TAG] == "2000"
    assert run.data.tags["framework.error"] == "RuntimeError: CUDA out of memory"
    assert "framework.resume1.ended" not in run.data.tags


def test_a_failed_run_resumed_and_failing_again_at_once_stays_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framework_plugins.trackers.mlflow_session import MlflowSession

    monkeypatch.chdir(tmp_path)
    session = MlflowSession(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", flush_every_s=0.0)
    run_id = session.start_run(run_name="r", tags=run_tags({}, tmp_path / "a", []))["run_id"]
    session.end_run("FAILED")
    session.start_run(run_name="r", tags=resume_tags(1, tmp_path / "b", [], 0, 10), resume_run_id=run_id)
    session.set_tags({"framework.error": "ValueError: again"})
    session.end_run("FAILED")
    run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["framework.error"] == "ValueError: again"


def test_a_resumed_runs_duration_counts_its_parts_not_the_pause_between_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow's own duration of a resumed run spans the pause; the summaries' (duration_s) do not."""
    import time

    from framework_plugins.trackers.mlflow_session import MlflowSession
    from framework_plugins.trackers.sweep_child import child_from_run

    monkeypatch.chdir(tmp_path)
    session = MlflowSession(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", flush_every_s=0.0)
    began = time.time() - 1000  # ran 10 s, then stayed ended for 990 s before its resume
    tags = run_tags({}, tmp_path / "first", [])
    run_id = session.start_run(run_name="r", tags=tags, start_time=began)["run_id"]
    session.log_metrics({"eval/return_mean": 200.0}, 1000)
    assert session.end_run("FINISHED", end_time=began + 10)["unsent"] == ""
    session.start_run(
        run_name="r", tags=resume_tags(1, tmp_path / "second", [], 1000, 2000), resume_run_id=run_id
    )
    session.log_metrics({"eval/return_mean": 300.0}, 2000)
    assert session.end_run("FINISHED", end_time=time.time() + 5)["unsent"] == ""
    run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id)
    assert 985 <= float(run.data.tags["framework.paused_s"]) <= 1000
    assert (run.info.end_time - run.info.start_time) / 1000 > 1000  # MLflow's: from start to end
    assert (
        10 <= child_from_run(run, [], "eval/return_mean").duration_s <= 25
    )  # 10 s, then 5 s and the resume's
