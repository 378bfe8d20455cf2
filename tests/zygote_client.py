"""The tests' side of their zygote (tests/cli_zygote.py): `ZYGOTE`, this test process's, started on
first use, which forks `python -m framework ARGS` for `run_cli` and `start_cli` (tests/conftest.py),
and `ForkedCli`, a command line it forked as `subprocess.Popen` shows one."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from tests import cli_zygote

#: Variables a library sets in the process that imports it, for the processes that process starts:
#: OpenCV (imported by Stable-Baselines3 and gymnasium's Atari wrappers) prepends its folder to
#: LD_LIBRARY_PATH. A test process that has imported it still gives its command lines, and its
#: zygote, the value it started with, as a user's shell would; otherwise every command line after
#: the test that first imported it differs from the zygote in a load-time variable and runs in a
#: new interpreter (in a whole run, test modules import it as they are collected, before the
#: zygote starts; in a run of a few files, often in the middle). torch._dynamo (imported by torch's
#: optimizers as the first is made, and by the zygote) sets TORCHINDUCTOR_CACHE_DIR to its default.
SET_BY_IMPORTS = ("LD_LIBRARY_PATH", "TORCHINDUCTOR_CACHE_DIR")
_STARTED_WITH = {k: os.environ.get(k) for k in SET_BY_IMPORTS}


def shell_env(changes: dict[str, str]) -> dict[str, str]:
    """This process's environment with the variables of `SET_BY_IMPORTS` as it started, and `changes`."""
    env = dict(os.environ)
    for key, value in _STARTED_WITH.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return {**env, **changes}


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
            env = shell_env({"PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"})
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
        if self.returncode is not None:
            return self.returncode
        z = self.zygote
        with z.changed:
            z.changed.wait_for(lambda: self.pid in z.codes or z.gone, timeout)
            if self.pid in z.codes:
                self.returncode = z.codes.pop(self.pid)
        return self.returncode

    def poll(self) -> int | None:
        return self.wait_for(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self.wait_for(timeout)
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


ZYGOTE = Zygote()
atexit.register(ZYGOTE.close)
