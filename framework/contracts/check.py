"""`check` and its kin: a loaded plugin held to its kind's contract, and the capabilities it has."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from framework.contracts.agent import Agent, CheckedAgent, EvaluatingAgent, MetricNamingAgent
from framework.contracts.buffer import Buffer, FrameBuffer
from framework.contracts.env import (
    BestEpisodeReplay,
    EnvPlugin,
    EpisodeStatsEnvPlugin,
    RunWatchingEnvPlugin,
    SpacesEnvPlugin,
    VariantEnvPlugin,
    VectorEnvPlugin,
)
from framework.contracts.service import RunService
from framework.contracts.sweeper import SweeperPlugin
from framework.contracts.tracker import StoreTracker, Tracker

#: The core kinds' contracts and optional capabilities; an added kind brings its own (`contract_of`).
CONTRACTS: dict[str, type] = {
    "env": EnvPlugin,
    "buffer": Buffer,
    "agent": Agent,
    "tracker": Tracker,
    "sweeper": SweeperPlugin,
    "service": RunService,
}
CAPABILITIES: dict[str, tuple[type, ...]] = {
    "env": (
        VectorEnvPlugin,
        VariantEnvPlugin,
        EpisodeStatsEnvPlugin,
        SpacesEnvPlugin,
        RunWatchingEnvPlugin,
    ),
    "buffer": (FrameBuffer,),
    "agent": (CheckedAgent, EvaluatingAgent, MetricNamingAgent),
    "tracker": (StoreTracker,),
}
#: Optional capabilities of the envs an env plugin makes (gymnasium is their contract).
ENV_CAPABILITIES: tuple[type, ...] = (BestEpisodeReplay,)


def contract_of(kind: str) -> type:
    """The contract of a plugin kind: the core's, or the one the kind's plugin package gives."""
    if kind in CONTRACTS:
        return CONTRACTS[kind]
    from framework import registry

    contract: type = registry.added_kinds()[kind].contract
    return contract


def capabilities_of(kind: str) -> tuple[type, ...]:
    """The optional capabilities a plugin of `kind` may have, with those plugin packages add."""
    from framework import registry

    found = CAPABILITIES.get(kind, ())
    for added in registry.added_kinds().values():
        found += tuple(added.capabilities) if added.name == kind else ()
        found += tuple(added.more_capabilities.get(kind, ()))
    return found


def check(kind: str, plugin: object) -> list[str]:
    """What `plugin` (a class) lacks of its kind's contract, one line each; [] when it conforms.
    `Config` must be a dataclass, methods take every call the contract allows; attributes: check_instance."""
    contract = contract_of(kind)
    if not inspect.isclass(plugin):
        return [f"is a {type(plugin).__name__}, not a class"]
    problems = []
    config = getattr(plugin, "Config", None)
    if config is None or not dataclasses.is_dataclass(config):
        problems.append("Config is not a dataclass (the schema of its config section)")
    for name, expected in _methods(contract).items():
        if isinstance(expected, property):  # may be an instance attribute: see check_instance
            continue
        actual = inspect.getattr_static(plugin, name, None)
        if actual is None:
            problems.append(f"has no {name}{_signature(expected)}")
        elif not callable(actual) and not isinstance(actual, property):
            problems.append(f"{name} is not a method")
        else:
            mismatch = _accepts(expected, getattr(plugin, name))
            if mismatch:
                problems.append(f"{name}{_signature(getattr(plugin, name))}: {mismatch}")
    return problems


def check_env(env: object) -> list[str]:
    """What an env (or its class) lacks of each env capability it has a method of, a line each; [] if none."""
    klass = env if inspect.isclass(env) else type(env)
    problems = []
    for capability in ENV_CAPABILITIES:
        # An env is built by its plugin, however it likes: no constructor is part of the contract.
        methods = {n: m for n, m in _methods(capability).items() if n != "__init__"}
        if not any(hasattr(klass, name) for name in methods):
            continue
        for name, expected in methods.items():
            actual = getattr(klass, name, None)
            if actual is None or not callable(actual):
                problems.append(f"has no {name}{_signature(expected)} ({capability.__name__})")
            else:
                mismatch = _accepts(expected, actual)
                if mismatch:
                    problems.append(f"{name}{_signature(actual)}: {mismatch}")
    return problems


def check_instance(kind: str, plugin: object) -> list[str]:
    """What a constructed plugin lacks of the attributes its contract (and capabilities) declare."""
    contracts = (contract_of(kind), *(c for c in capabilities_of(kind) if isinstance(plugin, c)))
    problems = []
    for contract in contracts:
        properties = [n for n, v in _methods(contract).items() if isinstance(v, property)]
        for name in [*_attributes(contract), *properties]:
            if inspect.getattr_static(plugin, name, _MISSING) is _MISSING:
                problems.append(f"has no attribute {name} ({contract.__name__})")
    return problems


_MISSING = object()


def capabilities(kind: str, plugin: object) -> list[str]:
    """The optional capabilities (Protocol names) whose methods a plugin class has."""
    found = []
    for capability in capabilities_of(kind):
        extra = set(_methods(capability)) - set(_methods(contract_of(kind)))
        if all(inspect.getattr_static(plugin, name, None) is not None for name in extra):
            found.append(capability.__name__)
    return found


def _methods(contract: type) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for klass in reversed(contract.__mro__):
        if klass is object or klass is Protocol or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            if (name == "__init__" or not name.startswith("_") or name == "__len__") and (
                callable(value) or isinstance(value, property)
            ):
                members[name] = value
    return members


def _attributes(contract: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(contract.__mro__):
        for name in getattr(klass, "__annotations__", {}):
            if name != "Config" and not name.startswith("_") and name not in names:
                names.append(name)
    return names


def _signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def _accepts(expected: Callable[..., Any], actual: Callable[..., Any]) -> str:
    """'' when `actual` accepts every call `expected` allows; else what it does not accept."""
    try:
        want = inspect.signature(expected)
        have = inspect.signature(actual)
    except (TypeError, ValueError):
        return ""
    params = list(have.parameters.values())
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    used: set[str] = set()
    index = 0
    for p in want.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            if not var_kw:
                return f"does not take **{p.name} (the contract says {want})"
            continue
        if p.kind is p.VAR_POSITIONAL:
            if not var_pos:
                return f"does not take *{p.name} (the contract says {want})"
            continue
        if p.kind is p.KEYWORD_ONLY:
            mine = by_name.get(p.name)
            if mine is None and not var_kw:
                return f"has no keyword parameter {p.name} (the contract says {want})"
        else:
            if index < len(positional):
                mine = positional[index]
            elif var_pos:
                mine = None
            else:
                return f"takes too few positional parameters (the contract says {want})"
            index += 1
            if p.kind is p.POSITIONAL_OR_KEYWORD and mine is not None and mine.name != p.name:
                return f"names parameter {mine.name!r} where the contract says {p.name!r} ({want})"
        if mine is not None:
            used.add(mine.name)
            if p.default is not p.empty and mine.default is p.empty:
                return f"requires {mine.name}, which the contract makes optional ({want})"
    for p in params:
        required = p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        if required and p.name not in used:
            return f"requires {p.name}, which the contract does not pass ({want})"
    return ""
