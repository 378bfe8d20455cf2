"""Plugin discovery through Python entry points, loaded lazily by kind and name."""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import re
from dataclasses import dataclass
from importlib.metadata import Distribution, EntryPoint, entry_points
from typing import Any

from framework.errors import ConfigError

#: The core's plugin kinds and the entry-point group each is registered under; a plugin package
#: adds kinds of its own in `framework.kinds` (`groups()` lists them all).
GROUPS: dict[str, str] = {
    "env": "framework.envs",
    "buffer": "framework.buffers",
    "agent": "framework.agents",
    "tracker": "framework.trackers",
    "sweeper": "framework.sweepers",
    "service": "framework.services",
    "conf": "framework.conf",
    "command": "framework.commands",
    "expansion": "framework.expansions",
    "trained": "framework.trained",
}


class RegistryError(ConfigError, LookupError):
    """A plugin name that is unknown, ambiguous or of an unknown kind, or a plugin breaking its contract."""


@dataclass(frozen=True)
class PluginInfo:
    """One registered plugin, described without importing it."""

    kind: str
    name: str
    value: str
    distribution: str
    version: str
    entry_point: EntryPoint

    def description(self) -> str:
        """First line of the plugin object's docstring, read from source without importing it."""
        return _docstring_line(self.value) or _summary(self.entry_point)


#: Where a plugin package adds a kind: a `framework.contracts.PluginKind` by its name.
KINDS_GROUP = "framework.kinds"


def _check_kind(kind: str) -> str:
    known = groups()
    if kind not in known:
        raise RegistryError(f"Unknown plugin kind {kind!r}; valid kinds: {', '.join(known)}")
    return known[kind]


@functools.cache
def _entry_points_by_group() -> dict[str, tuple[EntryPoint, ...]]:
    # Every installed distribution is scanned for one group as for all (~0.1 s here): once per process.
    installed = entry_points()
    return {group: tuple(installed.select(group=group)) for group in installed.groups}


def _entry_points(group: str) -> tuple[EntryPoint, ...]:
    return _entry_points_by_group().get(group, ())


@functools.cache
def _name_and_version(dist: Distribution) -> tuple[str, str]:
    # Each of `name` and `version` would parse the distribution's METADATA again (~4 ms for ours).
    metadata = dist.metadata
    return metadata["Name"], metadata["Version"]


@functools.cache
def added_kinds() -> dict[str, Any]:
    """The kinds plugin packages add (`framework.kinds`), by name: each a PluginKind."""
    found: dict[str, Any] = {}
    for ep in _entry_points(KINDS_GROUP):
        kind = ep.load()
        if kind.name in GROUPS or kind.name in found:
            owner = ep.dist.name if ep.dist is not None else ep.value
            raise RegistryError(f"{owner} adds the plugin kind {kind.name!r}, which is already a kind")
        found[kind.name] = kind
    return found


def groups() -> dict[str, str]:
    """Every plugin kind, the core's then those plugin packages add, and its entry-point group."""
    return {**GROUPS, **{name: kind.group for name, kind in added_kinds().items()}}


def discover(kind: str) -> dict[str, list[PluginInfo]]:
    """Every plugin of `kind`, by name; a name with two or more entries is a conflict."""
    group = _check_kind(kind)
    found: dict[str, list[PluginInfo]] = {}
    seen: set[tuple[str, str]] = set()
    for ep in _entry_points(group):
        dist, version = _name_and_version(ep.dist) if ep.dist is not None else ("<unknown>", "?")
        # The same distribution seen twice on sys.path (an editable install beside a
        # regular one) is one registration, not a conflict; the first on the path wins.
        key = (ep.name, _normalise(dist))
        if key in seen:
            continue
        seen.add(key)
        info = PluginInfo(kind, ep.name, ep.value, dist, version, ep)
        found.setdefault(ep.name, []).append(info)
    return {name: sorted(found[name], key=lambda p: _normalise(p.distribution)) for name in sorted(found)}


def names(kind: str) -> list[str]:
    """Registered names of one kind, sorted."""
    return list(discover(kind))


def info(kind: str, name: str) -> PluginInfo:
    """The single registration of `name`, or a RegistryError that says what would be valid."""
    plugins = discover(kind)
    if name not in plugins:
        known = list(plugins)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise RegistryError(
            f"Unknown {kind} plugin {name!r}.{hint} Known {kind} plugins: "
            f"{', '.join(known) if known else '(none installed)'}"
        )
    entries = plugins[name]
    if len(entries) > 1:
        owners = ", ".join(f"{p.distribution} {p.version} ({p.value})" for p in entries)
        raise RegistryError(
            f"The {kind} plugin name {name!r} is registered by more than one distribution: "
            f"{owners}. Uninstall one of them."
        )
    return entries[0]


def load(kind: str, name: str) -> Any:
    """Import and return the object registered as `name` of `kind`; a ConfigError in one line where
    its entry point names a module or object that cannot be imported (an installed plugin broken)."""
    found = info(kind, name)
    try:
        return found.entry_point.load()
    except Exception as e:  # its module's import raised, or it defines no such object
        raise ConfigError(
            f"{kind} {name!r} ({found.value}, from {found.distribution} {found.version}) cannot be loaded: "
            f"{type(e).__name__}: {e}. Reinstall or fix {found.distribution}; `python -m framework plugins` "
            "lists what is installed"
        ) from e


def failed(kind: str, name: str, doing: str, error: BaseException) -> RegistryError:
    """A plugin's own bug (an exception that is no refusal) as one line naming the plugin and its
    distribution; the exception stays its cause, which HYDRA_FULL_ERROR=1 shows."""
    try:
        found = info(kind, name)
        where = f" ({found.value}, from {found.distribution} {found.version})"
    except ConfigError:
        where = ""
    return RegistryError(
        f"The {kind} plugin {name!r}{where} raised {type(error).__name__} {doing}: {error} "
        "(HYDRA_FULL_ERROR=1 shows where)"
    )


def conflicts() -> list[str]:
    """One message per name registered by two or more distributions, across all kinds."""
    problems = []
    for kind in groups():
        for name, entries in discover(kind).items():
            if len(entries) > 1:
                owners = " and ".join(f"{p.distribution} {p.version}" for p in entries)
                problems.append(f"{kind} {name!r} is registered by {owners}")
    return problems


def _normalise(dist: str) -> str:
    return dist.lower().replace("_", "-").replace(".", "-")


def _summary(ep: EntryPoint) -> str:
    """Its distribution's one-line summary; '' where it has none (importlib_metadata's distributions,
    found first once something has imported that backport, raise KeyError for a missing field)."""
    if ep.dist is None:
        return ""
    metadata = ep.dist.metadata
    return str(metadata["Summary"] or "") if "Summary" in metadata else ""


def _docstring_line(value: str, depth: int = 0) -> str:
    """Docstring of `module:attr` parsed from the module's source, so nothing is imported."""
    module, _, attr = value.partition(":")
    try:
        spec = importlib.util.find_spec(module.strip())
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return ""
    try:
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return ""
    node: ast.AST | None = tree
    for part in [p for p in attr.strip().split(".") if p]:
        body = getattr(node, "body", [])
        node = next(
            (
                n
                for n in body
                if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == part
            ),
            None,
        )
        if node is None:
            return _reexported(tree, spec.name, part, depth)
    assert isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    doc = ast.get_docstring(node) or ""
    # Its first sentence: a docstring's first line may end mid-sentence, wrapped.
    words = " ".join(doc.strip().split("\n\n")[0].split()) if doc.strip() else ""
    first = re.search(r"^.+?(?<!e\.g)(?<!i\.e)[.!?](?=\s|$)", words)  # not at e.g. or i.e.
    return first.group(0) if first else words


def _reexported(tree: ast.Module | ast.AST, module: str, name: str, depth: int) -> str:
    """Follow `from .agent import Name` in a package's __init__ to where `Name` is defined."""
    if depth > 3 or not isinstance(tree, ast.Module):
        return ""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name and a.asname is None for a in node.names):
            base = module.split(".")
            source = ".".join(base[: len(base) - node.level + 1] if node.level else []) if node.level else ""
            target = f"{source}.{node.module}" if source and node.module else (node.module or source)
            return _docstring_line(f"{target}:{name}", depth + 1)
    return ""
