"""`python -m framework [plugins | gomocup RUN | play RUN | Hydra overrides...]`."""

import os
import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "plugins":
        from framework.plugins_cli import main as plugins_main

        try:
            code = plugins_main(sys.argv[2:])
            sys.stdout.flush()
        except BrokenPipeError:  # `... plugins | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = 0
        sys.exit(code)
    if len(sys.argv) > 1 and sys.argv[1] in ("gomocup", "play"):
        from framework.play_cli import gomocup_main, play_main

        command = gomocup_main if sys.argv[1] == "gomocup" else play_main
        sys.exit(command(sys.argv[2:]))
    from framework.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
