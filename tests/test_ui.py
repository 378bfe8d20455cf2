"""`python -m framework ui`: the MLflow UI on the runs' store, opened on the experiment's runs; a second
call finds the server running; Ctrl-C leaves nothing behind."""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from framework_plugins.trackers import store_template
from framework_plugins.trackers.mlflow_session import MlflowSession
from tests.conftest import chromium_env, descendants, run_cli, start_cli

OPEN = re.compile(r"^  open\s+(http://127\.0\.0\.1:(\d+)/\S+)$", re.MULTILINE)


def seeded(cache: Path) -> None:
    """`cache` given the suite's empty store schema, so that a store made with it as the cache is a
    copy (store_template), not the seconds of CPU MLflow's migrations take."""
    template = store_template._template()
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, cache / template.name)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with one run named `first-run` in the experiment `framework`; the ui's records in tmp."""
    seeded(tmp_path / "cache")
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path / "cache"))
    session = MlflowSession(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", flush_every_s=1.0)
    session.start_run(run_name="first-run", tags={})
    session.log_metrics({"eval/return_mean": 1.0}, 1)
    session.end_run("FINISHED")
    return tmp_path


def _start(cwd: Path) -> Any:
    """`python -m framework ui --no-browser` in `cwd`, forked by the zygote (its MLflow imported)."""
    return start_cli("ui", "--no-browser", cwd=cwd)


def _address(process: Any, timeout: float = 240) -> str:
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


def _ctrl_c(process: Any) -> str:
    """Stop a `ui` as Ctrl-C does; its output (killed where it has not ended in 60 s)."""
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()


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
        # MLflow's job runners (GenAI jobs, a process importing MLflow each) are not started.
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in descendants(first.pid)]
        assert any(b"mlflow" in c for c in commands) and not any(b"huey" in c for c in commands), commands
        # A second call, from anywhere the store is: the same server, nothing started.
        second = run_cli("ui", "--no-browser", "--run", "nope", cwd=store, timeout=120)
        assert second.returncode == 0, second.output
        assert "running already" in second.stdout and address.split("#")[0] in second.stdout
        server = descendants(first.pid)
    finally:
        out = _ctrl_c(first)
    assert first.returncode == 0, out
    # The server went with it, every process of it by the time `ui` returned, and so did its record.
    # (Its port may serve again already: a test beside this one may start a `ui` on 5000.)
    assert server and not [pid for pid in server if _runs(pid)]
    assert not list((store / "cache").glob("ui-*.json"))


def _runs(pid: int) -> bool:
    """Whether process `pid` runs (one that has exited, unreaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_two_calls_at_once_share_one_server_which_ends_with_the_call_that_started_it_killed(
    store: Path,
) -> None:
    """Two `ui` started at the same moment each started a server on the store (5000 and 5796); after
    kill -9 of a `ui` its `mlflow ui` went on serving, an orphan no command stopped."""
    calls = [_start(store), _start(store)]
    try:
        addresses = [_address(call) for call in calls]
        assert addresses[0] == addresses[1]
        record = json.loads(next((store / "cache").glob("ui-*.json")).read_text())
        owner = next(call for call in calls if record["pid"] in descendants(call.pid))
        server = descendants(owner.pid)  # `mlflow ui` and its uvicorn
        owner.kill()  # SIGKILL: no handler of its own runs
        owner.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_runs(pid) for pid in server):
            time.sleep(0.2)
        assert len(server) >= 2 and not [pid for pid in server if _runs(pid)], "server outlived it"
    finally:
        for call in calls:
            if call.poll() is None:
                _ctrl_c(call)


#: A server that answers every GET with 200: another program's, on the port `ui` chose.
ANSWERS_ALL = """
import http.server, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"not mlflow")
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Answer)  # bound and listening
print("listening", flush=True)
server.serve_forever()
"""
#: `ui` finding its default port free once (as a second `ui` started at the same moment does), though
#: another server is about to listen on it.
RACED_UI = """
import sys
from framework_plugins.trackers import local_views, ui
local_views.DEFAULT_PORT, free, asked = int(sys.argv[1]), local_views.free, []
def free_once(port):
    asked.append(port)
    return len(asked) == 1 or free(port)
local_views.free = free_once
sys.exit(ui.main(["--no-browser"]))
"""


@pytest.mark.slow
def test_a_server_that_takes_the_port_as_ui_starts_is_not_taken_for_its_own(store: Path) -> None:
    """Two `ui` calls at once both found port 5000 free; the one whose `mlflow ui` lost it printed the
    other's address, and its user browsed another store. An answer on the port is not enough: `ui`
    waits for its own server, and where that lost the port, starts it on another."""
    from framework_plugins.trackers import local_views
    from framework_plugins.trackers.local_views import holds_port
    from framework_plugins.trackers.ui import _free_port

    port = _free_port()
    other = subprocess.Popen(
        [sys.executable, "-c", ANSWERS_ALL, str(port)],
        start_new_session=True, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert other.stdout is not None
    ready, _, _ = select.select([other.stdout], [], [], 60)
    assert ready and other.stdout.readline() == "listening\n", "the other server did not listen in 60 s"
    assert holds_port(other.pid, port)
    ours = subprocess.Popen(
        [sys.executable, "-c", RACED_UI, str(port)],
        cwd=store, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        address = _address(ours)
        assert f":{port}/" not in address, address  # not the other server's
        search = urllib.request.Request(
            f"{address.split('#')[0]}ajax-api/2.0/mlflow/runs/search",
            data=json.dumps({"experiment_ids": ["1"]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(search, timeout=30) as answer:
            assert "first-run" in answer.read().decode()  # the store it was started on
        server = json.loads(next((store / "cache").glob("ui-*.json")).read_text())["pid"]
        assert holds_port(server, int(address.split(":")[2].split("/")[0])) is True
        assert holds_port(server, port) is False and holds_port(other.pid, port) is True
        # A record of the store's server whose address another server answers is not its server.
        uri = f"{local_views.SQLITE}{(store / 'mlflow.db').resolve()}"
        record = local_views.record_path(uri)
        own = record.read_text()
        assert local_views.running(uri) is not None
        # A run's `view it` line names the server `ui` runs on the store (not the port it takes first).
        assert local_views.ui_address(uri) == address.split("/#")[0]
        record.write_text(json.dumps({"pid": server, "address": f"http://127.0.0.1:{port}", "uri": uri}))
        assert local_views.running(uri) is None
        ports = (local_views.DEFAULT_PORT, local_views.own_port(uri))  # the latter where 5000 is held
        assert local_views.ui_address(uri) in [f"http://127.0.0.1:{p}" for p in ports]
        record.write_text(own)
    finally:
        try:
            out = _ctrl_c(ours)
        finally:
            other.kill()
            other.wait(timeout=10)
    assert ours.returncode == 0, out


#: `ui` on a store while another program (another store's `ui`) holds the default port: the link a run
#: prints first, then the server.
DEFAULT_HELD = """
import sys
from framework_plugins.trackers import local_views, ui
local_views.DEFAULT_PORT = int(sys.argv[1])
print("link", local_views.ui_address(sys.argv[2]), flush=True)
sys.exit(ui.main(["--no-browser"]))
"""


@pytest.mark.slow
def test_with_the_default_port_held_a_stores_link_and_its_ui_agree_on_its_own_port(store: Path) -> None:
    """A run's `view it` link and `compare`'s page said :5000 while another store's `ui` held it; this
    store's `ui` then served elsewhere, and every printed link opened the other store."""
    import socket

    from framework_plugins.trackers import local_views

    uri = f"{local_views.SQLITE}{(store / 'mlflow.db').resolve()}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = taken.getsockname()[1]
        ours = subprocess.Popen(
            [sys.executable, "-c", DEFAULT_HELD, str(held), uri],
            cwd=store, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            assert ours.stdout is not None
            link = ours.stdout.readline().split()
            address = _address(ours)
        finally:
            out = _ctrl_c(ours)
    assert link == ["link", f"http://127.0.0.1:{local_views.own_port(uri)}"], (link, out)
    assert address.startswith(f"{link[1]}/#/experiments/1/"), (address, out)


def test_a_port_given_that_another_process_holds_is_refused_before_anything_starts(store: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_cli("ui", "--no-browser", "--port", str(port), cwd=store, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.output, r.output
    assert f"--port {port}: the port is in use on 127.0.0.1; give another, or leave --port out" in r.stderr
    assert not list((store / "cache").glob("ui-*"))  # no server was started: no log, no record
    for given in ("99999", "0"):  # 99999 was an OverflowError's traceback; 0 served on 5000
        r = run_cli("ui", "--no-browser", "--port", given, cwd=store, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.output, r.output
        assert f"argument --port: '{given}' is not a port: give one from 1 to 65535" in r.stderr


def test_an_experiment_the_store_lacks_is_refused_naming_those_it_has(store: Path) -> None:
    """Not MLflow's Default opened in its place (and `compare NAME` suggested, which then fails)."""
    r = run_cli("ui", "--no-browser", "tracking.experiment=framwork", cwd=store, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.output, r.output
    assert " ".join(r.stderr.split()) == (
        f"Error: tracking.experiment=framwork: no such experiment in sqlite:///{store / 'mlflow.db'}. "
        "Did you mean framework? Its experiments: Default, framework."
    )
    assert not list((store / "cache").glob("ui-*"))  # no server was started


def test_ui_without_a_store_says_how_to_make_one(cli: Any, tmp_path: Path) -> None:
    r = cli("ui", "--no-browser")
    assert r.returncode == 1 and "Traceback" not in r.output
    assert "no runs at" in r.stderr and "python -m framework" in r.stderr
    assert not (tmp_path / "mlflow.db").exists()
    # A store of another folder: the command that makes it, that folder first where it is missing.
    elsewhere = cli("ui", "--no-browser", "tracking.uri=sqlite:///runs/mlflow.db")
    said = " ".join(elsewhere.stderr.split())
    assert (
        f"first tracked run: mkdir -p {tmp_path / 'runs'} && python -m framework "
        f"tracking.uri=sqlite:///{tmp_path / 'runs/mlflow.db'})" in said
    ), said
    wrong = cli("ui", "env=cartpole")
    said = " ".join(wrong.stderr.split())
    assert wrong.returncode == 1 and said == (
        "Error: env=cartpole: `ui` takes --port, --no-browser, --run and the overrides tracking.uri=... and "
        "tracking.experiment=..."
    ), said


LR, EPOCHS = "agent.hyperparams.learning_rate", "agent.hyperparams.n_epochs"
OBJECTIVE = "eval/return_mean"


def _swept_store(root: Path) -> str:
    """A store whose experiment `framework` holds a run of its own and a sweep over LR and EPOCHS
    (its parent tagged as SweepParentRun tags it); returns the experiment's id."""
    from mlflow.tracking import MlflowClient

    store_template.place(root / "mlflow.db")  # the empty schema copied, as a run makes a new store
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.create_experiment("framework")
    single = client.create_run(experiment, run_name="cartpole-dqn-s0")
    client.log_param(single.info.run_id, "objective.metric", OBJECTIVE)
    client.log_metric(single.info.run_id, OBJECTIVE, 120.0)
    client.set_terminated(single.info.run_id)
    spec = {"swept_keys": [LR, EPOCHS], "objective": OBJECTIVE, "mode": "max", "also": [], "study_dir": None}
    parent = client.create_run(
        experiment,
        run_name="sweep lr=1e-4,1e-3 ne=5,10 cartpole-sb3-ppo-s0",
        tags={
            "framework.swept_keys": json.dumps([LR, EPOCHS]),
            "framework.objective": OBJECTIVE,
            "framework.summary_spec": json.dumps(spec),
        },
    ).info.run_id
    for (lr, ne), score in zip(
        itertools.product(("1e-4", "1e-3"), ("5", "10")), (300, 480, 150, 60), strict=True
    ):
        child = client.create_run(
            experiment, run_name=f"lr={lr} ne={ne} cartpole-sb3-ppo-s0", tags={"mlflow.parentRunId": parent}
        ).info.run_id
        for key, value in (
            (LR, lr),
            (EPOCHS, ne),
            ("objective.metric", OBJECTIVE),
            ("objective.mode", "max"),
        ):
            client.log_param(child, key, value)
        client.log_metric(child, OBJECTIVE, float(score))
        client.set_terminated(child)
    client.set_terminated(parent)
    return str(experiment)


@pytest.mark.slow
def test_ui_opens_the_runs_sorted_by_the_objective_with_the_swept_params_as_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow 3.17 reads no columns from an address: `ui` writes the view as MLflow's Share button does
    (an experiment tag the address names) and opens it; in Chromium at 1400 px the runs come in the
    model-training view, best first, with the objective and both swept params as columns."""
    from mlflow.tracking import MlflowClient

    from tests.fighter.cdp import InspectedPage

    experiment = _swept_store(tmp_path)  # from the suite's cache, before this test's is set
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path / "cache"))
    first = _start(tmp_path)
    try:
        address = _address(first)
        assert f"#/experiments/{experiment}/runs?workflowType=machine_learning&viewStateShareKey=" in address
        key = address.rsplit("viewStateShareKey=", 1)[1]
        tags = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_experiment(experiment).tags
        state = json.loads(tags[f"mlflow.sharedViewState.{key}"])
        metric = f"metrics.`{OBJECTIVE}`"
        assert state["selectedColumns"] == [metric, f"params.`{LR}`", f"params.`{EPOCHS}`"]
        assert state["orderByKey"] == metric and state["orderByAsc"] is False
        page = InspectedPage(address, width=1400, height=900)
        try:
            rows = f"document.querySelectorAll('.ag-center-cols-container .ag-row [col-id=\"{metric}\"]')"
            page.wait_in_page(f"{rows}.length >= 5", timeout=120)
            headers = page.steady(
                "Array.from(document.querySelectorAll('.ag-header-cell')).map(h => h.getAttribute('col-id'))"
            )
            scores = page.steady(  # the rows' order once they stop moving
                "Array.from(document.querySelectorAll('.ag-center-cols-container .ag-row'))"
                ".sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))"
                f".map(r => (r.querySelector('[col-id=\"{metric}\"]') || {{}}).innerText)"
            )
            text = page.evaluate("document.body.innerText")
            page.screenshot(tmp_path / "ui.png")
        finally:
            page.close()
        assert {metric, f"params.`{LR}`", f"params.`{EPOCHS}`"} <= set(headers), headers
        assert scores[:5] == ["480", "300", "150", "120", "60"], scores  # best first
        assert "Sort: eval/return_mean" in text and "Model training" in text and "Evaluation runs" not in text
    finally:
        _ctrl_c(first)


@pytest.mark.slow
def test_a_store_ui_cannot_write_to_is_opened_sorted_by_the_objective(tmp_path: Path) -> None:
    """Where the view cannot be written (a read-only store), the address itself sorts the runs, best
    first: MLflow 3.17 reads `orderByKey` and `orderByAsc` from it (not columns)."""
    from framework_plugins.trackers.ui import _page
    from tests.test_readonly_store import read_only

    experiment = _swept_store(tmp_path)
    with read_only(tmp_path):
        page = _page(f"sqlite:///{tmp_path / 'mlflow.db'}", "framework", None)
    assert page == (
        f"#/experiments/{experiment}/runs?workflowType=machine_learning"
        "&orderByKey=metrics.%60eval%2Freturn_mean%60&orderByAsc=false"
    )


def test_ui_opens_a_run_by_the_eight_characters_pages_show_of_its_id(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from framework_plugins.trackers.ui import _compared, _page

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("cmpE")
    run = client.create_run(experiment).info.run_id
    assert (
        _page(uri, "framework", run[:8])
        == f"#/experiments/{experiment}/runs/{run}?workflowType=machine_learning"
    )
    # Its comparison is of its own experiment's runs, not the config's default experiment's.
    assert _compared(uri, "framework", run[:8]).startswith("python -m framework compare cmpE ")


def test_ui_labels_a_comparison_page_and_the_command_that_would_write_one_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from framework_plugins.trackers.ui import _show

    _show("http://127.0.0.1:5000", "#/", True, "python -m framework compare framework")
    _show("http://127.0.0.1:5000", "#/", True, "file:///tmp/compare.html")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  compare with python -m framework compare framework"
    assert lines[3] == "  compared     file:///tmp/compare.html"
