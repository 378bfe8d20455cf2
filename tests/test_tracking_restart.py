"""A run's tracking process that dies mid-run (the OOM killer's SIGKILL) is started again on the run:
the run goes on, and every point it logged reaches the store (it failed the run, the points the dead
process had not sent left in the journal until `sync`)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from framework_plugins.trackers.mlflow_tracker import MlflowConfig, MlflowTracker


def test_a_killed_tracking_process_is_started_again_and_nothing_the_run_logged_is_lost(
    tmp_path: Path,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(MlflowConfig(uri=uri))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    tracker.start_run(run_name="killed-tracking", tags={"framework.run_dir": str(run_dir)})
    run_id = tracker.run_id
    try:
        for step in range(1, 4):
            tracker.log_metrics({"train/loss": 1.0 / step}, step)
        # Killed once it has taken them (in its journal): what is still in the pipe to it is gone with it.
        journal = run_dir / "tracking" / f"{run_id}.jsonl"
        deadline = time.monotonic() + 30
        while not journal.is_file() or journal.read_text().count('"op": "metrics"') < 3:
            assert time.monotonic() < deadline, "the tracking process never journaled the points"
            time.sleep(0.05)
        dead = tracker._process.process
        os.kill(dead.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while dead.poll() is None:
            assert time.monotonic() < deadline, "the tracking process outlived SIGKILL"
            time.sleep(0.05)
        for step in range(4, 7):  # raised "The tracking process is not running (exit code -9)"
            tracker.log_metrics({"train/loss": 1.0 / step}, step)
        tracker.set_tags({"after": "the restart"})
        tracker.end_run("FINISHED")
    finally:
        tracker.close()
    assert tracker._restarts == 1 and tracker._process.process is not dead
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    history = MlflowClient(tracking_uri=uri).get_metric_history(run_id, "train/loss")
    assert run.info.status == "FINISHED" and run.data.tags["after"] == "the restart"
    assert sorted(m.step for m in history) == [1, 2, 3, 4, 5, 6], history
