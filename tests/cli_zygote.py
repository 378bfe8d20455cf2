"""`python -m framework ARGS` for the tests without paying its imports each time: a zygote process
that has imported what every command line imports (torch, Hydra, MLflow, the core, the Gomoku
kernels) forks a child per command line, and the child runs the command as `python -m framework`
would, in its own process, directory and environment, its stdout and stderr in files, exiting as
the interpreter does (threads joined, atexit handlers run).

What the tests check of a command line (its output, its exit status, what it leaves behind) is the
same; what they cannot check this way is what the interpreter reads as it starts or as a library
loads (`-X importtime`, OpenMP's settings, Ray's loopback variable), so a command line given such an
environment, and every test that starts one to signal it (`start_cli`), runs a new interpreter.

    python -m tests.cli_zygote   (reads one JSON request a line on stdin, answers one a line)
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

#: Variables read as the interpreter starts or as a library loads: a command line whose environment
#: differs from the zygote's in one of them runs in a new interpreter.
LOAD_TIME = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "NUMBA_", "RAY_", "TORCH", "CUDA", "LD_", "HYDRA_")
#: What the zygote imports before it forks: nothing that starts a thread of Python's or an OpenMP
#: pool (numba's parallel kernels start theirs on their first call; Ray reads its loopback variable
#: on import). The native threads that OpenBLAS (numpy's, scipy's) and jemalloc (MLflow's) start
#: are fork-safe.
PRELOAD = (
    "numpy",
    "torch",
    "hydra",
    "omegaconf",
    "mlflow",
    "framework.app",
    "framework_plugins.trackers.mlflow_tracker",
    "framework_plugins.gomoku.env",
    "framework_plugins.alphazero.agent",
    "framework_plugins.mcts.engines",
)


def forkable(env: dict[str, str], start_env: dict[str, str]) -> bool:
    """Whether a command line with `env` may run in a child of a zygote started with `start_env`."""
    keys = set(env) | set(start_env)
    return all(env.get(k) == start_env.get(k) for k in keys if k.startswith(LOAD_TIME))


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: be `python -m framework ARGS` in the request's directory and environment."""
    import atexit
    import runpy

    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.path[0] = request["cwd"]
        sys.argv = ["-m", *request["args"]]
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
        # As the interpreter ends: its other threads joined, then its atexit handlers.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> None:
    from framework.machine import short_openmp_spin

    short_openmp_spin()  # as python -m framework does, before torch is imported
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    ready = {"ready": threading.active_count() == 1, "pid": os.getpid()}
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
