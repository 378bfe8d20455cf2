"""`python -m framework sync RUN_DIR`: the mistakes it says in one line (a folder that does not exist, a
store that does not hold the run), and an entry the store refuses passed over with the rest sent.
What it sends after a tracking server's outage: test_tracker_outage.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework_plugins.trackers.mlflow_session import MlflowSession
from tests.conftest import run_cli


def test_sync_of_a_folder_that_does_not_exist_says_so_in_one_line(tmp_path: Path) -> None:
    r = run_cli("sync", str(tmp_path / "nowhere"), cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.output
    assert (
        r.stderr.strip()
        == f"Error: {tmp_path / 'nowhere'} does not exist: give the run's directory (its `run dir` line)"
    )


def test_an_entry_the_store_refuses_is_passed_over_and_those_after_it_are_sent(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an outage: MLflow refuses a param whose value changed; the metrics after it still go."""
    monkeypatch.chdir(tmp_path)  # the store's artifacts (./mlruns) are the test's own
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "refusals", flush_every_s=0.0, outage_wait_s=5.0)
    run_id = session.start_run(run_name="r", tags={"framework.run_dir": str(tmp_path / "run")})["run_id"]
    session.log_params({"lr": 0.1})
    session.log_params({"lr": 0.2})
    session.log_params({"lr": 0.3})
    session.log_metrics({"m": 1.0}, 1)
    assert session.end_run("FINISHED")["unsent"] == ""
    said = capfd.readouterr().err
    assert said.count("refused a params entry") == 1 and "refused 2 params entries in all" in said
    run = session.client.get_run(run_id)
    assert (
        run.info.status == "FINISHED" and run.data.params == {"lr": "0.1"} and run.data.metrics == {"m": 1.0}
    )


@pytest.mark.slow
def test_sync_to_a_store_that_does_not_hold_the_run_says_which_store_to_serve(cli, tmp_path: Path) -> None:
    from framework_plugins.trackers.journal import Journal

    r = cli("total_steps=256", "eval.episodes=1", "hydra.run.dir=outputs/run")
    assert r.returncode == 0, r.output[-3000:]
    (path,) = (tmp_path / "outputs/run/tracking").glob("*.jsonl")
    journal = Journal.reopen(path)
    journal.append("tags", tags={"late": "1"})  # something left to send
    journal.close()
    r = cli("sync", "outputs/run", "--uri", f"sqlite:///{tmp_path / 'another.db'}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 1 and "Traceback" not in r.output, r.output
    assert "does not hold run" in said and "mlflow server --backend-store-uri THAT_STORE" in said, said
