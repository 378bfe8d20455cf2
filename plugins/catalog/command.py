"""`python -m framework plugins`: every installed plugin and the configs that select it.

Read without importing any plugin (nor torch): descriptions come from source, config files are
read as YAML. `--config NAME` shows one plugin's keys, defaults and descriptions (its schema).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from framework import registry
from framework.columns import refuse, width, wrap
from framework.commands import Parser
from framework.config import SCHEMAS, plugin_sections
from framework.errors import ConfigError, did_you_mean

from .keys import CORE, MIN_WRAPPED, describe_core, describe_preset, describe_section, key_lines, schema_rows

#: `# requires: MODULE (how to install it)` in a config file: what it needs beyond the core's own.
REQUIRES = re.compile(r"^#\s*requires:\s*(\S+)\s*(?:\((.*)\))?\s*$")
SCHEMA_DEFAULT = re.compile(r"^/schema_([a-z]+)_(\w+)@_here_$")


@dataclass(frozen=True)
class ConfigFile:
    """One config of a plugin group (`agent=ppo`): which plugin it selects and what it needs."""

    section: str
    name: str
    plugin: str
    requires: str | None
    install: str | None

    @property
    def available(self) -> bool:
        return self.requires is None or importlib.util.find_spec(self.requires) is not None


def main(argv: list[str]) -> int:
    """List the installed plugins, by kind, and their configs (--config NAME: a plugin's keys)."""
    parser = Parser(
        prog="python -m framework plugins",
        description="List the installed framework plugins and the configs that select them.",
    )
    parser.add_argument(
        "--kind",
        choices=list(registry.groups()),
        metavar="KIND",
        help=f"only plugins of this kind: {', '.join(registry.groups())}",
    )
    parser.add_argument(
        "--config", metavar="NAME", help="a plugin's (or a config's) keys, defaults and descriptions"
    )
    args = parser.parse_args(argv)
    if args.config:
        try:
            return describe(args.config, args.kind)
        except ConfigError as e:  # a config file two packages give
            refuse(str(e))
            return 1
    files = config_files()
    problems = []
    if args.kind in (None, "conf"):
        try:
            _register_schemas()  # a conf package that cannot be imported is marked (imports no torch)
        except ConfigError as e:  # a config file two of them give
            problems.append(str(e))
    rows = [("KIND", "NAME", "SELECTED BY", "DISTRIBUTION", "VERSION", "DESCRIPTION")]
    missing: dict[str, str] = {}
    for kind in registry.groups() if args.kind is None else [args.kind]:
        section = next((s for s, k in plugin_sections().items() if k == kind), None)
        for name, entries in registry.discover(kind).items():
            chosen = sorted(
                (f for f in files if f.section == section and f.plugin == name), key=lambda f: f.name
            )
            for f in chosen:
                if not f.available:
                    missing[f.requires or ""] = f.install or f"install {f.requires}"
            selected = "|".join(f.name + ("" if f.available else "*") for f in chosen)
            selector = f"{section}={selected}" if selected else "-"
            if kind == "sweeper":  # a Hydra sweeper, chosen by Hydra's own group
                selector = f"{SWEEPER_GROUP}={name}"
            elif kind == "service":  # always there, set by its root section
                selector = f"{name}.*"
            elif kind == "expansion":  # a key of the command line it rewrites (seeds=N)
                selector = f"{name}=…"
            for p in entries:
                rows.append(
                    (kind, name, selector, p.distribution, p.version, _broken(p.value) + p.description())
                )
    for line in table(rows, shutil.get_terminal_size((100, 24)).columns):
        print(line)
    for module, install in missing.items():
        print(f"* needs {module}, which is not installed: {install}")
    problems += registry.conflicts()
    for problem in problems:
        refuse(str(problem))
    return 1 if problems else 0


def _broken(value: str) -> str:
    """'(broken: ...) ' where an entry point's module is not there, or its source defines no such object
    (found as `describe` reads its docstring: nothing of the plugin is imported), else ''."""
    from framework.conf_packages import LEFT_OUT

    module, _, attr = (part.strip() for part in value.partition(":"))
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return f"(broken: its module {module} is not installed) "
    if module in LEFT_OUT:
        return f"(broken: importing it raised {LEFT_OUT[module]}) "
    first = attr.split(".")[0]
    if first and found.origin and found.origin.endswith(".py") and not _defines(Path(found.origin), first):
        return f"(broken: {module} has no {first}) "
    return ""


def _defines(source: Path, name: str) -> bool:
    """Whether a module's source binds `name` at its top level (or may: `import *`, `__getattr__`)."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True  # unreadable here: importing it says what is wrong
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return name in bound or "*" in bound or "__getattr__" in bound


#: Hydra's config group of sweepers, where a sweeper plugin's name selects it.
SWEEPER_GROUP = "hydra/sweeper"


def table(rows: Sequence[tuple[str, ...]], width: int) -> list[str]:
    """The rows as lines no wider than `width` where it can be: the columns SELECTED BY (at `|`)
    and DESCRIPTION (at spaces) wrap onto lines of their own; the others keep their widths. Where
    the description's column would be too narrow, each description goes under its row, indented."""
    fixed = [max(len(r[i]) for r in rows) for i in (0, 1, 3, 4)]
    room = width - sum(fixed) - 2 * 5
    natural = max(len(r[2]) for r in rows)
    unbreakable = max(len(part) for r in rows for part in re.split(r"(?<=\|)", r[2]))
    selector_width = max(MIN_WRAPPED[0], unbreakable, min(natural, room // 3))
    about_width = room - selector_width
    below = about_width < MIN_WRAPPED[1]
    lines = []
    for kind, name, selector, distribution, version, about in rows:
        selectors = _wrap_choices(selector, selector_width)
        abouts = [""] if below else textwrap.wrap(about, about_width) or [""]
        for i in range(max(len(selectors), len(abouts))):
            first = i == 0
            cells = [
                kind if first else "",
                name if first else "",
                selectors[i] if i < len(selectors) else "",
                distribution if first else "",
                version if first else "",
            ]
            widths = [fixed[0], fixed[1], selector_width, fixed[2], fixed[3]]
            text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
            lines.append((text + "  " + (abouts[i] if i < len(abouts) else "")).rstrip())
        if below and about:
            lines += textwrap.wrap(
                about, max(MIN_WRAPPED[1], width - 4), initial_indent="    ", subsequent_indent="    "
            )
    return lines


def _wrap_choices(selector: str, width: int) -> list[str]:
    """`agent=a2c|dqn|ppo` in lines of at most `width` (longer where one choice is), broken after a `|`."""
    lines, line = [], ""
    for part in re.split(r"(?<=\|)", selector):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return [*lines, line]


def config_files() -> list[ConfigFile]:
    """The plugin group configs of every installed conf package, read as files."""
    found = []
    for entries in registry.discover("conf").values():
        for entry in entries:
            for folder in _package_dirs(entry.value.split(":", 1)[0].strip()):
                for section in plugin_sections():
                    for path in sorted((folder / section).glob("*.yaml")):
                        parsed = _read(path, section)
                        if parsed is not None:
                            found.append(parsed)
    return found


def describe(name: str, kind: str | None = None) -> int:
    """Print the keys, defaults and descriptions of the plugin that `name` (a plugin or a config) selects;
    with `kind`, of that kind only."""
    files = config_files()
    if kind is not None:
        section = next((s for s, k in plugin_sections().items() if k == kind), None)
        files = [f for f in files if f.section == section]
        if not any(name in (f.name, f.plugin) for f in files) and not (
            kind in ("sweeper", "service") and name in registry.names(kind)
        ):
            known = sorted({f.name for f in files} | set(registry.names(kind)))
            refuse(f"no {kind} plugin or config named {name!r}. Known: {', '.join(known) or '(none)'}")
            return 1
    matches = [f for f in files if f.name == name] or [f for f in files if f.plugin == name]
    if not matches and name in registry.names("sweeper"):
        heading = f"sweeper plugin {name!r}, selected by {SWEEPER_GROUP}={name} (with -m)"
        return describe_section("sweeper", name, heading, "hydra.sweeper")
    if not matches and name in registry.names("service"):
        heading = f"service plugin {name!r}: the {name} section of every run"
        return describe_section("service", name, heading, name)
    presets = preset_files()
    if not matches and name in presets:
        return describe_preset(*presets[name])
    if not matches and name in CORE:
        return describe_core(name)
    if not matches:
        extra = {*registry.names("sweeper"), *registry.names("service"), *presets, *CORE}
        known = sorted({f.name for f in files} | {f.plugin for f in files} | extra)
        message = f"no plugin or config named {name!r}.{did_you_mean(name, known)} Known: {', '.join(known)}"
        refuse(message)
        return 1
    chosen = matches[0]
    _register_schemas()
    schema = SCHEMAS.get((chosen.section, chosen.plugin))
    columns = width()
    names = "|".join(f.name for f in files if (f.section, f.plugin) == (chosen.section, chosen.plugin))
    heading = f"{chosen.section} plugin {chosen.plugin!r}, selected by "
    selector = _wrap_choices(f"{chosen.section}={names}", max(MIN_WRAPPED[0], columns - len(heading)))
    print(heading + selector[0])
    for more in selector[1:]:
        print(" " * len(heading) + more)
    if chosen.name != chosen.plugin:
        choice = f"{chosen.section}={chosen.name}"
        print(f"({choice} sets some keys itself: python -m framework --cfg job {choice})")
    tuned = [n for n, (group, _) in presets.items() if group == "tuned" and n.startswith(f"{chosen.name}_")]
    if tuned:
        said = (
            f"(Beside an env with tuned settings, tuned={'|'.join(tuned)} sets more of its keys: "
            f"python -m framework plugins --config {tuned[0]} lists them; ~tuned leaves them out.)"
        )
        print("\n".join(wrap(said, columns, indent=" ")))
    if schema is None:
        print("Its conf package registers no schema: its config file lists its keys.")
        return 0
    rows = schema_rows(schema, chosen.section)
    if not rows:
        print("It has no keys.")
        return 0
    for line in key_lines(rows, columns):
        print(line)
    return 0


def preset_files() -> dict[str, tuple[str, Path]]:
    """The configs of the groups that select no plugin (`tuned`, `experiment`) by name: group, file."""
    found: dict[str, tuple[str, Path]] = {}
    sections = set(plugin_sections())
    for entries in registry.discover("conf").values():
        for entry in entries:
            for folder in _package_dirs(entry.value.split(":", 1)[0].strip()):
                for path in sorted(folder.glob("*/*.yaml")):
                    if path.parent.name not in sections:
                        found.setdefault(path.stem, (path.parent.name, path))
    return found


def _register_schemas() -> None:
    from framework.conf_packages import register_schemas

    register_schemas()


def _package_dirs(module: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def _read(path: Path, section: str) -> ConfigFile | None:
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    plugin = data.get("name")
    for entry in data.get("defaults") or []:
        match = SCHEMA_DEFAULT.match(entry) if isinstance(entry, str) else None
        if match and match.group(1) == section:
            plugin = plugin or match.group(2)
    if not plugin:
        return None
    requires = install = None
    for line in text.splitlines():
        found = REQUIRES.match(line.strip())
        if found:
            requires, install = found.group(1), found.group(2)
    return ConfigFile(section, path.stem, str(plugin), requires, install)
