"""A service a run's plugins share (Ray): a `framework.services` plugin named by its root section (`ray:`).
A run opens every service before building its plugins and closes it, with all it started, when it ends."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable


@runtime_checkable
class RunService(Protocol):
    """A service of the run, built from its root section (its typed `Config`); nothing starts then."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def open(self) -> None:
        """Take this run's settings (a ConfigError now for a bad one); start nothing until a plugin asks."""
        ...

    def close(self, *, at_once: bool = False) -> None:
        """End what the service started for the run; `at_once` when the process exits next."""
        ...
