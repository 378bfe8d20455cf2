"""A run's plugins built from their config sections: each checked against its contract, a value it
refuses said as a ConfigError; torch set up for the device the run asked for.

Shared by a training run (`framework.run`) and a trained agent loaded to play (`framework.trained`).
"""

from __future__ import annotations

import sys
from typing import Any

from framework import config, contracts, registry
from framework.contracts import Agent, EnvPlugin, GameEnvPlugin, SearchAgent, SearchPlugin, Tracker
from framework.errors import ConfigError


def build_plugin(section: config.Section, kind: str) -> Any:
    """The plugin constructed from its typed config; a value it refuses is a ConfigError."""
    try:
        plugin = section.plugin(section.cfg)
    except ConfigError:
        raise
    except ValueError as e:  # a plugin's constructor checks its config values
        raise ConfigError(str(e)) from None
    problems = contracts.check_instance(kind, plugin)
    if problems:
        raise registry.RegistryError(
            f"The {kind} plugin {section.name!r} does not satisfy its contract: " + "; ".join(problems)
        )
    return plugin


def search_plugin(
    section: config.Section, env: config.Section, env_plugin: EnvPlugin, agent_name: str, agent: Agent
) -> SearchPlugin:
    """The run's search plugin, its config checked; refuses what cannot search."""
    if not isinstance(env_plugin, GameEnvPlugin):
        if isinstance(agent, SearchAgent):
            raise ConfigError(
                f"agent={agent_name} plays by tree search over a board game's rules, and env={env.name} "
                "gives none: choose a board game env (env=gomoku)"
            )
        raise ConfigError(
            f"search={section.name} searches a board game's tree, and env={env.name} gives no game rules "
            "(choose env=gomoku, or drop search= with ~search)"
        )
    if not isinstance(agent, SearchAgent):
        raise ConfigError(
            f"search={section.name} needs an agent that plays by search (agent=alphazero); "
            f"agent={agent_name} does not: drop search= (or use ~search)"
        )
    plugin: SearchPlugin = build_plugin(section, "search")
    return plugin


def null_tracker() -> Tracker:
    from framework.null_tracker import NullTracker

    return NullTracker(None)


def untracked(tracker: Tracker) -> bool:
    from framework.null_tracker import NullTracker

    return isinstance(tracker, NullTracker)


def run_threads(threads: int) -> int:
    """The CPU threads a run computes on: `threads`, or with 0 every CPU this process may use."""
    from framework import machine

    return threads if threads > 0 else machine.cpus()


def setup_torch(device: str, threads: int, seed: int) -> str:
    """Seed and configure torch if a plugin brought it in (its CPU threads: `run_threads`); resolve
    `auto` to the GPU when present."""
    if "torch" not in sys.modules:
        return "cpu" if device == "auto" else device
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(run_threads(threads))
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise ConfigError(
            f"device={device!r} is not valid; choose auto (the GPU when there is one), cpu, cuda or cuda:N"
        ) from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device={device} but torch {torch.__version__} finds no CUDA GPU here; "
            "use device=auto (the GPU when there is one) or device=cpu"
        )
    if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
        raise ConfigError(f"device={device}: torch finds {torch.cuda.device_count()} GPU(s), numbered from 0")
    return device
