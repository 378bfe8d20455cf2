"""`python -m framework [COMMAND ARGS... | OVERRIDES...]`: a registered sub-command, or else a Hydra run."""

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

from framework.columns import ReaderMayGo, refuse
from framework.errors import ConfigError


def main() -> None:
    """Run the command, then end the process as the interpreter would, less its teardown (`leave`)."""
    try:
        _main()
        code = 0
    except SystemExit as e:
        code = _status(e.code)
    leave(code)


def _status(code: object) -> int:
    """The exit status of `sys.exit(code)`, as the interpreter gives it (a message: printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def leave(code: int) -> NoReturn:
    """Other threads joined and atexit handlers run, as at the interpreter's end, then exit at once. Its
    teardown (a second and more with torch, SB3 and MLflow imported) runs with Ctrl-C and SIGTERM at
    their defaults: a second SIGTERM then ended a stopped run's process 143, not 130."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's end calls first
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _main() -> None:
    from framework.machine import short_openmp_spin

    short_openmp_spin()
    sys.stdout, sys.stderr = ReaderMayGo(sys.stdout), ReaderMayGo(sys.stderr)
    from framework import commands

    argv = sys.argv[1:]
    if argv:
        try:
            command = commands.find(argv[0])
        except ConfigError as e:  # registered twice: which distributions, and what to do
            refuse(str(e))
            sys.exit(1)
        if command is not None:
            sys.exit(commands.run(command, argv[1:]))
    try:
        sys.argv[1:] = commands.expand(argv)  # `seeds=5`: a sweep over five seeds (plugins/sweeps)
    except ConfigError as e:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        refuse(str(e))
        sys.exit(1)
    from framework.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
