"""`python -m framework ui`: the MLflow UI on the store the runs went to, opened on the experiment's runs.

The store is the tracking config's (`./mlflow.db` by default; `tracking.uri=...`,
`tracking.experiment=...` as for a run). The command starts `mlflow ui` on 127.0.0.1, waits until it
answers, prints the address of the experiment's runs (model-training view) and opens it where there
is a display; the server runs until Ctrl-C. A second call, from another terminal, finds the server
already running on that store and only prints (and opens) the address. A tracking server
(`tracking.uri=http://...`) is only opened: it runs already.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path
from typing import Any

from .store_template import cache_dir

SQLITE = "sqlite:///"
DEFAULT_PORT = 5000
#: The longest wait for `mlflow ui` to answer (a store of an older MLflow is migrated first).
START_TIMEOUT_S = 120.0


def main(argv: list[str]) -> int:
    """Open the MLflow UI on the runs' store (./mlflow.db, tracking.uri=): starts it, or finds it running."""
    parser = argparse.ArgumentParser(
        prog="python -m framework ui",
        description="Start (or find) the MLflow UI on the store the runs went to; open the experiment's runs",
    )
    parser.add_argument(
        "--port", type=int, default=None, help=f"the port (default {DEFAULT_PORT}, or a free one)"
    )
    parser.add_argument("--no-browser", action="store_true", help="print the address, open no browser")
    parser.add_argument(
        "--run", metavar="RUN_ID", help="open this run's page instead of the experiment's runs"
    )
    parser.add_argument(
        "overrides", nargs="*", help="tracking.uri=..., tracking.experiment=... (as for a run)"
    )
    args, extra = parser.parse_known_args(argv)
    overrides = [*args.overrides, *extra]
    try:
        uri, experiment = _tracking(overrides)
    except ValueError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    if not uri.startswith(SQLITE):
        if not uri.startswith(("http://", "https://")):
            print(
                f"Error: tracking.uri={uri}: `ui` opens a SQLite store or a tracking server", file=sys.stderr
            )
            return 1
        return _show(uri.rstrip("/"), _page(uri, experiment, args.run), args.no_browser)
    store = Path(uri[len(SQLITE) :]).resolve()
    if not store.is_file():
        print(
            f"Error: no runs at {store} yet (the store is created by the first tracked run: python -m "
            "framework); or give the store: tracking.uri=sqlite:///PATH",
            file=sys.stderr,
        )
        return 1
    uri = f"{SQLITE}{store}"
    running = _running(uri)
    if running is not None:
        print(f"The MLflow UI on {store} is running already (process {running['pid']}).")
        return _show(str(running["address"]), _page(uri, experiment, args.run), args.no_browser)
    return _serve(uri, experiment, args.run, args.port, args.no_browser)


def _tracking(overrides: list[str]) -> tuple[str, str]:
    """The tracking URI and experiment of the config these overrides compose (the run's defaults)."""
    from omegaconf import OmegaConf

    from framework.app import compose
    from framework.errors import ConfigError

    wrong = [o for o in overrides if not o.lstrip("+").startswith(("tracking.", "tracking="))]
    if wrong:
        raise ValueError(f"{' '.join(wrong)}: `ui` takes tracking.uri=... and tracking.experiment=... only")
    try:
        cfg = compose(overrides)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # Hydra's refusal of an override: one line
        raise ValueError(str(e).splitlines()[0]) from None
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    if uri is None:
        raise ValueError("tracking is off in this config (tracking=none): give tracking=mlflow")
    from .mlflow_tracker import absolute_uri

    return absolute_uri(str(uri)), str(OmegaConf.select(cfg, "tracking.experiment", default="framework"))


def _serve(uri: str, experiment: str, run: str | None, port: int | None, no_browser: bool) -> int:
    port = port or (DEFAULT_PORT if _free(DEFAULT_PORT) else _free_port())
    address = f"http://127.0.0.1:{port}"
    log_path = cache_dir() / f"ui-{_key(uri)}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    record = _record_path(uri)
    # Ctrl-C or SIGTERM stops the server too (SIGINT handled here even where it came in ignored,
    # as in a background job).
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        page = _page(uri, experiment, run)  # while the server starts
        if not _wait_until_it_answers(address, server):
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            print(f"Error: `mlflow ui` did not start on {address}:\n  " + "\n  ".join(tail), file=sys.stderr)
            return 1
        record.write_text(json.dumps({"pid": server.pid, "address": address, "uri": uri}))
        print(f"MLflow UI on {Path(uri[len(SQLITE) :])} (Ctrl-C stops it).")
        _show(address, page, no_browser)
        server.wait()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        with contextlib.suppress(OSError):
            record.unlink()
        _stop(server)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _show(address: str, page: str, no_browser: bool) -> int:
    """Print (and open) the page's address."""
    print(f"  open         {address}/{page}", flush=True)
    if not no_browser and _has_display():
        with contextlib.suppress(Exception):
            webbrowser.open(f"{address}/{page}")
    return 0


def _page(uri: str, experiment: str, run: str | None) -> str:
    """The experiment's runs (or one run's page), in the model-training view: MLflow 3.17's UI
    starts on its GenAI view unless the address says which."""
    from mlflow.tracking import MlflowClient

    from .mlflow_session import quiet_libraries

    quiet_libraries()
    client = MlflowClient(tracking_uri=uri)
    view = "?workflowType=machine_learning"
    if run is not None:
        try:
            found = client.get_run(run)
        except Exception:
            print(f"Warning: no run {run} in {uri}: opening the experiment's runs", file=sys.stderr)
        else:
            return f"#/experiments/{found.info.experiment_id}/runs/{run}{view}"
    experiment_id = "0"  # MLflow's Default, where the store has no such experiment yet
    with contextlib.suppress(Exception):
        named = client.get_experiment_by_name(experiment)
        if named is not None:
            experiment_id = str(named.experiment_id)
    return f"#/experiments/{experiment_id}/runs{view}"


def _running(uri: str) -> dict[str, Any] | None:
    """The server a `ui` call started on this store, if it still runs and answers."""
    try:
        found = json.loads(_record_path(uri).read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.get("uri") == uri and _answers(str(found["address"])) else None


def _wait_until_it_answers(address: str, server: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        if _answers(address):
            return True
        time.sleep(0.25)
    return False


def _answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"{address}/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop(server: subprocess.Popen[bytes]) -> None:
    """The server and its workers (its own process group)."""
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def _record_path(uri: str) -> Path:
    return cache_dir() / f"ui-{_key(uri)}.json"


def _key(uri: str) -> str:
    return hashlib.sha1(uri.encode()).hexdigest()[:12]


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
