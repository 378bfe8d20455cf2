"""A tracking server lost mid-run loses nothing: a real `mlflow server` killed and restarted on the
same port and store while a real run or sweep goes on (issue 38, point 4)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, start_cli
from tests.restartable_server import Output, RestartableServer

# One worker runs them all, so that they share the module's server.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tracker-outage")]

#: A DQN run on CartPole long enough to lose its server and get it back while it trains.
RUN = [
    "total_steps=12000",
    "eval.every_steps=2000",
    "eval.episodes=2",
    "checkpoint.every_steps=4000",
    "log_every_s=0.5",
]
#: A quarter of the training's CPU, and a lost server said at the first request refused, not after
#: MLflow's own retries (seconds): the run goes on as many steps past the notice as at full cost.
BRISK = ["agent.gradient_steps=32", "tracking.http_retries=0"]
#: For a run that need not outlast any wait of the test (it is held while its server is killed): the
#: same steps, evaluations and checkpoints, a sixteenth of the training's CPU.
CHEAP = ["agent.gradient_steps=8"]
PROGRESS = re.compile(r"\bstep \d+/\d+")
RUN_ID = re.compile(r"^\s*run\s+.+ \(([0-9a-f]{32})\)$", re.MULTILINE)
RUN_DIR = re.compile(r"^\s*run dir\s+(\S.*)$", re.MULTILINE)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    """One server for the module's tests (each start costs ~10 s of CPU); each test's runs are its own."""
    srv = RestartableServer(tmp_path_factory.mktemp("outage") / "server")
    yield srv
    srv.stop()


@pytest.fixture
def server(shared_server: RestartableServer) -> RestartableServer:
    """The module's server, up: started where no test has yet, or the test before left it down."""
    if shared_server.process is None or shared_server.process.poll() is not None:
        shared_server.start()
    return shared_server


def journal_points(journal: Path) -> tuple[str, Counter[tuple[str, int, int, float]]]:
    """The run id and every metric point (key, step, time, value) the run's journal holds."""
    header, *entries = [json.loads(line) for line in journal.read_text().splitlines()]
    points: Counter[tuple[str, int, int, float]] = Counter()
    for entry in entries:
        if entry["op"] == "metrics":
            for key, value in entry["metrics"].items():
                points[(key, entry["step"], entry["time_ms"], value)] += 1
    return header["run_id"], points


def stored_points(client, run_id: str, keys: set[str]) -> Counter[tuple[str, int, int, float]]:
    found: Counter[tuple[str, int, int, float]] = Counter()
    for key in keys:
        for m in client.get_metric_history(run_id, key):
            found[(key, m.step, m.timestamp, m.value)] += 1
    return found


def assert_every_point_once(client, *journals: Path) -> str:
    """Every metric point the run logged (in all its parts) is in its MLflow run exactly once: no
    gap, no duplicate; and every evaluation, the final one too, is among them."""
    logged: Counter[tuple[str, int, int, float]] = Counter()
    for journal in journals:
        run_id, points = journal_points(journal)
        logged += points
    assert logged and max(logged.values()) == 1, "the run logged a point twice"
    stored = stored_points(client, run_id, {key for key, *_ in logged})
    missing, doubled = logged - stored, +(stored - logged)
    assert not missing, f"{len(missing)} points never reached the server, e.g. {sorted(missing)[:3]}"
    assert not doubled, f"{len(doubled)} points reached it twice, e.g. {sorted(doubled)[:3]}"
    steps = sorted(step for key, step, *_ in logged if key == "eval/return_mean")
    assert set(range(2000, 12001, 2000)) <= set(steps), steps
    return run_id


def kill_as_it_runs(server: RestartableServer, p: Any, out: Output) -> None:
    """Kill `server` once the run has printed its first progress line; the run is held meanwhile, so
    that however fast it trains, it goes on (and logs) after its server is gone."""
    out.wait_for(PROGRESS.search, "a progress line")
    p.send_signal(signal.SIGSTOP)
    try:
        server.kill()
    finally:
        p.send_signal(signal.SIGCONT)


@contextlib.contextmanager
def losing_its_server(
    server: RestartableServer, tmp_path: Path, *args: str, outage_wait_s: int
) -> Iterator[tuple[Any, Output]]:
    """A run (RUN, then `args`) tracked to `server`, which is killed as it runs; the run is killed
    where the test leaves it going."""
    p = start_cli(
        *RUN, *args, f"tracking.uri={server.uri}", f"tracking.outage_wait_s={outage_wait_s}", cwd=tmp_path
    )
    out = Output(p)
    try:
        kill_as_it_runs(server, p, out)
        yield p, out
    finally:
        if p.poll() is None:
            p.kill()


def journal_of(out: str) -> Path:
    run_id = RUN_ID.search(out)
    run_dir = RUN_DIR.search(out)
    assert run_id and run_dir, out[-3000:]
    return Path(run_dir.group(1).strip()) / "tracking" / f"{run_id.group(1)}.jsonl"


def test_a_run_outlives_a_lost_server_and_ends_finished_with_every_point(
    server: RestartableServer, tmp_path: Path
) -> None:
    with losing_its_server(server, tmp_path, *BRISK, outage_wait_s=300) as (p, out):
        lost_at = time.time()
        steps_since = 0  # the run goes on, and logs, while its server is gone (and before it says so)

        def counted_until_notice(line: str) -> bool:
            nonlocal steps_since
            steps_since += PROGRESS.search(line) is not None
            return "does not answer" in line

        out.wait_for(counted_until_notice, "the notice that the server is lost")
        while steps_since < 3:  # an evaluation every 2,000 steps prints one: 5 more at least
            out.wait_for(PROGRESS.search, "progress during the outage")
            steps_since += 1
        # The training is held until the server is back, so that the run surely outlives the outage
        # (a server starts in tens of seconds on a loaded machine); its tracking process is not held.
        p.send_signal(signal.SIGSTOP)
        try:
            server.start()
            back_at = time.time()
            outlived = p.poll() is None  # the run was still going when its server came back
        finally:
            p.send_signal(signal.SIGCONT)
        out.wait_for(lambda line: "answers again" in line, "the notice that the server is back")
        code = out.finish()
    text = out.text
    assert code == 0, text[-3000:]
    assert "Traceback" not in text
    assert text.count("does not answer") == 1 and text.count("answers again") == 1  # not each retry
    # The run outlived the outage (its tracking process may say the server is back after the run's
    # last line: on a quiet machine the steps left run out before its next try).
    assert outlived and "Run FINISHED at step 12000" in text
    assert "python -m framework sync" not in text  # nothing was left to send

    journal = journal_of(text)
    _, logged = journal_points(journal)
    assert any(lost_at * 1000 < stamp < back_at * 1000 for _, _, stamp, _ in logged), "no point in the outage"
    client = server.client()
    run_id = assert_every_point_once(client, journal)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["total_steps"] == "12000"
    assert {a.path for a in client.list_artifacts(run_id)} == {"config.yaml", "model", "checkpoint"}


def test_a_run_that_ends_before_its_server_returns_says_the_command_that_sends_the_rest(
    server: RestartableServer, tmp_path: Path
) -> None:
    with losing_its_server(server, tmp_path, *CHEAP, outage_wait_s=1) as (_, out):
        code = out.finish()
    text = out.text
    assert code == 0, text[-3000:]
    assert "Traceback" not in text and "Run FINISHED at step 12000" in text
    (command,) = [line.strip() for line in text.splitlines() if "python -m framework sync" in line]
    command = command[command.index("python -m framework sync") :]
    journal = journal_of(text)
    assert shlex.split(command) == ["python", "-m", "framework", "sync", str(journal.parent.parent)]

    # With the server still down: one line that says so, and nothing sent.
    r = run_cli("sync", str(journal.parent.parent), cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "does not answer" in r.stderr and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    server.start()
    client = server.client()
    run_id = journal_points(journal)[0]
    assert client.get_run(run_id).info.status == "RUNNING"  # what the server knew when it was lost
    r = run_cli(*shlex.split(command)[3:], cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.output[-3000:]
    said = " ".join(r.stdout.split())
    assert f"to run {run_id}" in said and "it is FINISHED" in said, r.stdout
    assert all(len(line) <= 100 for line in r.stdout.splitlines()), r.stdout  # its 170 characters wrapped
    assert_every_point_once(client, journal)
    assert client.get_run(run_id).info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(run_id)} == {"config.yaml", "model", "checkpoint"}

    # Sent once only: a second sync finds nothing to send, and the points stay single.
    r = run_cli("sync", str(journal.parent.parent), cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "Nothing to send" in r.stdout, r.output
    assert_every_point_once(client, journal)


def test_a_run_stopped_while_its_server_is_down_sends_the_rest_when_it_is_resumed(
    server: RestartableServer, tmp_path: Path
) -> None:
    """Ctrl-C during the outage: KILLED, with the sync command; `resume=` sends the first part's
    rest (its end included) before it reopens the run, and the whole run ends with every point."""
    p = start_cli(
        *RUN, *BRISK, f"tracking.uri={server.uri}", "tracking.outage_wait_s=1",
        "hydra.run.dir=outputs/first", cwd=tmp_path,
    )  # fmt: skip
    out = Output(p)
    try:
        kill_as_it_runs(server, p, out)
        out.wait_for(lambda line: "does not answer" in line, "the notice that the server is lost")
        out.wait_for(PROGRESS.search, "progress during the outage")
        p.send_signal(signal.SIGINT)
        code = out.finish()
    finally:
        if p.poll() is None:
            p.kill()
    text = out.text
    assert code == 130, text[-3000:]
    assert "Traceback" not in text and "Run KILLED" in text and "python -m framework sync" in text
    first = journal_of(text)
    run_id = journal_points(first)[0]

    server.start()
    r = run_cli(
        f"resume={run_id}", f"tracking.uri={server.uri}", "hydra.run.dir=outputs/second", cwd=tmp_path
    )
    assert r.returncode == 0, r.output[-3000:]
    assert "Run FINISHED at step 12000" in r.stdout and "python -m framework sync" not in r.output
    second = tmp_path / "outputs/second/tracking" / first.name
    assert_every_point_once(server.client(), first, second)
    assert server.client().get_run(run_id).info.status == "FINISHED"
    r = run_cli("sync", str(first.parent.parent), cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "Nothing to send" in r.stdout, r.output  # the first part was sent


def test_a_sweep_ending_while_its_server_is_down_is_ended_by_the_sync_it_prints(
    server: RestartableServer, tmp_path: Path
) -> None:
    """The parent's end is kept with the one command that sends it (it stayed RUNNING for good, and a
    traceback ended the sweep); `sync SWEEP_DIR` sends the journals, then ends it with its summary."""
    shorter = [o for o in RUN if not o.startswith("total_steps=")] + ["total_steps=6000", *CHEAP]
    uri, experiment = f"tracking.uri={server.uri}", "tracking.experiment=sweep-outage"  # its runs alone
    p = start_cli("-m", "seed=1", *shorter, uri, experiment, "tracking.outage_wait_s=1", cwd=tmp_path)
    out = Output(p)
    try:
        kill_as_it_runs(server, p, out)
        code = out.finish()
    finally:
        if p.poll() is None:
            p.kill()
    text = out.text
    assert code == 0 and "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    assert all(len(line) <= 100 or "/" in line for line in text.splitlines()[-8:]), text[-3000:]
    said = " ".join(text.split())
    assert re.search(r"Sweep FINISHED: its parent run \w+ is not ended yet", said), text[-3000:]
    commands = [line.strip() for line in text.splitlines() if "python -m framework sync" in line]
    sweep_dir = next((tmp_path / "multirun").glob("*/*"))
    assert f"python -m framework sync {sweep_dir}" in commands, text[-3000:]

    server.start()
    r = run_cli("sync", str(sweep_dir), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.output[-3000:]
    assert "Ended the sweep's parent run" in " ".join(r.stdout.split()), r.stdout
    client = server.client()
    runs = client.search_runs([client.get_experiment_by_name("sweep-outage").experiment_id])
    (parent,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    (child,) = [run for run in runs if run is not parent]
    assert parent.info.status == child.info.status == "FINISHED", (parent.info, child.info)
    assert "best/eval/return_mean" in parent.data.metrics, parent.data.metrics  # its summary made
    assert not list((sweep_dir / "tracking").glob("parent-*.json"))
    again = run_cli(*shlex.split(f"sync {sweep_dir}"), cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and "Nothing to send" in again.stdout, again.output


def test_ctrl_c_as_a_finished_run_waits_for_its_server_stops_the_wait_and_keeps_it_finished(
    server: RestartableServer, tmp_path: Path
) -> None:
    with losing_its_server(server, tmp_path, *CHEAP, outage_wait_s=300) as (p, out):
        out.wait_for(lambda line: "Ctrl-C stops waiting" in line, "the line that says it waits", 240)
        stopped_at = time.monotonic()
        p.send_signal(signal.SIGINT)
        code = out.finish()
    text = out.text
    assert code == 0 and time.monotonic() - stopped_at < 60, text[-3000:]  # not its 300 s
    assert "Run FINISHED at step 12000" in text and "KILLED" not in text, text[-3000:]
    assert "Traceback" not in text and "failed" not in text, text[-3000:]
    assert "python -m framework sync" in text, text[-3000:]
    ends = [json.loads(line) for line in journal_of(text).read_text().splitlines() if '"op": "end"' in line]
    assert [e["status"] for e in ends] == ["FINISHED"]  # what `sync` sends
