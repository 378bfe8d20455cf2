"""Sub-commands, `python -m framework NAME ARGS`: callables registered in the `framework.commands`
entry-point group, so that the core names none of them (`plugins` is the catalog plugin's).

A command is `main(argv: list[str]) -> int`: it gets the arguments after its name and returns the exit
status. The first line of its docstring is its description in `python -m framework --help`, read from
source like every plugin's, so listing the commands imports none of them. `--help` leads with the
commands and the config groups, in lines that fit the terminal (100 columns at most): a screen of them
comes before the full config (conf/config.yaml, `hydra.help`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from framework import registry
from framework.columns import for_stream, width, wrap
from framework.interrupts import EXIT_KILLED, forget_caught_interrupt

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader

#: The OmegaConf resolver that the `--help` template (conf/config.yaml) calls for the list of commands.
HELP_RESOLVER = "framework_commands"
#: The one it calls for the config groups and their choices.
GROUPS_RESOLVER = "framework_config_groups"


def find(name: str) -> Callable[[list[str]], int] | None:
    """The command registered as `name`, or None when no distribution registers it (then the
    argument is Hydra's: an override, or its own refusal). Registered twice: a RegistryError naming both."""
    if "=" in name or name.startswith("-") or name not in registry.discover("command"):
        return None
    command: Callable[[list[str]], int] = registry.load("command", name)
    return command


def expand(argv: list[str]) -> list[str]:
    """The command line after every registered expansion, in the order of their names: an expansion
    (the `framework.expansions` group) is `expand(argv) -> argv`, run before Hydra parses the line,
    with a ConfigError for what it refuses. The sweeps plugin's `seeds=N` is one."""
    for name in registry.names("expansion"):
        argv = list(registry.load("expansion", name)(argv))
    return argv


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


class Parser(argparse.ArgumentParser):
    """argparse's parser for a command's arguments, whose refusal (`PROG: error: ...`, an unknown
    choice listing every valid one) is wrapped to fit 100 columns like every other line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, for_stream(f"{self.prog}: error: {message}", sys.stderr) + "\n")


def listing(columns: int | None = None) -> str:
    """A row per registered command, its name and description (wrapped in its column), for `--help`."""
    rows = []
    for name, entries in registry.discover("command").items():
        if len(entries) > 1:
            owners = " and ".join(f"{p.distribution} {p.version}" for p in entries)
            rows.append((name, f"(registered by {owners}: uninstall one)"))
        else:
            rows.append((name, entries[0].description()))
    names = max((len(name) for name, _ in rows), default=0)
    lines = []
    for name, about in rows:
        lines += wrap(about, columns or width(), first=f"  {name.ljust(names)}  ", indent=" " * (names + 4))
    return "\n".join(lines)


def config_groups(columns: int | None = None) -> str:
    """Each config group of the Hydra app being run (`hydra/...` aside) and its choices, for `--help`:
    what Hydra's own $APP_CONFIG_GROUPS lists, with the choices wrapped under the first. Outside a
    Hydra app (nothing composed), nothing."""
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if not hydra.is_initialized():
        return ""
    loader = hydra.config_loader()
    lines = []
    for group in sorted(_groups(loader, "")):
        if group == "hydra" or group.startswith("hydra/"):
            continue
        choices = ", ".join(sorted(loader.get_group_options(group)))
        lines += wrap(choices, columns or width(), first=f"{group}: ", indent=" " * (len(group) + 2))
    return "\n".join(lines)


def _groups(loader: ConfigLoader, parent: str) -> list[str]:
    """The groups under `parent` that hold configs, nested ones by their path (`a/b`), as Hydra finds them."""
    from hydra.core.object_type import ObjectType

    found = []
    for name in loader.list_groups(parent):
        group = f"{parent}/{name}" if parent else name
        if loader.get_group_options(group, ObjectType.CONFIG):
            found.append(group)
        if loader.get_group_options(group, ObjectType.GROUP):
            found += _groups(loader, group)
    return found


def register_help_resolver() -> None:
    """Let the `--help` template list the commands and the config groups; `$` doubled because Hydra
    then fills its help template with string.Template."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(HELP_RESOLVER):
        OmegaConf.register_new_resolver(HELP_RESOLVER, lambda: listing().replace("$", "$$"))
    if not OmegaConf.has_resolver(GROUPS_RESOLVER):
        OmegaConf.register_new_resolver(GROUPS_RESOLVER, lambda: config_groups().replace("$", "$$"))
