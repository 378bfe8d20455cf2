"""`python -m framework ui`: the MLflow UI on the store the runs went to, opened on the experiment's runs.

The store is the tracking config's (`./mlflow.db` by default; `tracking.uri=...`,
`tracking.experiment=...` as for a run). The command starts `mlflow ui` on 127.0.0.1, waits until it
answers, prints the address of the experiment's runs (model-training view, best first by the
objective, with the objective and the latest sweep's params as columns: `_runs_view`) and opens it
where there is a display; the server runs until Ctrl-C. A second call, from another terminal, finds
the server already running on that store and only prints (and opens) the address. A tracking server
(`tracking.uri=http://...`) is only opened: it runs already.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.columns import WIDTH, refuse, wrap
from framework.commands import Parser

from . import local_views
from .local_views import DEFAULT_PORT
from .store_template import cache_dir

#: The query that opens an MLflow UI page in its model-training view.
MLFLOW_VIEW = "?workflowType=machine_learning"
#: The experiment tag of a shared view of its runs page, less the view's key (MLflow 3.17's UI).
SHARED_VIEW_TAG = "mlflow.sharedViewState."
#: The runs page's column ids, in MLflow 3.17's UI.
RUN_NAME_COLUMN = "attributes.`Run Name`"
CREATED_COLUMN = "runDateAndNestInfo"
#: What a Run Name cell holds beside the name (its colour, its padding: runs sorted by a metric are
#: not nested), and a header cell beside its title (the sort arrow), in pixels; the widest Run Name
#: column `ui` asks for (MLflow's own limit is 360): the objective's column stays in sight beside
#: MLflow's assistant panel at 1400 px.
NAME_CELL_PX = 48
HEADER_CELL_PX = 40
WIDEST_NAME_COLUMN_PX = 280
#: The latest runs of an experiment `ui` looks at for its sweep and objective.
RUNS_LOOKED_AT = 500
#: The longest wait for `mlflow ui` to answer (a store of an older MLflow is migrated first).
START_TIMEOUT_S = 120.0
#: How many ports `ui` tries where another server takes the one it chose as its own starts.
PORT_TRIES = 3


def main(argv: list[str]) -> int:
    """Open the MLflow UI on the runs' store (./mlflow.db, tracking.uri=): starts it, or finds it running."""
    parser = Parser(
        prog="python -m framework ui",
        description="Start (or find) the MLflow UI on the store the runs went to; open the experiment's runs",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help=f"the port (default {DEFAULT_PORT}, else the store's own, else any free one)",
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
        uri, experiment = local_views.tracking(overrides)
    except ValueError as e:
        refuse(str(e))
        return 1
    if not uri.startswith(local_views.SQLITE):
        if not uri.startswith(("http://", "https://")):
            refuse(f"tracking.uri={uri}: `ui` opens a SQLite store or a tracking server")
            return 1
        if args.run is None and (missing := local_views.missing_experiment(uri, experiment)):
            refuse(missing)
            return 1
        return _show(
            uri.rstrip("/"),
            _page(uri, experiment, args.run),
            args.no_browser,
            _compared(uri, experiment, args.run),
        )
    store = Path(uri[len(local_views.SQLITE) :]).resolve()
    if not store.is_file():
        default = uri == local_views.absolute_uri("sqlite:///mlflow.db")
        first = "python -m framework" + ("" if default else f" tracking.uri={uri}")
        if not store.parent.is_dir():
            first = f"mkdir -p {store.parent} && {first}"
        refuse(
            f"no runs at {store} yet (the store is created by the first tracked run: {first}); or give "
            "the store: tracking.uri=sqlite:///PATH"
        )
        return 1
    uri = f"{local_views.SQLITE}{store}"
    if args.run is None and (missing := local_views.missing_experiment(uri, experiment)):
        refuse(missing)
        return 1
    starting = None
    while (running := local_views.running(uri)) is None and starting is None:
        if args.port is not None and not local_views.free(args.port):
            refuse(f"--port {args.port}: the port is in use on 127.0.0.1; give another, or leave --port out")
            return 1
        starting = local_views.StartLock(uri)  # two calls at once: one starts the server, one finds it
    if running is not None:
        if starting is not None:
            starting.release()
        print(f"The MLflow UI on {store} is running already (process {running['pid']}).")
        return _show(
            str(running["address"]),
            _page(uri, experiment, args.run),
            args.no_browser,
            _compared(uri, experiment, args.run),
        )
    assert starting is not None  # the loop ends with the lock held or a server found
    with starting:
        return _serve(uri, experiment, args.run, args.port, args.no_browser, starting)


def _port(text: str) -> int:
    """A TCP port a server may take: 1 to 65535 (argparse says so for anything else)."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give one from 1 to 65535")
    return int(text)


def server_env() -> dict[str, str]:
    """The environment an MLflow server is started in: without MLflow's job runners (GenAI
    evaluation jobs, trace rollups: processes that import MLflow each, ~18 s of CPU at every
    start on a 2-core machine, for jobs no run of this framework makes), unless the environment
    asks for them (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true)."""
    return {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ}


def _serve(
    uri: str, experiment: str, run: str | None, port: int | None, no_browser: bool, starting: Any
) -> int:
    log_path = cache_dir() / f"ui-{local_views.key(uri)}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    record = local_views.record_path(uri)
    # Ctrl-C or SIGTERM stops the server too (SIGINT handled here even where it came in ignored,
    # as in a background job).
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    server: subprocess.Popen[bytes] | None = None
    page, started = None, False
    try:
        for _ in range(PORT_TRIES):
            chosen = port or local_views.port_for(uri) or _free_port()
            address = f"http://127.0.0.1:{chosen}"
            server = local_views.start_server(uri, chosen, log_path, server_env())
            page = page or _page(uri, experiment, run)  # while the server starts
            started = _wait_until_it_answers(address, server)
            lost_its_port = server.poll() is not None and port is None and not local_views.free(chosen)
            if started or not lost_its_port:
                break
            # Another server took the port as this one started (two `ui` calls at once): another port.
        assert server is not None and page is not None
        if not started:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            refuse(f"`mlflow ui` did not start on {address}:\n  " + "\n  ".join(tail))
            return 1
        record.write_text(json.dumps({"pid": server.pid, "address": address, "uri": uri}))
        starting.release()
        print(f"MLflow UI on {Path(uri[len(local_views.SQLITE) :])} (Ctrl-C stops it).")
        _show(address, page, no_browser, _compared(uri, experiment, run))
        server.wait()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if server is not None:
            with contextlib.suppress(OSError):
                record.unlink()
            local_views.stop_server(server)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _show(address: str, page: str, no_browser: bool, compared: str = "") -> int:
    """Print (and open) the page's address; and where the experiment's runs are compared over seeds."""
    print(f"  open         {address}/{page}", flush=True)
    if compared:  # the page `compare` wrote, or the command that writes one
        first, *rest = compared.splitlines()
        print(f"  {'compare with' if first.startswith('python ') else 'compared':<13}{first}", flush=True)
        for line in rest:  # what is said of it, in its column
            print("\n".join(wrap(line, WIDTH, first=" " * 15, indent=" " * 15)), flush=True)
    if not no_browser and _has_display():
        with contextlib.suppress(Exception):
            webbrowser.open(f"{address}/{page}")
    return 0


def _compared(uri: str, experiment: str, run: str | None = None) -> str:
    """The page `compare` last wrote for this experiment (`run`'s own, given one), with how many runs
    ended since it was written; else the command that writes one, with the store where it is not
    ./mlflow.db."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    if run is not None:
        from .compare import full_run_id

        with contextlib.suppress(Exception):
            found = client.get_run(full_run_id(client, run))
            experiment = client.get_experiment(found.info.experiment_id).name
    store = (
        "" if uri == local_views.absolute_uri("sqlite:///mlflow.db") else f" tracking.uri={shlex.quote(uri)}"
    )
    latest = local_views.latest_page(uri, experiment)
    if latest is None:
        return f"python -m framework compare {shlex.quote(experiment)}{store}"
    page, words = latest
    command = f"python -m framework compare {shlex.join(words or [experiment])}{store}"
    later = _ended_since(client, experiment, page.stat().st_mtime)
    if later:
        runs = f"{later} run{'s' * (later > 1)}"
        return f"{page.as_uri()}\n({runs} ended after it was written: {command} writes it anew)"
    return page.as_uri()


def _ended_since(client: Any, experiment: str, since: float) -> int:
    """How many of the experiment's runs (a sweep's parent aside: it trains nothing) ended after `since`."""
    from framework.contracts.tracker import SUMMARY_SPEC_TAG

    with contextlib.suppress(Exception):
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            runs = client.search_runs(
                [found.experiment_id], f"attributes.end_time > {int(since * 1000)}", max_results=5000
            )
            return sum(SUMMARY_SPEC_TAG not in r.data.tags for r in runs)
    return 0


def _page(uri: str, experiment: str, run: str | None) -> str:
    """The experiment's runs (or one run's page), in the model-training view: MLflow 3.17's UI
    starts on its GenAI view unless the address says which. The runs as `_runs_view` lays them out."""
    from mlflow.tracking import MlflowClient

    from .compare import full_run_id
    from .mlflow_quiet import quiet_libraries

    quiet_libraries()
    client = MlflowClient(tracking_uri=uri)
    if run is not None:
        try:
            found = client.get_run(full_run_id(client, run))
        except LookupError as e:  # the start of several ids
            print(f"Warning: {e}: opening the experiment's runs", file=sys.stderr)
        except Exception:
            print(f"Warning: no run {run} in {uri}: opening the experiment's runs", file=sys.stderr)
        else:
            return f"#/experiments/{found.info.experiment_id}/runs/{found.info.run_id}{MLFLOW_VIEW}"
    experiment_id = "0"  # MLflow's Default, where the store has no such experiment yet
    with contextlib.suppress(Exception):
        named = client.get_experiment_by_name(experiment)
        if named is not None:
            experiment_id = str(named.experiment_id)
    return f"#/experiments/{experiment_id}/runs{_runs_view(client, experiment_id)}"


@dataclass(frozen=True)
class Comparison:
    """What the runs are compared by: the objective (`eval/return_mean`, max or min) and the params
    a sweep varied (`agent.hyperparams.learning_rate`), with the names of the runs shown."""

    objective: str
    mode: str
    params: tuple[str, ...]
    names: tuple[str, ...]


def _runs_view(client: Any, experiment_id: str) -> str:
    """The runs page's query: the model-training view, sorted by the objective, best first, with the
    objective and the latest sweep's params as the first columns after a Run Name column as wide as
    the names. Columns and widths are not read from an address: MLflow 3.17 reads them from a shared
    view, an experiment tag `mlflow.sharedViewState.KEY` named by `viewStateShareKey=KEY` (what its
    Share button writes). Where the tag cannot be written (a read-only store), the address sorts."""
    try:
        found = _comparison(client, experiment_id)
    except Exception:  # a store that cannot be searched: the runs, as MLflow shows them
        found = None
    if found is None:
        return MLFLOW_VIEW
    metric = f"metrics.`{found.objective}`"
    ascending = found.mode == "min"
    state = _view_state(found, metric, ascending)
    text = json.dumps(state, sort_keys=True)
    key = f"framework-{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    try:
        client.set_experiment_tag(experiment_id, f"{SHARED_VIEW_TAG}{key}", text)
    except Exception:
        order = urllib.parse.urlencode({"orderByKey": metric, "orderByAsc": str(ascending).lower()})
        return f"{MLFLOW_VIEW}&{order}"
    return f"{MLFLOW_VIEW}&viewStateShareKey={key}"


def _comparison(client: Any, experiment_id: str) -> Comparison | None:
    """The objective and swept params of the experiment's latest sweep (its parent's tags), else the
    objective of its latest run that names one; None for an experiment without either."""
    from framework.contracts.tracker import SUMMARY_SPEC_TAG

    runs = client.search_runs(
        [experiment_id], max_results=RUNS_LOOKED_AT, order_by=["attributes.start_time DESC"]
    )
    names = tuple(str(r.info.run_name or "") for r in runs)
    for parent in runs:
        tags = parent.data.tags
        if "framework.swept_keys" not in tags or "framework.objective" not in tags:
            continue
        try:
            mode = str(json.loads(tags.get(SUMMARY_SPEC_TAG, "{}")).get("mode", "max"))
            swept = [str(k) for k in json.loads(tags["framework.swept_keys"])]
        except (ValueError, AttributeError):
            continue
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        logged = {key for child in children for key in child.data.params}
        return Comparison(tags["framework.objective"], mode, _params(swept, logged), names)
    for run in runs:
        params = run.data.params
        if "objective.metric" in params:
            return Comparison(params["objective.metric"], params.get("objective.mode", "max"), (), names)
    return None


def _params(swept: list[str], logged: set[str]) -> tuple[str, ...]:
    """The params a sweep's keys were logged as: the key itself, a group's plugin (`agent` →
    `agent.name`); every key as given where no child's params were found."""
    if not logged:
        return tuple(swept)
    found = [key if key in logged else f"{key}.name" for key in swept]
    return tuple(key for key in found if key in logged)


def _view_state(found: Comparison, metric: str, ascending: bool) -> dict[str, Any]:
    """MLflow 3.17's view state (its `selectedColumns`, `columnOrder`, `columnWidths`, `orderByKey`,
    `orderByAsc`): the objective and the params shown, first after the run's name and start (MLflow
    keeps those two ahead of its metric and param groups), in columns wide enough for their
    headers; the Run Name column as wide as the longest name, up to WIDEST_NAME_COLUMN_PX."""
    from .run_names import text_width

    params = [f"params.`{key}`" for key in found.params]
    longest = max((text_width(name) for name in found.names), default=0.0)
    widths = {RUN_NAME_COLUMN: _clamp(longest + NAME_CELL_PX, 190, WIDEST_NAME_COLUMN_PX)}
    for column, header in ((metric, found.objective), *zip(params, found.params, strict=True)):
        widths[column] = _clamp(text_width(header) + HEADER_CELL_PX, 100, 240)
    return {
        "selectedColumns": [metric, *params],
        "columnOrder": [RUN_NAME_COLUMN, CREATED_COLUMN, metric, *params],
        "columnWidths": {k: round(v) for k, v in widths.items()},
        "orderByKey": metric,
        "orderByAsc": ascending,
    }


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _wait_until_it_answers(address: str, server: subprocess.Popen[bytes]) -> bool:
    """Whether `server` came to answer on `address`: False once it has exited (another took its
    port, say) or after START_TIMEOUT_S. Another server answering there is not it (`holds_port`)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    port = local_views.port_of(address)
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        if local_views.answers(address) and local_views.holds_port(server.pid, port) is not False:
            return True
        time.sleep(0.25)
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
