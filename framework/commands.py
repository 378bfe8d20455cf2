"""Sub-commands, `python -m framework NAME ARGS`: callables registered in the `framework.commands`
entry-point group, so that the core names none of them (its own `plugins` is registered the same way).

A command is `main(argv: list[str]) -> int`: it gets the arguments after its name and returns the exit
status. The first line of its docstring is its description in `python -m framework --help`, read from
source like every plugin's, so listing the commands imports none of them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from framework import registry
from framework.interrupts import EXIT_KILLED, forget_caught_interrupt

#: The OmegaConf resolver that the `--help` header (conf/config.yaml) calls for the list of commands.
HELP_RESOLVER = "framework_commands"


def find(name: str) -> Callable[[list[str]], int] | None:
    """The command registered as `name`, or None when no distribution registers it (then the
    argument is Hydra's: an override, or its own refusal). Registered twice: a RegistryError naming both."""
    if "=" in name or name.startswith("-") or name not in registry.discover("command"):
        return None
    command: Callable[[list[str]], int] = registry.load("command", name)
    return command


def run(command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command; its exit status. A closed pipe (`... | head`) ends it quietly: the reader has
    what it wanted; Ctrl-C, with 130."""
    try:
        code = command(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:  # Ctrl-C before the command set its own handling up
        code = EXIT_KILLED
    forget_caught_interrupt()  # an interrupt the command caught gives the status it chose
    return code


def listing() -> str:
    """One line per registered command, its name and description, for `--help`."""
    rows = []
    for name, entries in registry.discover("command").items():
        if len(entries) > 1:
            owners = " and ".join(f"{p.distribution} {p.version}" for p in entries)
            rows.append((name, f"(registered by {owners}: uninstall one)"))
        else:
            rows.append((name, entries[0].description()))
    width = max((len(name) for name, _ in rows), default=0)
    return "\n".join(f"  {name.ljust(width)}  {about}".rstrip() for name, about in rows)


def register_help_resolver() -> None:
    """Let the `--help` header list the commands; `$` doubled because Hydra then fills its help
    template with string.Template."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(HELP_RESOLVER):
        OmegaConf.register_new_resolver(HELP_RESOLVER, lambda: listing().replace("$", "$$"))
