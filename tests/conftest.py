"""Shared fixtures: a real MLflow server on 127.0.0.1, and a runner for the command line."""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from tests import cli_zygote

# Ray's token authentication (its default) spelled out before any test imports Ray: a cluster of
# several nodes (ray.cluster_utils.Cluster) needs it said, and Ray reads it when it is imported.
os.environ.setdefault("RAY_AUTH_MODE", "token")

REPO = Path(__file__).resolve().parents[1]

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


class Zygote:
    """This test process's zygote (tests/cli_zygote.py), started on first use; any number of command
    lines at once, each in a child of its own."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.requests: socket.socket | None = None
        self.env: dict[str, str] = {}
        """The zygote's load-time variables, as it reported them once ready."""
        self.imported: list[str] = []
        self.usable = not os.environ.get("FRAMEWORK_TESTS_NO_ZYGOTE")
        """Set FRAMEWORK_TESTS_NO_ZYGOTE=1 to run every command line in a new interpreter."""
        self.lock = threading.Lock()
        self.changed = threading.Condition()
        self.ready: dict[str, Any] | None = None
        self.pids: dict[int, int] = {}
        """Each request's child, by the request's number."""
        self.codes: dict[int, int] = {}
        """Each ended child's exit status, by its pid."""
        self.gone = False
        self.asked = 0

    def run(
        self, args: list[str], *, cwd: Path, env: dict[str, str], timeout: float
    ) -> tuple[int, str, str] | None:
        """(exit status, stdout, stderr) of `python -m framework ARGS` forked; None where it cannot be."""
        if not self._forkable(args, env):
            return None
        with tempfile.TemporaryDirectory(prefix="framework-cli-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            files = [os.open(os.devnull, os.O_RDONLY)]
            files += [os.open(path, os.O_WRONLY | os.O_CREAT, 0o600) for path in (out, err)]
            child = self._fork(args, cwd=cwd, env=env, fds=files)
            if child is None:
                return None
            code = child.wait_for(timeout)
            if code is None:
                child.kill()
                child.wait_for(30.0)
                raise subprocess.TimeoutExpired(
                    [sys.executable, "-m", "framework", *args], timeout, out.read_bytes(), err.read_bytes()
                )
            return code, out.read_text(errors="replace"), err.read_text(errors="replace")

    def start(
        self, args: list[str], *, cwd: Path, env: dict[str, str], stdin: bool, stderr: bool, text: bool
    ) -> ForkedCli | None:
        """`python -m framework ARGS` forked, its stdout a pipe, as Popen starts one with stdout=PIPE:
        stdin a pipe too or /dev/null, stderr a pipe of its own or stdout's; None where it cannot be."""
        if not self._forkable(args, env):
            return None
        ours: list[int | None] = []
        theirs: list[int] = []
        for wanted, reads in ((stdin, True), (True, False), (stderr, False)):
            if not wanted:
                ours.append(None)
                theirs.append(os.open(os.devnull, os.O_RDONLY) if reads else os.dup(theirs[1]))
                continue
            read, write = os.pipe()
            ours.append(write if reads else read)
            theirs.append(read if reads else write)
        child = self._fork(args, cwd=cwd, env=env, fds=theirs)
        if child is None:
            for fd in ours:
                if fd is not None:
                    os.close(fd)
            return None
        mode = {"encoding": "utf-8", "errors": "replace"} if text else {}
        opened = [
            None if fd is None else open(fd, ("w" if i == 0 else "r") + ("" if text else "b"), **mode)  # noqa: SIM115
            for i, fd in enumerate(ours)
        ]
        child.stdin, child.stdout, child.stderr = opened
        return child

    def _forkable(self, args: list[str], env: dict[str, str]) -> bool:
        if not self.usable or not self._started() or not cli_zygote.forkable(env, self.env, self.imported):
            self._log_why(args, env)
            return False
        return True

    def _fork(self, args: list[str], *, cwd: Path, env: dict[str, str], fds: list[int]) -> ForkedCli | None:
        """Ask for a child with `fds` as its stdin, stdout and stderr (closed here, the child holding
        its own); None where the zygote is gone."""
        try:
            with self.lock:
                self.asked += 1
                asked = self.asked
                request = {"id": asked, "args": args, "cwd": str(cwd), "env": env}
                assert self.requests is not None
                try:
                    socket.send_fds(self.requests, [json.dumps(request).encode()], fds)
                except OSError as e:
                    self._log_why(args, env, f"{e!r}")
                    return None
        finally:
            for fd in fds:
                os.close(fd)
        with self.changed:
            if not self.changed.wait_for(lambda: asked in self.pids or self.gone, 30.0) or self.gone:
                raise AssertionError("the zygote did not fork")
            pid = self.pids.pop(asked)
        return ForkedCli(self, pid, [sys.executable, "-m", "framework", *args])

    def _log_why(self, args: list[str], env: dict[str, str], why: str = "") -> None:
        """With FRAMEWORK_TESTS_ZYGOTE_LOG=PATH: a line in PATH for each command line run in a new
        interpreter, with the load-time variables that kept it from the zygote."""
        path = os.environ.get("FRAMEWORK_TESTS_ZYGOTE_LOG")
        if path:
            differ = cli_zygote.unlike(env, self.env, self.imported)
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} usable={self.usable} differ={differ} {why}args={args[:4]}\n")

    def _started(self) -> bool:
        with self.lock:
            if self.process is not None:
                return self.usable and not self.gone
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.cli_zygote", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                cwd=Path(__file__).parent.parent,
                env=env,
                pass_fds=[theirs.fileno()],
            )
            theirs.close()
            self.requests = ours
            threading.Thread(target=self._read, daemon=True, name="zygote-answers").start()
            with self.changed:
                self.changed.wait_for(lambda: self.ready is not None or self.gone, 120.0)
            ready = self.ready or {}
            self.usable = bool(ready.get("ready")) and not self.gone
            self.env, self.imported = dict(ready.get("env", {})), list(ready.get("imported", []))
            return self.usable

    def _read(self) -> None:
        """The zygote's answers, a JSON line each: ready; a request's child; a child's exit status."""
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            answer = json.loads(line)
            with self.changed:
                if "ready" in answer:
                    self.ready = answer
                elif "id" in answer:
                    self.pids[int(answer["id"])] = int(answer["pid"])
                    # An earlier child's status nobody waited for: its pid is this one's now.
                    self.codes.pop(int(answer["pid"]), None)
                else:
                    self.codes[int(answer["pid"])] = int(answer["code"])
                self.changed.notify_all()
        with self.changed:
            self.gone = True
            self.changed.notify_all()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.requests is not None
            self.requests.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


class ForkedCli:
    """A command line the zygote forked, as `subprocess.Popen` shows one: `pid`, `stdin`, `stdout`,
    `stderr`, `poll`, `wait`, `communicate`, `send_signal`, `terminate`, `kill`, `returncode`; its
    exit status is the zygote's word."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        self.returncode: int | None = None
        self._readers: list[tuple[threading.Thread, list[Any]]] = []

    def wait_for(self, timeout: float | None) -> int | None:
        """The exit status, once it has one within `timeout` seconds; else None."""
        z = self.zygote
        with z.changed:
            z.changed.wait_for(lambda: self.pid in z.codes or z.gone, timeout)
            if self.pid in z.codes:
                self.returncode = z.codes.pop(self.pid)
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else self.wait_for(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self.poll() if self.returncode is not None else self.wait_for(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """The rest of its stdout and stderr (None for one that is not a pipe) once it has ended, as
        Popen's: its stdin closed first."""
        if self.stdin is not None and not self.stdin.closed:
            with contextlib.suppress(OSError):
                self.stdin.close()
        if not self._readers:
            for stream in (self.stdout, self.stderr):
                read: list[Any] = []
                if stream is not None:
                    thread = threading.Thread(target=lambda s=stream, r=read: r.append(s.read()), daemon=True)
                    thread.start()
                    self._readers.append((thread, read))
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread, _ in self._readers:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        got = iter(read[0] if read else "" for _, read in self._readers)
        return tuple(None if stream is None else next(got) for stream in (self.stdout, self.stderr))  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


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


ZYGOTE = Zygote()
atexit.register(ZYGOTE.close)


def run_cli(*args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> CliResult:
    """`python -m framework ARGS` in `cwd`, as a user would type it: in a process of its own, forked
    by this test process's zygote (tests/cli_zygote.py) where what it would import at start is the
    zygote's already, else a new interpreter."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", **(env or {})}
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
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", **(env or {})}
    forked = None
    if not popen:
        forked = ZYGOTE.start(
            list(args), cwd=cwd, env=full_env, stdin=stdin == subprocess.PIPE,
            stderr=stderr == subprocess.PIPE, text=text,
        )  # fmt: skip
    if forked is not None:
        return forked
    return subprocess.Popen(
        [sys.executable, "-m", "framework", *args],
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=text,
        env=full_env,
        **popen,
    )


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
    yield RaySession(address=address)
    ray.shutdown()
    ray_reaper.remove_session(session)  # its logs and sockets in /tmp/ray, as a run's own Ray does


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in each test process, as in each worker of a run: pytest-xdist runs a
    process per core, and torch's own threads beside them would spin against each other."""
    import torch

    torch.set_num_threads(1)


#: Fixtures that start a server or take a minute to make (a regular install of the package): their
#: tests run in one pytest-xdist process (one group each), so that the suite makes each once, not
#: once per process.
SHARED_SERVERS = {"ray_session": "ray", "mlflow_server": "mlflow-server", "wheel_install": "wheel-install"}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Mark each test of a shared server with its group, before pytest-xdist reads the groups into
    node ids; then check that it did, as a silent failure starts every server once per process."""
    grouped: dict[pytest.Item, str] = {}
    for item in items:
        for fixture, group in SHARED_SERVERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                grouped[item] = group
                break
    yield
    if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup
        lost = [item.nodeid for item, group in grouped.items() if not item.nodeid.endswith(f"@{group}")]
        if lost:  # said on the terminal too: pytest-xdist's controller reports only a crashed worker
            raise _said(
                f"pytest-xdist did not group {len(lost)} tests of a shared server (first: {lost[0]}), "
                "as under pytest 9.2 (pytest-xdist issue 1386): install the test extra's pytest "
                '(pip install -e ".[test]") or run one process (-n 0)'
            )


def _said(message: str) -> pytest.UsageError:
    print(f"\nERROR: {message}", file=sys.__stderr__, flush=True)
    return pytest.UsageError(message)
