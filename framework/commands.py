"""Sub-commands, `python -m framework NAME ARGS`: `main(argv) -> int` (exit status) callables in the
`framework.commands` group (the core names none); a docstring's first line, read from source, is --help's."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from framework import registry
from framework.columns import for_stream, width, wrap
from framework.errors import ConfigError
from framework.interrupts import EXIT_KILLED, forget_caught_interrupt

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader

#: The OmegaConf resolver that the `--help` template (conf/config.yaml) calls for the list of commands.
HELP_RESOLVER = "framework_commands"
#: The one it calls for the config groups and their choices.
GROUPS_RESOLVER = "framework_config_groups"


def find(name: str) -> Callable[[list[str]], int] | None:
    """The command registered as `name`; None (then it is Hydra's) where none is; RegistryError if two are."""
    if "=" in name or name.startswith("-") or name not in registry.discover("command"):
        return None
    command: Callable[[list[str]], int] = registry.load("command", name)
    return command


def expand(argv: list[str]) -> list[str]:
    """`argv` after each `framework.expansions` entry by name, before Hydra parses it: `expand(argv) -> argv`,
    raising ConfigError for what it refuses (the sweeps plugin's `seeds=N`)."""
    for name in registry.names("expansion"):
        try:
            expanded = registry.load("expansion", name)(argv)
        except ConfigError:
            raise
        except Exception as e:
            raise registry.failed("expansion", name, f"expanding {argv}", e) from e
        if not isinstance(expanded, list | tuple) or not all(isinstance(a, str) for a in expanded):
            wrong = TypeError(f"expand(argv) returned {expanded!r}, not a list of arguments")
            raise registry.failed("expansion", name, "(its contract)", wrong)
        argv = list(expanded)
    return argv


def run(command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command; its exit status. A closed pipe (`... | head`) ends it quietly, Ctrl-C with 130."""
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
    """argparse's parser for a command, its refusals (`PROG: error: ...`) wrapped to 100 columns."""

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
    """Each config group of the running Hydra app (`hydra/...` aside) and its choices; '' outside one."""
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
    """The groups under `parent` that hold configs, nested ones by their path (`a/b`)."""
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
    """Let the `--help` template list commands and config groups (`$` doubled for Hydra's string.Template)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(HELP_RESOLVER):
        OmegaConf.register_new_resolver(HELP_RESOLVER, lambda: listing().replace("$", "$$"))
    if not OmegaConf.has_resolver(GROUPS_RESOLVER):
        OmegaConf.register_new_resolver(GROUPS_RESOLVER, lambda: config_groups().replace("$", "$$"))
