"""`python -m framework [COMMAND ARGS... | OVERRIDES...]`: a registered sub-command, or else a Hydra run."""

import os
import sys

from framework.columns import ReaderMayGo, refuse
from framework.errors import ConfigError


def main() -> None:
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
