"""Shared fixtures: a real MLflow server on 127.0.0.1, and a runner for the command line."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from framework.machine import short_openmp_spin
from tests.zygote_client import ZYGOTE, ForkedCli, shell_env

# Ray's token authentication (its default) spelled out before any test imports Ray: a cluster of
# several nodes (ray.cluster_utils.Cluster) needs it said, and Ray reads it when it is imported.
os.environ.setdefault("RAY_AUTH_MODE", "token")
# libgomp's workers (numba's parallel kernels, torch's) in the test processes spin briefly before they
# sleep, as a run's do (framework.machine): set before either library loads.
short_openmp_spin()

REPO = Path(__file__).resolve().parents[1]

#: The test processes' own settings, the numba warm-up and the groups of shared servers.
pytest_plugins = ["tests.suite_processes"]

#: Small budgets that keep an end-to-end PPO run on CartPole to a few seconds.
FAST = [
    "total_steps=1024",
    "eval.every_steps=512",
    "eval.episodes=2",
    "checkpoint.every_steps=512",
    "log_every_s=0.5",
]


#: The system packages the browser, rules and PeerJS tests run (README: "Running the tests").
INSTALL_SYSTEM_PACKAGES = "sudo apt-get install -y chromium nodejs npm"


def require_tool(name: str) -> str:
    """The path of a system program a test needs; a failure naming the install command without it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` is not installed, and this test runs it. Install the system packages the tests "
            f"need: {INSTALL_SYSTEM_PACKAGES}",
            pytrace=False,
        )
    return path


#: The TMPDIR of the tests' Chromiums (this process's), made at the first and removed at the session's end.
_chromium_tmp: list[Path] = []


def chromium_env() -> dict[str, str]:
    """The environment of a test's Chromium: its temporary files (the `org.chromium.Chromium.*`
    folders it leaves in TMPDIR when it is killed) go to a folder of this session's, removed at its
    end. A short path in /tmp: Chromium's socket paths are limited to 107 characters."""
    if not _chromium_tmp:
        _chromium_tmp.append(Path(tempfile.mkdtemp(prefix="fw-chromium-", dir="/tmp")))
    return {**os.environ, "TMPDIR": str(_chromium_tmp[0])}


def pytest_sessionfinish(session: pytest.Session) -> None:
    for folder in _chromium_tmp:
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MlflowServer:
    uri: str
    process: subprocess.Popen[bytes]

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """`mlflow server` on 127.0.0.1 with a SQLite backend and proxied artifacts. A free port can be
    taken by another process (a test's Ray) before the server binds it: then it tries another."""
    from framework_plugins.trackers.ui import server_env

    root = tmp_path_factory.mktemp("mlflow-server")
    tried = []
    for attempt in range(3):
        port = free_port()
        log = open(root / f"server{attempt}.log", "wb")  # noqa: SIM115 - held open for the server's lifetime
        process = subprocess.Popen(
            [
                sys.executable, "-m", "mlflow", "server",
                "--host", "127.0.0.1",
                "--port", str(port),
                "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                "--artifacts-destination", str(root / "artifacts"),
                "--workers", "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=server_env(),
        )  # fmt: skip
        uri = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        state = _health(uri)
        while state == "down" and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            state = _health(uri)
        if state == "up":
            break
        process.kill()
        process.wait()
        log.close()
        tried.append(f"port {port}: {state}, {(root / f'server{attempt}.log').read_text()[-1500:]}")
    else:
        raise RuntimeError("mlflow server did not start:\n" + "\n".join(tried))
    yield MlflowServer(uri, process)
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


def _health(uri: str) -> str:
    """ "up" (mlflow answers), "down" (nothing listens yet) or "another server" (something that is
    not an HTTP server answering 200 there)."""
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
            return "up" if r.status == 200 else "another server"
    except http.client.RemoteDisconnected:  # closed without an answer: starting
        return "down"
    except http.client.HTTPException:  # an answer that is not HTTP
        return "another server"
    except OSError:  # not listening yet
        return "down"


#: The widest line the CLI prints, a path or an address aside.
COLUMNS = 100
#: What a loaded 2-core machine may add to a time a test bounds (the other processes' turns at the
#: CPU): a test's bound is the strict figure plus this; benchmarks/ measure the strict figures.
LOADED_S = 2.0
#: A word that is a path or an address (the tests' own reading, not the code's).
ADDRESS = re.compile(r"://|(?:^|[=('\"`])(?:/|~/)")
#: Where a message goes on after a break made to fit COLUMNS: a line two spaces in.
WRAPPED = re.compile(r"\n  (?=\S)")


def too_wide(text: str) -> list[str]:
    """The lines of `text` over COLUMNS by more than their paths and addresses."""
    return [
        line
        for line in text.splitlines()
        if len(line) - sum(len(w) for w in line.split() if ADDRESS.search(w)) > COLUMNS
    ]


def unwrapped(text: str) -> str:
    """`text` with each message whole again: a line that goes on from the one before, joined to it."""
    return WRAPPED.sub(" ", text)


@dataclass
class CliResult:
    """A command's exit status and output. `stderr` holds what it said there, each message on one
    line (the breaks that fit it in COLUMNS undone: tests read what it says); `printed_stderr`
    holds it as printed, the lines that fit 100 columns."""

    returncode: int
    stdout: str
    stderr: str
    printed_stderr: str = ""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def said(self) -> str:
        """Its stdout and stderr as words, one space between each: what it said, however its lines
        were wrapped to fit (a log line too long for 100 columns goes on in the next)."""
        return " ".join(self.output.split())


def descendants(pid: int) -> set[int]:
    """Every live process under `pid` (from /proc: a session of its own does not hide a child)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def run_cli(*args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> CliResult:
    """`python -m framework ARGS` in `cwd`, as a user would type it: in a process of its own, forked
    by this test process's zygote (tests/cli_zygote.py) where what it would import at start is the
    zygote's already, else a new interpreter."""
    full_env = shell_env({"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", **(env or {})})
    forked = ZYGOTE.run(list(args), cwd=cwd, env=full_env, timeout=timeout)
    if forked is not None:
        code, stdout, stderr = forked
        return CliResult(code, stdout, unwrapped(stderr), stderr)
    p = subprocess.run(
        [sys.executable, "-m", "framework", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        stdin=subprocess.DEVNULL,
    )
    return CliResult(p.returncode, p.stdout, unwrapped(p.stderr), p.stderr)


def start_cli(*args: str, cwd: Path, **popen: Any) -> subprocess.Popen[str] | ForkedCli:
    """`python -m framework ARGS` started in `cwd`, unbuffered, its stdout and stderr in one text pipe:
    forked by the zygote as `run_cli` is, else (or given Popen's other arguments) a new interpreter."""
    return popen_cli(*args, cwd=cwd, **popen)


def popen_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: int | None = None,
    stderr: int = subprocess.STDOUT,
    text: bool = True,
    **popen: Any,
) -> Any:
    """`python -m framework ARGS` started in `cwd`, unbuffered, as `subprocess.Popen` starts it with
    stdout=PIPE and `stdin` (None, DEVNULL or PIPE), `stderr` (STDOUT or PIPE) and `text`: forked
    by the zygote where it can be, else (or given Popen's other arguments) a new interpreter."""
    full_env = shell_env({"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", **(env or {})})
    forked = None
    if not popen:
        forked = ZYGOTE.start(
            list(args), cwd=cwd, env=full_env, stdin=stdin == subprocess.PIPE,
            stderr=stderr == subprocess.PIPE, text=text,
        )  # fmt: skip
    if forked is None:
        forked = subprocess.Popen(
            [sys.executable, "-m", "framework", *args],
            cwd=cwd,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=text,
            env=full_env,
            **popen,
        )
    _started.append(forked)
    return forked


#: The command lines the test under way started (`popen_cli`).
_started: list[Any] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A command line a test started and left running (it failed before it ended it) is killed once
    the test's fixtures are done, so that it and its local Ray do not run through the next tests
    (killed outright, a run's reaper still ends its Ray); after the last test that asks for the
    tests' Ray, that Ray ends."""
    try:
        return (yield)
    finally:
        if "ray_session" in getattr(item, "fixturenames", ()):
            _ray_tests_left[0] -= 1
            if _ray_tests_left[0] == 0 and _ray_end:
                _ray_end.pop()()
        while _started:
            process = _started.pop()
            if process.poll() is None:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.communicate(timeout=30)


@pytest.fixture
def cli(tmp_path: Path):
    """Run the command line in a fresh directory (so ./mlflow.db and outputs/ are the test's own)."""

    def call(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> CliResult:
        return run_cli(*args, cwd=tmp_path, timeout=timeout, env=env)

    return call


@dataclass
class RaySession:
    address: str
    """host:port of the session's Ray, for ray.address= and the Hydra Ray launcher."""


@pytest.fixture(scope="session")
def ray_session() -> Iterator[RaySession]:
    """One real local Ray for the whole test session (starting one takes seconds), on 127.0.0.1.

    Its 8 logical CPUs let a test place an inference actor and several self-play workers on this
    2-core machine; the engines under test join it (ray_runtime.ensure keeps a live connection).
    """
    from framework_plugins.ray_runtime import reaper as ray_reaper
    from framework_plugins.ray_runtime import runtime as ray_runtime

    ray_runtime.prefer_loopback()
    import ray

    address = ray_runtime.start_local(ray, num_cpus=8, num_gpus=0)
    session = ray._private.worker._global_node.get_session_dir_path()

    def end() -> None:
        ray.shutdown()
        ray_reaper.remove_session(session)  # its logs and sockets in /tmp/ray, as a run's own Ray does

    _ray_end.append(end)
    yield RaySession(address=address)
    while _ray_end:
        _ray_end.pop()()


#: How to end the tests' Ray, while it runs; and the tests that ask for it left to run in this
#: process. It ends after the last of them, not with the session: its servers and idle workers took
#: ~3.5 s of CPU a minute, and its tests (one group) run first. (Where they are spread over several
#: processes, as under `--dist load`, none sees the count reach 0, and it ends with the session.)
_ray_end: list[Callable[[], None]] = []
_ray_tests_left = [0]


def pytest_collection_finish(session: pytest.Session) -> None:
    _ray_tests_left[0] = sum("ray_session" in getattr(item, "fixturenames", ()) for item in session.items)
