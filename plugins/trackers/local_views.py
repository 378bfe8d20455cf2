"""A local MLflow store as `ui` and `compare` share it: the tracking a command line names, the `ui`
server a call started on the store (its record, whether it answers), and the page `compare` last
wrote for an experiment."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .store_checks import limit_http_waits, server_unreachable
from .store_template import cache_dir

SQLITE = "sqlite:///"
#: The longest a `ui` call waits for another that is starting the same store's server.
START_LOCK_S = 120.0
#: The port `ui` serves a store on where it is free.
DEFAULT_PORT = 5000


def tracking(overrides: list[str]) -> tuple[str, str]:
    """The tracking URI and experiment of the config these overrides compose (the run's defaults)."""
    from omegaconf import OmegaConf

    from framework.app import compose
    from framework.errors import ConfigError

    wrong = [o for o in overrides if not o.lstrip("+").startswith(("tracking.", "tracking="))]
    if wrong:
        raise ValueError(
            f"{' '.join(wrong)}: `ui` takes --port, --no-browser, --run and the overrides tracking.uri=... "
            "and tracking.experiment=..."
        )
    try:
        cfg = compose(overrides)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # Hydra's refusal of an override: one line
        raise ValueError(str(e).splitlines()[0]) from None
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    if uri is None:
        raise ValueError("tracking is off in this config (tracking=none): give tracking=mlflow")
    # A server gone is said at once, as a run says it, not after MLflow's minutes of retries.
    limit_http_waits(int(cfg.tracking.http_timeout_s), int(cfg.tracking.http_retries))
    timeout_s = float(cfg.tracking.check_timeout_s)
    reason = server_unreachable(str(uri), timeout_s=timeout_s)
    if reason is not None:
        raise ValueError(
            f"The MLflow tracking server tracking.uri={uri} does not answer ({reason}) within "
            f"{timeout_s:g} s: start it, or give one that runs (the local store: "
            "tracking.uri=sqlite:///mlflow.db)"
        )
    return absolute_uri(str(uri)), str(OmegaConf.select(cfg, "tracking.experiment", default="framework"))


def missing_experiment(uri: str, experiment: str) -> str | None:
    """Why the store has no experiment `experiment` to open, naming those it has; None where it has."""
    from mlflow.tracking import MlflowClient

    from framework.errors import did_you_mean

    from .mlflow_quiet import quiet_libraries

    quiet_libraries()
    client = MlflowClient(tracking_uri=uri)
    try:
        if client.get_experiment_by_name(experiment) is not None:
            return None
        names = sorted(e.name for e in client.search_experiments())
    except Exception:  # a store MLflow cannot read says so itself, as the UI opens
        return None
    return (
        f"tracking.experiment={experiment}: no such experiment in {uri}.{did_you_mean(experiment, names)} "
        f"Its experiments: {', '.join(names)}."
    )


def absolute_uri(uri: str) -> str:
    """Pin a relative SQLite path to the launch directory, so every job of a sweep shares it (a job that
    `hydra.job.chdir=true` moved into its own directory too)."""
    if uri.startswith(SQLITE) and not uri.startswith(SQLITE + "/"):
        return SQLITE + str((launch_dir() / uri[len(SQLITE) :]).resolve())
    return uri


def launch_dir() -> Path:
    """The directory the command was started in: Hydra's `runtime.cwd` in a job, else this one."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.cwd) if HydraConfig.initialized() else Path.cwd()


def running(uri: str) -> dict[str, Any] | None:
    """The server a `ui` call started on this store, if it still runs and answers."""
    try:
        found = json.loads(record_path(uri).read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    address = str(found.get("address"))
    if found.get("uri") != uri or not answers(address):
        return None
    # The address answers; on Linux, also the server this record names and not another on its port.
    return None if holds_port(int(found["pid"]), port_of(address)) is False else found


def ui_address(uri: str) -> str:
    """Where `ui` serves the store: its running server's address, else the port it would take now."""
    found = running(uri)
    if found is not None:
        return str(found["address"])
    return f"http://127.0.0.1:{port_for(uri) or own_port(uri)}"


def port_for(uri: str) -> int | None:
    """The port `ui` takes for this store now: 5000 where free, else the store's own where free."""
    return next((port for port in (DEFAULT_PORT, own_port(uri)) if free(port)), None)


def own_port(uri: str) -> int:
    """The store's own port, 5001-5999 by its path: a link printed while another store's `ui` holds
    5000 still opens this store's."""
    return 5001 + int(key(uri), 16) % 999


def free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:`port` now."""
    with socket.socket() as s:
        # As uvicorn binds: a port whose last connections are closing (TIME_WAIT) is free to serve on.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"{address}/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def port_of(address: str) -> int:
    return int(urllib.parse.urlsplit(address).port or 80)


def holds_port(group: int, port: int) -> bool | None:
    """Whether a process of process group `group` listens on TCP `port`; None where /proc cannot say.

    Two servers started at once may each find a port free: the one that loses it exits, after the
    other answers on it, so an answer alone does not say whose server it is."""
    listening: set[str] = set()
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    for table in tables:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                listening.add(f"socket:[{fields[9]}]")  # 0A: LISTEN; field 9 is the socket's inode
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:  # stat's fields after the command's closing parenthesis: state, ppid, pgrp, ...
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            if any(os.readlink(fd) in listening for fd in (proc / "fd").iterdir()):
                return True
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
    return False


def record_path(uri: str) -> Path:
    return cache_dir() / f"ui-{key(uri)}.json"


def key(uri: str) -> str:
    return hashlib.sha1(uri.encode()).hexdigest()[:12]


def remember_page(uri: str, experiment: str, page: Path, words: Sequence[str] = ()) -> None:
    """The latest page for this store and experiment, which `ui` names, and the `compare` words that wrote
    it (its runs, `--env`, ...; not its store nor its folder)."""
    record = _page_record(uri, experiment)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(
        json.dumps({"page": str(page.resolve()), "uri": uri, "experiment": experiment, "words": list(words)})
    )


def latest_page(uri: str, experiment: str) -> tuple[Path, list[str]] | None:
    """The page `compare` last wrote for this store and experiment, if it is still there, and its words."""
    try:
        record = json.loads(_page_record(uri, experiment).read_text())
        page, words = Path(record["page"]), [str(w) for w in record.get("words", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return (page, words) if page.is_file() else None


def _page_record(uri: str, experiment: str) -> Path:
    with_key = hashlib.sha1(f"{uri}\n{experiment}".encode()).hexdigest()[:12]
    return cache_dir() / f"compare-{with_key}.json"


def start_server(uri: str, port: int, log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`mlflow ui` on the store, on 127.0.0.1:`port`, in a process group of its own, ended (SIGTERM)
    when the `ui` command that started it dies, killed too (Linux's parent-death signal)."""
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
        # One worker: a store on this machine is browsed by one person, and SQLite takes one writer
        # at a time; MLflow's default four each import MLflow (~3 s of CPU apiece at every start).
        "--workers",
        "1",
    ]
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            preexec_fn=_dies_with_its_parent,
        )


def stop_server(server: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """The server and its workers (its own process group): SIGTERM, SIGKILL after `grace_s`; returns
    once none is left (`mlflow ui` may exit before the uvicorn it started has)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if server.poll() is not None and not _group_runs(server.pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, sig)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=grace_s)
        while time.monotonic() < deadline and _group_runs(server.pid):
            time.sleep(0.05)


def _group_runs(group: int) -> bool:
    """Whether a process of process group `group` runs (one that has exited but is not reaped does
    not); False where there is no /proc to say."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


def _dies_with_its_parent() -> None:
    """In the child before it runs: SIGTERM to it when its parent dies (prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class StartLock:
    """Held while a `ui` call looks for this store's server and starts one: a second call waits (at
    most START_LOCK_S), then finds the first one's."""

    def __init__(self, uri: str) -> None:
        path = record_path(uri).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + START_LOCK_S
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:  # a call stuck starting: go on without it
                    return
                time.sleep(0.1)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # its lock with it
            self._fd = None

    def __enter__(self) -> StartLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
