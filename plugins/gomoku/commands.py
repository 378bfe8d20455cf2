"""The gomoku plugin's sub-commands (the `framework.commands` group), `python -m framework gomocup RUN
[OVERRIDES]` and `python -m framework play RUN [OVERRIDES]`: a trained Gomoku agent plays, over the
Gomocup protocol or in a browser page.

RUN is a run directory (or one of its checkpoints) or a tracked run id; OVERRIDES change how it
searches (`search.num_simulations=800`), its device, threads or seed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from framework import __version__
from framework.columns import refuse
from framework.commands import Parser
from framework.errors import ConfigError
from framework_plugins.web.ports import browser_blocked

#: The launcher --write-brain writes (a Gomocup manager takes programs named pbrain-*).
BRAIN_NAME = "pbrain-framework"
OVERRIDES_HELP = (
    "overrides after RUN: search.* (search.num_simulations=800; 400 unless set), search=NAME, device=cpu, "
    "threads=N, seed=N; tracking.* to find a run id in another store"
)


#: What RUN may be (the shipped agents are the `framework.trained` entry points).
RUN_HELP = "a run directory, a tracked run id or the name of a shipped agent (gomoku_15x15)"


def gomocup(argv: list[str]) -> int:
    """Play a trained Gomoku agent as a Gomocup (piskvork) brain on stdin/stdout."""
    parser = Parser(
        prog="python -m framework gomocup",
        description="A trained Gomoku agent as a Gomocup (piskvork) brain: the protocol on stdin/stdout.",
        epilog="A Gomocup manager runs a brain as a program without arguments: point it at a script "
        "that runs `python -m framework gomocup RUN`. " + OVERRIDES_HELP,
    )
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="key=value")
    parser.add_argument(
        "--write-brain",
        metavar="DIR",
        type=Path,
        help=f"write DIR/{BRAIN_NAME}, the program a Gomocup manager runs (no arguments), playing RUN "
        "with these OVERRIDES; then exit",
    )
    args = _parse(parser, argv)
    if args.write_brain is not None:
        return _write_brain(args.write_brain, args.run, args.overrides)
    _stop_on_signals()  # a manager's kill still cleans up (a downloaded checkpoint)
    # The protocol owns stdout: whatever a library prints while loading goes to stderr.
    # ASCII out, whatever a command echoed: a byte it cannot write is escaped, never an error.
    protocol = os.fdopen(
        os.dup(sys.stdout.fileno()),
        "w",
        buffering=1,
        encoding="ascii",
        errors="backslashreplace",
        newline="\n",
    )
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    player = _load(args.run, args.overrides, "gomocup")
    if player is None:
        return 1
    try:
        from .brain_io import ReadAhead, input_lines
        from .gomocup import MAX_LINE, GomocupBrain
        from .rules import Gomoku

        game = player.game
        if not isinstance(game, Gomoku):
            refuse(f"gomocup plays Gomoku; {player.label} played {game.name}")
            return 1
        brain = GomocupBrain(
            game,
            lambda g: player.engine(g),
            num_simulations=int(player.cfg.search.num_simulations),
            about=_about(player),
            out=protocol,
        )
        brain.warm_up()
        # os.read on the descriptor: a buffered stdin's lock, held by the thread reading it, stops the
        # interpreter's exit
        reader = ReadAhead(input_lines(sys.stdin.fileno(), MAX_LINE))
        brain.input_gone = reader.gone
        brain.serve(reader)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        player.close()


def play(argv: list[str]) -> int:
    """Play a trained Gomoku agent in the browser: a page on 127.0.0.1 with a per-run token."""
    parser = Parser(
        prog="python -m framework play",
        description="Play a trained Gomoku agent in the browser: a page on 127.0.0.1 with a per-run token.",
        epilog=OVERRIDES_HELP,
    )
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="key=value")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument(
        "--browser",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="open the page in the default browser (default: when there is a display)",
    )
    args = _parse(parser, argv)
    if not 0 <= args.port < 65536:
        parser.error(f"--port {args.port}: a port is a number from 0 (a free one) to 65535")
    if blocked := browser_blocked("--port", args.port):
        parser.error(blocked)
    _stop_on_signals()
    player = _load(args.run, args.overrides, "play")
    if player is None:
        return 1
    stopped = False
    try:
        from framework_plugins.gomoku.page import serve

        def ready(url: str) -> None:
            print(f"Playing {player.label} (step {player.step}) at {url}", flush=True)
            print("Ctrl-C stops the server.", flush=True)

        browser = _has_display() if args.browser is None else args.browser
        serve(player, host=args.host, port=args.port, open_browser=browser, ready=ready, warm_up=True)
        stopped = True  # serve returns once Ctrl-C or SIGTERM stopped it
    except KeyboardInterrupt:
        stopped = True
    except OSError as e:
        refuse(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}")
        return 1
    finally:
        player.close(exiting=stopped)
    if stopped:
        _exit_at_once()
    return 0


def _exit_at_once() -> None:
    """Exit now that the server, the searches and any temporary folder are closed, without the
    interpreter's teardown of torch, numba and ONNX Runtime nor Ray's graceful shutdown (a second or
    more each on a busy machine, which a stopped server must not take; the reaper ends a local Ray)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    if not [arg for arg in argv if not arg.startswith("-")] and not {"-h", "--help"} & set(argv):
        # argparse would also call the optional overrides required
        parser.error(f"RUN is required: {RUN_HELP}")
    # Options and overrides in any order: `play RUN --port 8080 search.num_simulations=800`.
    return parser.parse_intermixed_args(argv)


def _write_brain(folder: Path, run: str, overrides: list[str]) -> int:
    """DIR/pbrain-framework: a shell script that runs this command's brain from this directory (where
    a tracked run id is looked up), with this Python. RUN is checked first: a brain that cannot load
    is not written."""
    player = _load(run, overrides, "gomocup")
    if player is None:
        return 1
    player.close()
    target = Path(run).resolve() if Path(run).exists() else run
    command = " ".join(
        shlex.quote(str(part)) for part in [sys.executable, "-m", "framework", "gomocup", target, *overrides]
    )
    script = (
        "#!/bin/sh\n"
        f"# A Gomocup brain (written by `python -m framework gomocup --write-brain`): {player.label}.\n"
        f"cd {shlex.quote(os.getcwd())} || exit 1\n"
        f"exec {command}\n"
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / BRAIN_NAME
        path.write_text(script)
        path.chmod(0o755)
    except OSError as e:
        refuse(f"--write-brain {folder}: {e.strerror or e}")
        return 1
    print(f"Wrote {path}: a Gomocup manager runs it as the brain of {player.label} (step {player.step}).")
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt, so that everything is closed on the way out; also
    where SIGINT came ignored (a job started in the background by a script)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _load(run: str, overrides: list[str], command: str) -> Any:
    """The trained player, or None after saying why not (a mistake is one line, not a traceback)."""
    from .player import load_trained

    try:
        return load_trained(run, overrides, command=command)
    except ConfigError as e:
        refuse(str(e))
    except Exception as e:
        from framework.hydra_errors import hydra_message

        message = hydra_message(e)
        if message is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        refuse(str(message))
    return None


def _about(player: Any) -> dict[str, str]:
    game = player.game
    return {
        "name": f"framework-{player.cfg.agent.name}",
        "version": __version__,
        "author": "framework",
        "country": "",
        "www": "",
        "email": "",
        "description": f"{game.board_size}x{game.board_size} {game.n_in_row} in a row, "
        f"step {player.step} of {player.label}",
    }


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
