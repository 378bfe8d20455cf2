"""`python -m framework ARGS` for the tests without paying its imports each time: a zygote process
that has imported what every command line imports (torch, Hydra, MLflow, the core, the Gomoku
kernels) forks a child per command line, and the child runs the command as `python -m framework`
would, in its own process, directory and environment, its stdout and stderr in files, exiting as
the interpreter does (threads joined, atexit handlers run).

A run's tracking process is forked by the zygote too (tests/zygote_tracking.py).

What the tests check of a command line (its output, its exit status, what it leaves behind) is the
same; what they cannot check this way is what the interpreter reads as it starts or as a library
loads (`-X importtime`, OpenMP's settings, Ray's loopback variable), so a command line given such an
environment runs a new interpreter, and so does its tracking process.

Several command lines may run at once (a test that starts eight runs together, one that signals a
run while another runs): each request carries its child's stdin, stdout and stderr as file
descriptors (/dev/null and files, or the ends of pipes that the test writes or reads as the run
goes), passed over the socket whose descriptor the zygote is given.

    python -m tests.cli_zygote FD   (a JSON request a message on socket FD, with its child's stdin,
                                     stdout and stderr; answers a JSON line each on stdout)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import socket
import sys
import threading
import time
from typing import Any

from tests.zygote_tracking import MESSAGE, TrackingLauncher, run_tracking

#: Variables read as the interpreter starts or as a library loads: a command line whose environment
#: differs from the zygote's in one of them runs in a new interpreter (`forkable`).
LOAD_TIME = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "NUMBA_", "RAY_", "TORCH", "CUDA", "LD_", "HYDRA_")
#: Intel's or LLVM's OpenMP runtime, the one library that reads KMP_* (libgomp, torch's and
#: scikit-learn's, does not; threadpoolctl and scikit-learn set two of them in the test process).
KMP_RUNTIME = "libiomp5 or libomp"
#: Those read only by a library the zygote has not imported (it reads them in the child, as the
#: child's), by the prefix and the library.
LOADED_LATER = {"RAY_": "ray", "TORCHINDUCTOR_": "torch._inductor", "KMP_": KMP_RUNTIME}
#: Not read as the interpreter starts, or read then by nothing a run computes: the string hashes'
#: seed, which a run sets for the processes it starts (and, run in the test process itself, leaves
#: set there); `breakpoint()`'s hook, read at each call (ray.init sets it in the process that starts
#: a Ray: the tests' own session Ray).
IGNORED = ("PYTHONHASHSEED", "PYTHONBREAKPOINT")
#: Read as the interpreter starts, and done by the child as the interpreter does: PYTHONPATH's
#: folders go on sys.path after the command's own folder (a test's third-party plugin, found by its
#: entry points there, which nothing has read before the child).
EMULATED = ("PYTHONPATH",)
#: What the zygote imports before it forks: nothing that starts a thread of Python's or an OpenMP
#: pool (numba's parallel kernels start theirs on their first call; Ray reads its loopback variable
#: on import). The native threads that OpenBLAS (numpy's, scipy's) and jemalloc (MLflow's) start
#: are fork-safe.
PRELOAD = (
    "numpy",
    "torch",
    # Imported by torch's optimizers as the first is made (~1.5 CPU-s): once here, not per run.
    "torch._dynamo",
    "hydra",
    "omegaconf",
    "mlflow",
    "framework.app",
    "framework_plugins.trackers.mlflow_tracker",
    "framework_plugins.gomoku.env",
    "framework_plugins.alphazero.agent",
    "framework_plugins.mcts.engines",
    # Imported by torch's TorchScript exporter as AlphaZero's CPU evaluator exports its network (~0.7
    # CPU-s); onnxruntime starts a thread as it is imported, so each run imports its own.
    "onnx",
    "framework_plugins.trackers.tracking_process",
    "framework_plugins.trackers.mlflow_session",
    "mlflow.store.tracking.sqlalchemy_store",
)
#: The PYTHONPATH folders this process started with (on its sys.path already).
ZYGOTE_PATH = tuple(os.environ.get("PYTHONPATH", "").split(os.pathsep))


def forkable(env: dict[str, str], zygote_env: dict[str, str], imported: list[str]) -> bool:
    """Whether a command line with `env` may run in a child of a zygote whose load-time variables are
    `zygote_env` (as they were when it had imported `PRELOAD`, `imported` among them)."""
    return not unlike(env, zygote_env, imported)


def unlike(env: dict[str, str], zygote_env: dict[str, str], imported: list[str]) -> list[str]:
    """The load-time variables that keep a command line with `env` from such a zygote."""
    from framework.machine import short_openmp_spin

    env, zygote_env = dict(env), dict(zygote_env)
    for each in (env, zygote_env):  # as `python -m framework` sets them before it imports torch
        short_openmp_spin(each)
    keys = set(env) | set(zygote_env)
    later = tuple(prefix for prefix, module in LOADED_LATER.items() if module not in imported)
    return sorted(
        k
        for k in keys
        if k.startswith(LOAD_TIME)
        and not k.startswith(later)
        and k not in IGNORED + EMULATED
        and env.get(k) != zygote_env.get(k)
    )


def _run_child(request: dict[str, Any], fds: list[int], zygote: socket.socket) -> None:
    """In the forked child: be `python -m framework ARGS` in the request's directory and environment,
    `fds` its stdin, stdout and stderr, its tracking processes forked by the zygote (`zygote` is its
    socket there)."""
    import runpy

    import framework
    import framework.app

    # The process's start, which a run records as its own (the zygote's was minutes ago).
    framework.STARTED_AT = framework.app.STARTED_AT = time.time()
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, target in enumerate(fds):
            os.dup2(target, fd)
        for target in fds:
            os.close(target)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.path[0] = request["cwd"]
        own = os.environ.get("PYTHONPATH", "")
        sys.path[1:1] = [
            os.path.abspath(folder)
            for folder in own.split(os.pathsep)
            if folder and folder not in ZYGOTE_PATH
        ]
        sys.argv = ["-m", *request["args"]]
        from framework_plugins.trackers import tracking_process

        tracking_process.launch = TrackingLauncher(zygote, tracking_process.launch).launch
        try:
            runpy.run_module("framework", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            import traceback

            traceback.print_exc()
            code = 130
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        # As `python -m framework` ends (where its main did not: an exception it let through).
        from framework.__main__ import leave

        leave(code)
    finally:
        os._exit(code)  # a request that could not be set up


def main() -> None:
    from framework.machine import short_openmp_spin

    requests = socket.socket(fileno=int(sys.argv[1]))
    started = {k: v for k, v in os.environ.items() if k.startswith(LOAD_TIME)}
    short_openmp_spin()  # as python -m framework does, before torch is imported
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    ready = {
        "ready": threading.active_count() == 1,
        "pid": os.getpid(),
        # What a command line's environment is compared with (`forkable`): its load-time variables
        # as it started, and the libraries of LOADED_LATER among what it imported.
        "env": started,
        "imported": [module for module in LOADED_LATER.values() if module in sys.modules]
        + ([KMP_RUNTIME] if _kmp_runtime_loaded() else []),
    }
    print(json.dumps(ready), flush=True)
    Server(requests).serve()


def _kmp_runtime_loaded() -> bool:
    """Whether this process has mapped Intel's or LLVM's OpenMP runtime (libiomp5, libomp)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return any(re.search(r"/lib(iomp5|omp)[.-]", line) for line in maps)


class Server:
    """The zygote's loop: each command line asked on `requests` forked, its start and its exit
    status answered on stdout; meanwhile the tracking processes its child asks for on its socket."""

    def __init__(self, requests: socket.socket) -> None:
        self.requests = requests
        self.selector = selectors.DefaultSelector()
        self.children: dict[socket.socket, int] = {}
        """The socket to each command line's child, and its pid."""
        self.tracking: dict[int, socket.socket] = {}
        """Each tracking process, and the socket of the child that asked for it."""

    def serve(self) -> None:
        self.selector.register(self.requests, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select(timeout=0.05):
                if key.fileobj is self.requests:
                    try:
                        data, fds, _, _ = socket.recv_fds(self.requests, MESSAGE, 3)
                    except OSError:
                        data, fds = b"", []
                    if not data:
                        return  # the test process is done
                    self._fork_command(json.loads(data), fds)
                else:
                    assert isinstance(key.fileobj, socket.socket)
                    self._fork_tracking(key.fileobj)
            self._reap()

    def _held(self) -> list[Any]:
        return [*self.children, self.selector, self.requests]

    def _fork_command(self, request: dict[str, Any], fds: list[int]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            for thing in [*self._held(), ours]:
                thing.close()
            _run_child(request, fds, theirs)
        theirs.close()
        for fd in fds:
            os.close(fd)
        self.children[ours] = pid
        self.selector.register(ours, selectors.EVENT_READ)
        print(json.dumps({"id": request["id"], "pid": pid}), flush=True)

    def _fork_tracking(self, child: socket.socket) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(child, MESSAGE, 3)
        except OSError:
            data, fds = b"", []
        if not data or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            if not data:
                self._forget(child)
            return
        pid = os.fork()
        if pid == 0:
            run_tracking(json.loads(data), fds, self._held())
        for fd in fds:
            os.close(fd)
        self.tracking[pid] = child
        self._send(child, {"pid": pid})

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            if pid in self.tracking:
                self._send(self.tracking.pop(pid), {"exited": pid, "code": code})
                continue
            print(json.dumps({"pid": pid, "code": code}), flush=True)
            for child, child_pid in list(self.children.items()):
                if child_pid == pid:
                    self._forget(child)

    def _send(self, child: socket.socket, message: dict[str, Any]) -> None:
        if child.fileno() >= 0:
            with contextlib.suppress(OSError):  # the child has ended: nobody is left to tell
                child.send(json.dumps(message).encode())

    def _forget(self, child: socket.socket) -> None:
        if child in self.children:
            del self.children[child]
            self.selector.unregister(child)
            child.close()


if __name__ == "__main__":
    main()
