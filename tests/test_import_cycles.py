"""No module of the project imports itself back: the core, the plugins and the Hydra plugins form no
import cycle, counting the imports made inside functions (a lazy import hides a cycle, it does not
break it). Imports under `if TYPE_CHECKING:` are no import at run time, and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

#: The project's packages, by the name they are imported as, and where their sources are.
PACKAGES = {"framework": "framework", "framework_plugins": "plugins", "hydra_plugins": "hydra_plugins"}


def modules(root: Path) -> dict[str, Path]:
    """Every module of the project's packages under `root`, by its dotted name."""
    found = {}
    for name, folder in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = [name, *path.relative_to(root / folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules `module` imports, inside functions too, bar those under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {owner(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            # `from pkg import mod` imports the module mod; `from pkg import name`, the package pkg.
            found |= {owner(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base) for a in node.names}
    return {name for name in found if name is not None and name != module}


def cycles(root: Path) -> list[list[str]]:
    """The groups of modules that import each other in a loop (strongly connected, of two or more)."""
    known = modules(root)
    edges = {module: imports(module, path, known) for module, path in known.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in edges[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in order:
            visit(module)
    return found


def test_no_module_of_the_project_imports_itself_back() -> None:
    assert cycles(REPO) == []


def test_the_check_finds_a_cycle_a_lazy_import_makes_but_none_under_type_checking(tmp_path: Path) -> None:
    core = tmp_path / "framework"
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "a.py").write_text("from framework.b import thing\n")
    (core / "b.py").write_text("thing = 1\n\ndef later():\n    from . import a\n")
    (core / "c.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from framework import a\n"
    )
    (core / "d.py").write_text("import framework.c\n")
    for folder in ("plugins", "hydra_plugins"):
        (tmp_path / folder).mkdir()
    assert cycles(tmp_path) == [["framework.a", "framework.b"]]
    (core / "a.py").write_text("from framework.c import x\n")
    assert cycles(tmp_path) == []
