"""A sweep's child resumed to a larger budget (total_steps) is a configuration of its own in the
sweep's summary, as in `compare`: its seed is not folded into its setting's statistics at the budget
the others ran."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from framework.contracts import SweepSummarySpec
from framework.provenance import TOTAL_STEPS_TAG

OBJECTIVE = "eval/return_mean"


def test_a_child_resumed_to_a_larger_budget_is_summarised_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framework_plugins.trackers.mlflow_session import MlflowSession

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "framework", flush_every_s=0.0)
    parent = session.start_parent(run_name="sweep", tags={}, params={}, start_time=time.time())
    client = MlflowClient(tracking_uri=uri)
    for lr in ("0.1", "0.01"):
        for seed in ("0", "1", "2"):
            run_id = client.create_run(
                session._experiment_id(), run_name=f"lr={lr} s{seed}", tags={"mlflow.parentRunId": parent}
            ).info.run_id
            for key, value in {"agent.lr": lr, "seed": seed, "total_steps": "3000"}.items():
                client.log_param(run_id, key, value)
            if (lr, seed) == ("0.1", "2"):  # resumed to 6000 steps: its param still says 3000
                client.set_tag(run_id, TOTAL_STEPS_TAG, "6000")
            client.log_metric(run_id, OBJECTIVE, float(lr) * 1000 + int(seed), step=3000)
            client.set_terminated(run_id, "FINISHED")
    spec = SweepSummarySpec(swept_keys=("agent.lr", "seed"), objective=OBJECTIVE, mode="max")
    found = session.end_parent(parent, "FINISHED", dataclasses.asdict(spec), end_time=time.time())
    assert "lr=0.1 total_steps=6k has a single run" in found["seeds"], found
    metrics = client.get_run(parent).data.metrics
    assert metrics[f"iqm/{OBJECTIVE}/lr 0.1 total_steps 3000"] == 100.5  # seeds 0 and 1 only
    assert metrics[f"iqm/{OBJECTIVE}/lr 0.1 total_steps 6000"] == 102
    table = Path(client.download_artifacts(parent, "sweep_summary.csv", str(tmp_path))).read_text()
    assert table.splitlines()[0].startswith("row,run,run_id,agent.lr,seed,total_steps,"), table


@pytest.mark.parametrize("jobs", [2, 3])
def test_a_stopped_grid_sweeps_parent_is_finished_once_resumes_have_finished_every_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """Stopped in its 2nd job: its parent KILLED. Once that job's resume finishes, the parent is
    FINISHED where the sweep had 2 jobs, and stays KILLED where a 3rd never started."""
    from framework_plugins.trackers.mlflow_session import MlflowSession
    from framework_plugins.trackers.sweep_parents import FINISHED_BY_TAG

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "framework", flush_every_s=0.0)
    spec = dataclasses.asdict(
        SweepSummarySpec(swept_keys=("seed",), objective=OBJECTIVE, mode="max", jobs=jobs)
    )
    parent = session.start_parent(
        run_name="sweep", tags={"framework.summary_spec": json.dumps(spec)}, params={}, start_time=time.time()
    )
    client = MlflowClient(tracking_uri=uri)
    children = []
    for seed, status in (("0", "FINISHED"), ("1", "KILLED")):
        run_id = client.create_run(
            session._experiment_id(), run_name=f"s{seed}", tags={"mlflow.parentRunId": parent}
        ).info.run_id
        client.log_param(run_id, "seed", seed)
        client.log_metric(run_id, OBJECTIVE, 1.0, step=100)
        client.set_terminated(run_id, status)
        children.append(run_id)
    session.end_parent(parent, "KILLED", spec, end_time=time.time())
    assert client.get_run(parent).info.status == "KILLED"
    client.set_terminated(children[1], "FINISHED")  # its resume finished it
    session._sweeps.resummarise(children[1])
    after = client.get_run(parent)
    assert after.info.status == ("FINISHED" if jobs == 2 else "KILLED")
    assert after.data.tags.get(FINISHED_BY_TAG) == (children[1] if jobs == 2 else None)
