"""Plugin kinds a plugin package adds (the `framework.kinds` group; the board games' `search`): a run whose
config has the kind's section builds the plugin it names and hands its agent the part (`RunContext.parts`)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from framework.contracts.agent import Agent, RunPart
    from framework.contracts.env import EnvPlugin


@runtime_checkable
class PluginKind(Protocol):
    """A kind of plugin: its name (its root config section), entry-point group, contract and capabilities."""

    name: str
    group: str
    contract: type
    capabilities: tuple[type, ...]
    more_capabilities: dict[str, tuple[type, ...]]
    """Capabilities it adds to the core's kinds ("env": a board game's rules, say)."""

    def check(self, plugin: str, *, env: str, env_plugin: EnvPlugin, agent: str, agent_plugin: Agent) -> None:
        """Before the run is built, ConfigError (what to change) if env or agent can't go with `plugin`."""
        ...

    def part(
        self,
        plugin: object,
        *,
        env_plugin: EnvPlugin,
        agent_plugin: Agent,
        device: str,
        threads: int,
        seed: int,
        stop: threading.Event,
    ) -> RunPart:
        """What the run hands its agent of the built `plugin`: started lazily, closed with the run."""
        ...
