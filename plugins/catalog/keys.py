"""`python -m framework plugins --config NAME`'s tables: keys, defaults and descriptions, of a plugin's
schema, of the core's own sections, or of a preset's file."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from framework import registry
from framework.columns import width, wrap
from framework.config import plugin_sections
from framework.values import field_docs

#: The narrowest the two wrapped columns (SELECTED BY, DESCRIPTION) get, however narrow the terminal.
MIN_WRAPPED = (14, 24)


#: The core's own settings `--config` shows: the root's keys (`run`) and its sections.
CORE = ("run", "eval", "checkpoint", "objective")


def describe_core(name: str) -> int:
    """The core's own keys, as a plugin's are shown: `run`'s (seed, total_steps, ...) or a section's."""
    from framework.config import FrameworkConfig

    if name == "run":
        print("the run's own keys, at the root of its config (and --config eval|checkpoint|objective)")
        rows = [
            (key.lstrip("."), default, about)
            for key, default, about in schema_rows(FrameworkConfig, "")
            if key.count(".") == 1 and key[1:] not in (*plugin_sections(), *CORE) and about
        ]
    else:
        print(f"the {name} section of every run's config")
        rows = [(key.lstrip("."), default, about) for key, default, about in schema_rows(FrameworkConfig, "")]
        rows = [row for row in rows if row[0].startswith(f"{name}.")]
    for line in key_lines(rows, width()):
        print(line)
    return 0


def describe_preset(group: str, path: Path) -> int:
    """A preset's own description (its file's leading comment) and the keys it sets."""
    choice = f"{group}={path.stem}"
    columns = width()
    said = f"{choice}: a preset ({path}); the whole config it gives: `python -m framework --cfg job {choice}`"
    if group == "tuned" and "_" in path.stem:  # chosen with its agent and env, which it does not select
        agent, env = path.stem.split("_", 1)
        said = (
            f"{choice}: a preset ({path}), taken with agent={agent} env={env}; the whole config it gives: "
            f"`python -m framework --cfg job agent={agent} env={env}`"
        )
    print("\n".join(wrap(said, columns, indent="  ")))
    about = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            about.append(line.lstrip("# ").rstrip())
    if about:
        print("\n".join(wrap(" ".join(about), columns, first="  ", indent="  ")))
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data.pop("defaults", None)
    rows = [(key, _shown(value), "") for key, value in _leaves(data, "")]
    for line in key_lines(rows, columns) if rows else []:
        print(line)
    return 0


def _leaves(tree: Any, prefix: str) -> list[tuple[str, Any]]:
    """(dotted key, value) of each leaf of a mapping; a list is a leaf."""
    if not isinstance(tree, dict):
        return [(prefix[:-1], tree)]
    return [leaf for key, value in tree.items() for leaf in _leaves(value, f"{prefix}{key}.")]


def _shown(value: Any) -> str:
    """A value as its YAML (`false`, `[random, heuristic]`)."""
    return str(yaml.safe_dump(value, default_flow_style=True, width=1000)).strip().removesuffix("...").strip()


def describe_section(kind: str, name: str, heading: str, section: str) -> int:
    """A sweeper's or a service's keys: its Config, under the config section it sets (`hydra.sweeper`,
    `ray`), less the `_target_` Hydra sets."""
    print(heading)
    rows = schema_rows(registry.load(kind, name).Config, section)
    for line in key_lines([r for r in rows if not r[0].endswith("._target_")], width()):
        print(line)
    return 0


#: The column past which a description does not start: a row whose key and default reach further
#: has its description on the lines under it, from that column.
DESCRIPTION_COLUMN = 44


def key_lines(rows: Sequence[tuple[str, str, str]], columns: int) -> list[str]:
    """(key, default, description) rows as aligned lines of at most `columns` (a long word aside):
    the descriptions in a column of their own, wrapped at spaces; a default too long for its column
    (a dict, a list, an address) has the row's description start on the next line."""
    keys = max(len(key) for key, _, _ in rows)
    room = DESCRIPTION_COLUMN - (2 + keys + 2) - 2  # what the defaults' column may take
    defaults = max((len(d) for _, d, _ in rows if len(d) <= room), default=0)
    start = 2 + keys + 2 + defaults + 2
    if start > DESCRIPTION_COLUMN or columns - start < MIN_WRAPPED[1]:  # keys too long, or too narrow
        start = 6  # every description under its row
    lines = []
    for key, default, about in rows:
        head = f"  {key.ljust(keys)}  {default.ljust(defaults)}  "
        if len(head) <= start:
            lines += wrap(about, columns, first=head.ljust(start), indent=" " * start)
        else:
            lines.append(head.rstrip())
            lines += wrap(about, columns, first=" " * start, indent=" " * start) if about else []
    return lines


def schema_rows(schema: type, prefix: str) -> list[tuple[str, str, str]]:
    """(key, default, description) of each field; a nested dataclass's fields under its dotted key."""
    docs, rows = field_docs(schema), []
    for f in dataclasses.fields(schema):
        nested = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(nested, type) and dataclasses.is_dataclass(nested):
            rows += schema_rows(nested, f"{prefix}.{f.name}")
        else:
            rows.append((f"{prefix}.{f.name}", _default(f), docs.get(f.name, "")))
    return rows


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    return _shown(value)
