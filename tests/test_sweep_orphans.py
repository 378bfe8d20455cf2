"""A sweep ends every run it made: a child still RUNNING when the sweep ends (its job was killed with its
tracker) ends as the sweep did; a sweep whose process is killed (SIGTERM) has its parent ended KILLED,
with its summary, by the parent's tracking process."""

from __future__ import annotations

import csv
import dataclasses
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from framework.contracts import SweepSummarySpec
from framework.contracts.tracker import SUMMARY_SPEC_TAG
from framework.run import EXIT_KILLED
from plugins.trackers import mlflow_session
from plugins.trackers.mlflow_session import ENDED_BY_TAG, MlflowSession
from plugins.trackers.tracking_process import TrackingProcess
from tests.conftest import start_cli

OBJECTIVE = "eval/return_mean"
SPEC = SweepSummarySpec(swept_keys=("seed",), objective=OBJECTIVE, mode="max")
EXPERIMENT = "orphans"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite store for the tests here (creating one takes seconds), its artifacts beside it."""
    folder = tmp_path_factory.mktemp("orphans")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri).create_experiment(EXPERIMENT, artifact_location=str(folder / "artifacts"))
    return uri


def make_children(
    client: MlflowClient, experiment: str, parent: str, statuses: dict[str, str]
) -> dict[str, str]:
    """A child per seed, ended as `statuses` says (RUNNING: left so); their ids by seed."""
    ids = {}
    for seed, status in statuses.items():
        run = client.create_run(experiment, run_name=f"seed={seed}", tags={"mlflow.parentRunId": parent})
        client.log_param(run.info.run_id, "seed", seed)
        client.log_metric(run.info.run_id, OBJECTIVE, float(seed), step=1)
        if status != "RUNNING":
            client.set_terminated(run.info.run_id, status)
        ids[seed] = run.info.run_id
    return ids


@pytest.mark.parametrize(
    ("sweep_status", "orphan_status"), [("KILLED", "KILLED"), ("FAILED", "FAILED"), ("FINISHED", "FAILED")]
)
def test_a_child_still_running_when_the_sweep_ends_ends_as_the_sweep_did(
    store: str, tmp_path: Path, sweep_status: str, orphan_status: str
) -> None:
    uri = store
    session = MlflowSession(uri, EXPERIMENT, flush_every_s=0.0)
    parent = session.start_parent(run_name="sweep seed=1,2,3", tags={}, params={}, start_time=time.time())
    client = MlflowClient(tracking_uri=uri)
    ids = make_children(
        client, session._experiment_id(), parent, {"1": "FINISHED", "2": "RUNNING", "3": "FAILED"}
    )

    ended_at = time.time()
    found = session.end_parent(parent, sweep_status, dataclasses.asdict(SPEC), end_time=ended_at)

    orphan = client.get_run(ids["2"])
    assert orphan.info.status == orphan_status and orphan.data.tags[ENDED_BY_TAG] == "sweep parent"
    assert orphan.info.end_time == int(ended_at * 1000)
    for seed, status in (("1", "FINISHED"), ("3", "FAILED")):  # ended by their own trackers: left as they are
        run = client.get_run(ids[seed])
        assert run.info.status == status and ENDED_BY_TAG not in run.data.tags
    assert client.get_run(parent).info.status == sweep_status
    # The summary shows how the orphan ended, not RUNNING.
    expected = {"FINISHED": 1, "FAILED": 1}
    expected[orphan_status] = expected.get(orphan_status, 0) + 1
    assert found["statuses"] == expected
    table = Path(client.download_artifacts(parent, "sweep_summary.csv", str(tmp_path)))
    rows = {row["run"]: row for row in csv.DictReader(table.open(encoding="utf-8"))}
    assert rows["seed=2"]["status"] == orphan_status


def tracking_process(uri: str, grace_s: float) -> TrackingProcess:
    """The tracking process a sweep's parent gets (MlflowTracker's), with a grace of `grace_s`."""
    return TrackingProcess(
        "framework_plugins.trackers.mlflow_session:MlflowSession", uri, EXPERIMENT, 0.0, grace_s
    )


def start_parent(process: TrackingProcess) -> str:
    tags = {SUMMARY_SPEC_TAG: json.dumps(dataclasses.asdict(SPEC))}
    parent: str = process.call(
        "start_parent", run_name="sweep seed=1,2", tags=tags, params={}, start_time=time.time(), timeout=120
    )
    return parent


def orphan_the_tracking_process(process: TrackingProcess) -> None:
    """What the death of the sweep's process does to its tracking process: its stdin closes."""
    process._outbox.put(None)
    process.process.wait(timeout=120)


def test_a_sweep_whose_process_is_gone_has_its_parent_ended_killed_with_its_summary(store: str) -> None:
    uri = store
    process = tracking_process(uri, grace_s=0.5)
    parent = start_parent(process)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_run(parent).info.experiment_id
    ids = make_children(client, experiment, parent, {"1": "FINISHED", "2": "RUNNING"})

    orphan_the_tracking_process(process)

    run = client.get_run(parent)
    assert run.info.status == "KILLED" and run.info.end_time is not None
    assert run.data.tags[ENDED_BY_TAG] == mlflow_session.PARENT_ABANDONED
    assert {"sweep_summary.csv", "sweep_summary.html"} <= {a.path for a in client.list_artifacts(parent)}
    assert run.data.tags["framework.best_child"] == "seed=1"  # the best of those that finished
    orphan = client.get_run(ids["2"])
    assert orphan.info.status == "KILLED" and orphan.data.tags[ENDED_BY_TAG] == "sweep parent"
    assert client.get_run(ids["1"]).info.status == "FINISHED"


def test_the_parent_leaves_a_child_to_its_own_tracker_while_that_ends_it(store: str) -> None:
    """The sweep's process and its job's went together: the child's tracker ends the child (FAILED)."""
    uri = store
    process = tracking_process(uri, grace_s=60.0)
    parent = start_parent(process)
    client = MlflowClient(tracking_uri=uri)
    (child,) = make_children(
        client, client.get_run(parent).info.experiment_id, parent, {"1": "RUNNING"}
    ).values()

    own_tracker = threading.Timer(1.0, lambda: client.set_terminated(child, "FAILED"))
    own_tracker.start()
    started = time.monotonic()
    orphan_the_tracking_process(process)
    own_tracker.join()
    assert time.monotonic() - started < 30  # not the whole grace
    run = client.get_run(child)
    assert run.info.status == "FAILED" and ENDED_BY_TAG not in run.data.tags
    assert client.get_run(parent).info.status == "KILLED"


def test_a_parent_the_sweep_ended_is_not_ended_again_when_tracking_closes(store: str) -> None:
    uri = store
    process = tracking_process(uri, grace_s=0.5)
    parent = start_parent(process)
    client = MlflowClient(tracking_uri=uri)
    make_children(client, client.get_run(parent).info.experiment_id, parent, {"1": "FINISHED"})
    process.call("end_parent", parent, "FINISHED", dataclasses.asdict(SPEC), time.time(), timeout=120)
    orphan_the_tracking_process(process)
    run = client.get_run(parent)
    assert run.info.status == "FINISHED" and ENDED_BY_TAG not in run.data.tags


def start_a_long_sweep(tmp_path: Path) -> subprocess.Popen[str]:
    """`python -m framework -m seed=1,2` in this process's way (the default launcher), once its first job
    has started."""
    p = start_cli("-m", "seed=1,2", "total_steps=400000", "eval.every_steps=0", "progress=off", cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not any("run started" in log.read_text() for log in tmp_path.glob("multirun/*/*/0/framework.log")):
        assert p.poll() is None, p.stdout.read() if p.stdout else ""
        if time.monotonic() > deadline:  # a sweep of 400k steps left behind would run for many minutes
            p.kill()
            p.communicate(timeout=30)
            raise AssertionError("the sweep's first job did not start within 120 s")
        time.sleep(0.2)
    return p


def ended_runs(tmp_path: Path) -> tuple[MlflowClient, dict[str, Any]]:
    """The sweep's runs by the first word of their names (`sweep`, the parent; `s1`, the job of seed=1),
    once none is RUNNING (tracking processes may end them after the sweep's)."""
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    deadline = time.monotonic() + 60
    while True:
        runs = {r.info.run_name.split()[0]: r for r in client.search_runs([experiment.experiment_id])}
        if all(r.info.status != "RUNNING" for r in runs.values()):
            return client, runs
        assert time.monotonic() < deadline, [(n, r.info.status) for n, r in runs.items()]
        time.sleep(0.5)


@pytest.mark.slow
def test_ctrl_c_ends_a_sweep_of_jobs_in_its_own_process_killed(tmp_path: Path) -> None:
    # The job stops, ends KILLED and exits the process (RunKilled, a SystemExit): the sweep ends KILLED.
    p = start_a_long_sweep(tmp_path)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    assert "Sweep KILLED: 1 run (1 KILLED)." in out, out[-3000:]
    _, runs = ended_runs(tmp_path)
    assert {name: r.info.status for name, r in runs.items()} == {"sweep": "KILLED", "s1": "KILLED"}


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.0, 1.0], ids=["as_the_job_starts", "as_its_run_is_made"])
def test_ctrl_c_as_a_sweeps_job_starts_ends_nothing_failed(tmp_path: Path, after_s: float) -> None:
    """Ctrl-C at the moment Hydra has made the first job's directory (its plugins being built, its
    run being created): the sweep stops in one line, exit status 130, and no run of it is left
    FAILED or RUNNING (a parent the tracking process had not made yet is not made at all)."""
    p = start_cli("-m", "seed=1,2", "total_steps=400000", "eval.every_steps=0", "progress=off", cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("multirun/*/*/0/framework.log")):
        assert p.poll() is None and time.monotonic() < deadline, p.stdout.read() if p.stdout else ""
        time.sleep(0.02)
    time.sleep(after_s)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    _, runs = ended_runs(tmp_path)
    statuses = {name: r.info.status for name, r in runs.items()}
    # The parent, where the sweep had made it by then, and the job's run, where it had been made.
    assert set(statuses) <= {"sweep", "s1"}, statuses
    assert all(status == "KILLED" for status in statuses.values()), statuses


@pytest.mark.slow
def test_sigterm_to_a_sweep_ends_its_parent_killed(tmp_path: Path) -> None:
    p = start_a_long_sweep(tmp_path)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == EXIT_KILLED  # stopped as Ctrl-C stops it, not killed outright
    # It ran its jobs in turn: it says what was not run.
    assert (
        "jobs              2 in the sweep; 1 not started: a sweep of their values runs them; one by one:"
        in out
    ), out[-2000:]
    # And the command that runs it, as the job it would have been.
    command = next(
        line.strip() for line in out.splitlines() if line.strip().startswith("python -m framework")
    )
    job = ["seed=2", "total_steps=400000", "eval.every_steps=0", "progress=off"]
    assert sorted(command.split()[3:]) == sorted(job), command

    client, found = ended_runs(tmp_path)
    assert set(found) == {"sweep", "s1"}
    parent, child = found["sweep"], found["s1"]
    assert parent.info.status == "KILLED"
    assert "sweep_summary.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    # The job running in the sweep's process was stopped in order, as a single run is by SIGTERM.
    assert child.info.status == "KILLED"


def test_a_sweep_killed_outright_has_its_parent_ended_by_the_tracking_process(tmp_path: Path) -> None:
    p = start_a_long_sweep(tmp_path)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL

    client, found = ended_runs(tmp_path)
    assert set(found) == {"sweep", "s1"}
    parent, child = found["sweep"], found["s1"]
    assert parent.info.status == "KILLED"
    assert parent.data.tags[ENDED_BY_TAG] == mlflow_session.PARENT_ABANDONED
    assert "sweep_summary.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    # The job went with the sweep's process: its own tracking process ended it.
    assert child.info.status == "FAILED" and ENDED_BY_TAG not in child.data.tags
