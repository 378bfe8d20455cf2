"""A service a run's plugins share (Ray): configured by a root section of the run's config.

A service plugin (entry point group framework.services) is named by its root section (`ray:`):
the root schema holds its Config there. A run opens every service before it builds its plugins
(where a value or an address is refused before anything starts) and closes it when the run
ends; whatever the service started on a plugin's first use ends then.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable


@runtime_checkable
class RunService(Protocol):
    """A service of the run, built from its root section (its typed `Config`); nothing starts then."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def open(self) -> None:
        """Take this run's settings (checked now: a ConfigError before the run starts); start
        nothing until a plugin asks for it."""
        ...

    def close(self, *, at_once: bool = False) -> None:
        """End what the service started for the run; `at_once` when the process exits next."""
        ...
