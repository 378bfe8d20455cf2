"""The installed config packages (`framework.conf` entry points): their schemas registered, their
folders on Hydra's config search path; one that cannot be imported is left out, said once."""

from __future__ import annotations

import importlib
import importlib.resources
import sys
from importlib.resources.abc import Traversable

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from framework import config, registry
from framework.columns import for_stream
from framework.errors import ConfigError

#: The config packages left out of this process's configs, each with why (one that cannot be imported).
LEFT_OUT: dict[str, str] = {}


class EntryPointSearchPath(SearchPathPlugin):
    """Adds every `framework.conf` entry point's package to Hydra's config search path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Not the framework package itself, which Hydra adds as the app's own: its folders are no
        # config groups (shell completion offered `contracts=`).
        path = search_path.get_path()
        path[:] = [element for element in path if element.path != "pkg://framework"]
        for name, entries in registry.discover("conf").items():
            for entry in entries:
                if _module(entry.value) not in LEFT_OUT:
                    search_path.append(
                        provider=f"framework.conf:{name}", path=f"pkg://{_module(entry.value)}"
                    )


def _module(value: str) -> str:
    return value.split(":", 1)[0].strip()


def register_schemas() -> None:
    """The root schema and every conf package's plugin schemas (`config.SCHEMAS`). A package that cannot
    be imported is left out, said once, so that the rest stay usable; a config file that two packages
    give is a ConfigError (which of them a run composed would be chance)."""
    config.register_schema()
    given: dict[str, list[str]] = {}
    for entries in registry.discover("conf").values():
        for entry in entries:
            module = _module(entry.value)
            owner = f"{entry.distribution} {entry.version} ({module})"
            try:
                importlib.import_module(module)  # a conf package registers its schemas
            except Exception as e:
                if module not in LEFT_OUT:
                    reason = (str(e).strip().splitlines() or [""])[0]
                    LEFT_OUT[module] = f"{type(e).__name__}: {reason}" if reason else type(e).__name__
                    said = f"the configs of {owner} are left out: importing it raised {LEFT_OUT[module]}"
                    print(for_stream(f"Warning: {said}", sys.stderr), file=sys.stderr)
                continue
            for name in _config_files(module):
                given.setdefault(name, []).append(owner)
    shared = {name: owners for name, owners in given.items() if len(owners) > 1}
    if shared:
        name, owners = min(shared.items())
        raise ConfigError(
            f"The config file {name} is in more than one config package: {' and '.join(owners)}; which one "
            f"a run would compose is chance. Uninstall one of them, or rename its file"
        )


def _config_files(module: str) -> list[str]:
    """The config files of a conf package, by their path in it (`env/cartpole.yaml`)."""
    found: list[str] = []

    def walk(folder: Traversable, prefix: str) -> None:
        for child in folder.iterdir():
            if child.is_dir() and not child.name.startswith(("_", ".")):
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith((".yaml", ".yml")):
                found.append(prefix + child.name)

    walk(importlib.resources.files(module), "")
    return found
