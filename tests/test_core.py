"""The core (framework/) is a plugin framework's: it names no plugin, and imports neither Ray nor Optuna.

What one plugin needs lives in that plugin, found through its entry point; the core holds what every
run needs. Checked twice: no import statement in framework/ names such a module, and importing every
core module loads none of them."""

from __future__ import annotations

import ast
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import framework
from tests.conftest import REPO

CORE = Path(framework.__file__).parent
#: Modules the core never imports: the plugin packages, and the libraries only a plugin needs.
NOT_IN_THE_CORE = ("ray", "optuna", "hydra_plugins", "framework_plugins", "plugins")


def imported(source: str) -> set[str]:
    """The top-level names of every module an import statement of `source` names (nested ones too)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_core_module_imports_a_plugin_or_a_plugins_library() -> None:
    found = {
        str(path.relative_to(CORE)): sorted(imported(path.read_text()) & set(NOT_IN_THE_CORE))
        for path in sorted(CORE.rglob("*.py"))
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_check_sees_an_import_inside_a_function() -> None:
    assert imported("def f():\n    from optuna import trial\n    import hydra_plugins.x\n") == {
        "optuna",
        "hydra_plugins",
    }


def test_importing_every_core_module_loads_no_plugin_and_no_plugins_library() -> None:
    code = (
        "import importlib, json, pkgutil, sys, framework\n"
        "for m in pkgutil.walk_packages(framework.__path__, 'framework.'):\n"
        "    if m.name != 'framework.__main__':\n"
        "        importlib.import_module(m.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert (
        len([m for m in loaded if m.startswith("framework.")])
        >= len(list(pkgutil.walk_packages(framework.__path__))) - 1
    )
    assert [m for m in loaded if m.split(".")[0] in NOT_IN_THE_CORE] == []


#: What board games and their searches are called: no name the core defines or imports says it
#: (Hydra's config search path aside).
BOARD_GAMES = re.compile(r"board|game|search|inference|gomoku|mcts|alphazero", re.IGNORECASE)


def names(source: str) -> set[str]:
    """Every name `source` defines, imports or takes as a parameter."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.rpartition(".")[2])
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


def test_the_core_names_nothing_of_board_games_or_their_searches() -> None:
    found = {
        str(path.relative_to(CORE)): sorted(
            n for n in names(path.read_text()) if BOARD_GAMES.search(re.sub("(?i)search_?path", "", n))
        )
        for path in sorted(CORE.rglob("*.py"))
    }
    assert {path: found for path, found in found.items() if found} == {}


def test_the_board_game_check_sees_a_class_a_parameter_and_an_import() -> None:
    source = "from x import SearchEngine\nclass BoardGame: ...\ndef f(search): ...\nsearch_path = 1\n"
    assert {n for n in names(source) if BOARD_GAMES.search(n)} == {
        "SearchEngine",
        "BoardGame",
        "search",
        "search_path",
    }


def test_a_trained_agent_is_loaded_from_its_run_directory_to_act_in_ones_own_code(tmp_path: Path) -> None:
    """The README's way to use a trained agent outside a run: its plugin built from the checkpoint's
    config, its weights loaded; it acts as the run's final evaluation did."""
    import gymnasium as gym
    import pytest

    from framework.app import compose
    from framework.building import load_agent
    from framework.errors import ConfigError
    from framework.evaluation import evaluation_seed, run_episodes
    from framework.run import run

    cfg = [
        "tracking=none",
        "progress=off",
        "eval.episodes=3",
        "total_steps=1500",
        "agent.learning_starts=500",
    ]
    final = run(compose(cfg), run_dir=tmp_path / "run")
    agent = load_agent(tmp_path / "run")
    env = gym.make("CartPole-v1")
    mine = run_episodes(agent.act, env, episodes=3, seed=evaluation_seed(0))
    assert mine["eval/return_mean"] == final["eval/return_mean"]
    with pytest.raises(ConfigError, match="no checkpoint there"):
        load_agent(tmp_path)


def test_a_new_mlflow_run_has_mlflows_source_columns_and_the_core_tags_stay_neutral(tmp_path: Path) -> None:
    from framework.provenance import source_tags
    from framework_plugins.trackers.mlflow_tracker import mlflow_source_tags

    tags = mlflow_source_tags({"git.commit": "abc123", "framework.run_dir": "/r"})
    assert tags["mlflow.source.name"] == "python -m framework" and tags["mlflow.source.type"] == "LOCAL"
    assert tags["mlflow.source.git.commit"] == "abc123" and tags["framework.run_dir"] == "/r"
    assert "mlflow.source.git.commit" not in mlflow_source_tags({})
    assert all(not key.startswith("mlflow.") for key in source_tags())
