"""`python -m framework ui`: the MLflow UI on the runs' store, opened on the experiment's runs; a second
call finds the server running; Ctrl-C leaves nothing behind."""

from __future__ import annotations

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


def start_ui(cwd: Path) -> Any:
    """`python -m framework ui --no-browser` in `cwd`, forked by the zygote (its MLflow imported)."""
    return start_cli("ui", "--no-browser", cwd=cwd)


def ui_address(process: Any, timeout: float = 240) -> str:
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


def ctrl_c_ui(process: Any) -> str:
    """Stop a `ui` as Ctrl-C does; its output (killed where it has not ended in 60 s)."""
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_ui_serves_the_store_opens_the_runs_and_a_second_call_finds_it(store: Path) -> None:
    first = start_ui(store)
    try:
        address = ui_address(first)
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
        out = ctrl_c_ui(first)
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
    calls = [start_ui(store), start_ui(store)]
    try:
        addresses = [ui_address(call) for call in calls]
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
                ctrl_c_ui(call)


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
        address = ui_address(ours)
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
            out = ctrl_c_ui(ours)
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
            address = ui_address(ours)
        finally:
            out = ctrl_c_ui(ours)
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
