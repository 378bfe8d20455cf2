"""The `search` kind this package adds to the core's (the `framework.kinds` entry point): a search
plugin goes with a board game's env and an agent that plays by search, and a run with one hands
its agent the run's searches (`RunSearches`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from framework.contracts import Agent, EnvPlugin
from framework.errors import ConfigError
from framework_plugins.boardgames.game import GameEnvPlugin
from framework_plugins.boardgames.search import (
    DistributedSearch,
    DrawWeighingSearch,
    SearchAgent,
    SearchPlugin,
)
from framework_plugins.boardgames.searches import RunSearches


@dataclass(frozen=True)
class SearchKind:
    """Tree searches over a board game's rules, made by a search plugin (`search=sequential`)."""

    name: str = "search"
    group: str = "framework.search"
    contract: type = SearchPlugin
    capabilities: tuple[type, ...] = (DistributedSearch, DrawWeighingSearch)
    more_capabilities: dict[str, tuple[type, ...]] = field(
        default_factory=lambda: {"env": (GameEnvPlugin,), "agent": (SearchAgent,)}
    )

    def check(self, plugin: str, *, env: str, env_plugin: EnvPlugin, agent: str, agent_plugin: Agent) -> None:
        if not isinstance(env_plugin, GameEnvPlugin):
            if isinstance(agent_plugin, SearchAgent):
                raise ConfigError(
                    f"agent={agent} plays by tree search over a board game's rules, and env={env} "
                    "gives none: choose a board game env (env=gomoku)"
                )
            raise ConfigError(
                f"search={plugin} searches a board game's tree, and env={env} gives no game rules "
                "(choose env=gomoku, or drop search= with ~search)"
            )
        if not isinstance(agent_plugin, SearchAgent):
            raise ConfigError(
                f"search={plugin} needs an agent that plays by search (agent=alphazero); "
                f"agent={agent} does not: drop search= (or use ~search)"
            )

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
    ) -> RunSearches:
        assert isinstance(plugin, SearchPlugin)
        assert isinstance(env_plugin, GameEnvPlugin) and isinstance(agent_plugin, SearchAgent)
        return RunSearches(
            plugin,
            env_plugin.game,
            agent_plugin.evaluator,
            device=device,
            threads=threads,
            seed=seed,
            should_stop=stop.is_set,
        )


#: The kind, as its entry point names it.
SEARCH = SearchKind()
