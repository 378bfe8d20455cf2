"""The entry-point registry: discovery, errors, and listing without imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framework import registry


def fake_distribution(root: Path, name: str, entry_points: str, module: str = "", source: str = "") -> Path:
    """A minimal installed distribution (a dist-info folder) that importlib.metadata discovers."""
    info = root / f"{name}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\nSummary: fake {name}\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    if module:
        (root / f"{module}.py").write_text(source)
    return root


def test_builtin_plugins_are_discovered() -> None:
    assert {"cartpole", "lunarlander", "atari", "gym"} <= set(registry.names("env"))
    assert "sb3" in registry.names("agent")
    assert {"mlflow", "none"} <= set(registry.names("tracker"))
    assert "framework" in registry.names("conf")


def test_every_kind_looked_up_parses_each_distributions_metadata_once() -> None:
    """A command line looks up several kinds: each distribution's name and version were parsed once per
    entry point and kind (some 80 parses of ours, a third of a second in every run)."""
    code = """if True:
        import collections, importlib.metadata as md
        from framework import registry
        parsed = collections.Counter()
        read_text = md.PathDistribution.read_text
        def counted(self, filename):
            text = read_text(self, filename)
            if filename in ("METADATA", "PKG-INFO") and text is not None:
                parsed[id(self)] += 1
            return text
        md.PathDistribution.read_text = counted
        found = {kind: registry.discover(kind) for kind in registry.groups()}
        cartpole = found["env"]["cartpole"][0]
        print(max(parsed.values()), cartpole.distribution, cartpole.version)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "framework", "0.1.0"]


def test_unknown_name_lists_known_names_and_closest_match() -> None:
    with pytest.raises(registry.RegistryError) as err:
        registry.load("env", "cartpol")
    message = str(err.value)
    assert "'cartpol'" in message
    assert "Did you mean 'cartpole'?" in message
    assert "atari" in message and "lunarlander" in message


def test_unknown_kind_names_the_valid_kinds() -> None:
    with pytest.raises(registry.RegistryError, match="Unknown plugin kind 'envs'.*env, buffer, agent"):
        registry.names("envs")


def test_load_returns_the_registered_object() -> None:
    from framework_plugins.gym_envs.envs import CartPole

    assert registry.load("env", "cartpole") is CartPole


def test_description_is_read_without_importing(tmp_path: Path) -> None:
    # Its first sentence, whose line the docstring wrapped (`plugins` showed "… 32 channels, trained").
    source = (
        "import this_module_does_not_exist\n\nclass Thing:\n"
        '    """Does a thing, e.g. this, on its own\n    line or more. And then more."""\n'
    )
    fake_distribution(
        tmp_path, "fakeplug", "[framework.envs]\nthing = fakeplug_mod:Thing\n", "fakeplug_mod", source
    )
    code = (
        "import sys; from framework import registry; "
        "print(registry.info('env', 'thing').description()); "
        "print('fakeplug_mod' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:2] == ["Does a thing, e.g. this, on its own line or more.", "False"]


def test_same_name_from_two_distributions_is_an_error_naming_both(tmp_path: Path) -> None:
    fake_distribution(tmp_path, "rival-envs", "[framework.envs]\ncartpole = rival_envs:CartPole\n")
    code = "from framework import registry; registry.load('env', 'cartpole')"
    out = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True)
    assert out.returncode != 0
    assert "'cartpole' is registered by more than one distribution" in out.stderr
    assert "framework 0.1.0" in out.stderr and "rival-envs 1.2.3" in out.stderr

    listing = subprocess.run(
        [sys.executable, "-m", "framework", "plugins"], env=_env(tmp_path), capture_output=True, text=True
    )
    assert listing.returncode == 1
    assert "env 'cartpole' is registered by framework 0.1.0 and rival-envs 1.2.3" in listing.stderr


def _env(path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}


#: A plugin package that adds a kind of its own: `planner`, its contract and one planner.
PLANNER_KIND = '''
import threading
from dataclasses import dataclass, field
from typing import Protocol


class Planner(Protocol):
    """Plans ahead."""

    Config: type

    def __init__(self, cfg) -> None: ...
    def plan(self, depth: int) -> list: ...


@dataclass
class TreeConfig:
    depth: int = 3
    """How far ahead."""


class Tree:
    """Plans by a tree."""

    Config = TreeConfig

    def __init__(self, cfg) -> None:
        self.cfg = cfg

    def plan(self, depth: int) -> list:
        return [depth]


@dataclass(frozen=True)
class PlannerKind:
    name: str = "planner"
    group: str = "thirdkind.planners"
    contract: type = Planner
    capabilities: tuple = ()
    more_capabilities: dict = field(default_factory=dict)

    def check(self, plugin, *, env, env_plugin, agent, agent_plugin) -> None:
        """A planner goes with every env and agent."""

    def part(self, plugin, *, env_plugin, agent_plugin, device, threads, seed, stop):
        return plugin


KIND = PlannerKind()
'''


def test_a_plugin_package_adds_a_kind_with_its_contract_section_and_plugins(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path,
        "thirdkind",
        "[framework.kinds]\nplanner = thirdkind_mod:KIND\n\n"
        "[thirdkind.planners]\ntree = thirdkind_mod:Tree\n",
        "thirdkind_mod",
        PLANNER_KIND,
    )
    code = (
        "from framework import config, contracts, registry\n"
        "print(list(registry.groups())[-2:])\n"
        "print(registry.names('planner'), contracts.contract_of('planner').__name__)\n"
        "print(contracts.check('planner', registry.load('planner', 'tree')))\n"
        "print(config.plugin_sections()['planner'], 'planner' in config.root_schema().__dataclass_fields__)\n"
        "class Bad:\n    Config = None\n"
        "print(contracts.check('planner', Bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("'planner']")
    assert lines[1:4] == ["['tree'] Planner", "[]", "planner True"]
    assert "Config is not a dataclass" in lines[4] and "has no plan(self, depth: int)" in lines[4]

    listing = subprocess.run(
        [sys.executable, "-m", "framework", "plugins", "--kind", "planner"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr
    assert "tree" in listing.stdout and "thirdkind" in listing.stdout


def test_a_kind_that_takes_a_core_kinds_name_is_refused_naming_its_package(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path,
        "rival-kind",
        "[framework.kinds]\nenv = rival_kind_mod:KIND\n",
        "rival_kind_mod",
        PLANNER_KIND.replace('name: str = "planner"', 'name: str = "env"'),
    )
    code = "from framework import registry; registry.groups()"
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert "rival-kind adds the plugin kind 'env', which is already a kind" in out.stderr


def test_the_board_games_search_is_a_kind_its_package_adds() -> None:
    from framework import config, contracts
    from framework_plugins.boardgames import GameEnvPlugin, SearchAgent, SearchPlugin

    assert "search" not in registry.GROUPS and "search" not in contracts.CONTRACTS
    assert registry.groups()["search"] == "framework.search"
    assert contracts.contract_of("search") is SearchPlugin
    assert GameEnvPlugin in contracts.capabilities_of("env")
    assert SearchAgent in contracts.capabilities_of("agent")
    assert config.plugin_sections()["search"] == "search"


def conf_package(root: Path, package: str, group: str, option: str) -> None:
    """A config package holding `group/option.yaml`, which selects the plugin `option`."""
    (root / package / group).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / group / f"{option}.yaml").write_text(f"name: {option}\n")


def refused_run(root: Path, *args: str) -> str:
    """`python -m framework ARGS` with `root`'s distributions installed: refused (exit 1) without a
    traceback; what it said, on one line."""
    out = subprocess.run(
        [sys.executable, "-m", "framework", *args, "tracking=none"],
        env=_env(root), cwd=root, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return " ".join(out.stderr.split())


def test_an_installed_plugin_whose_module_is_not_there_is_one_message_naming_it(tmp_path: Path) -> None:
    """A run of it printed Hydra's 63-line traceback ending in ModuleNotFoundError."""
    fake_distribution(
        tmp_path,
        "broken-envs",
        "[framework.envs]\nmissingmod = broken_envs.nosuchmodule:Env\n"
        "[framework.conf]\nbroken = broken_conf\n",
    )
    conf_package(tmp_path, "broken_conf", "env", "missingmod")
    said = refused_run(tmp_path, "env=missingmod", "total_steps=100")
    assert said.startswith(
        "Error: env 'missingmod' (broken_envs.nosuchmodule:Env, from broken-envs 1.2.3) cannot be loaded: "
        "ModuleNotFoundError: No module named 'broken_envs'. Reinstall or fix broken-envs"
    ), said


def test_an_installed_plugin_no_config_file_selects_is_said_so(tmp_path: Path) -> None:
    """`agent=noyaml` was only "not a config of group agent", its plugin installed and listed."""
    fake_distribution(tmp_path, "noyaml-agents", "[framework.agents]\nnoyaml = noyaml_agents:Agent\n")
    said = refused_run(tmp_path, "agent=noyaml")
    assert said.startswith(
        "Error: agent=noyaml is not a config of group agent. The agent plugin 'noyaml' is "
    ), said
    assert "installed (noyaml_agents:Agent, from noyaml-agents), but no config file agent/noyaml.yaml" in said


IDLE_AGENT = '''
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass
class IdleConfig:
    name: str = "idle"


class Idle:
    """Learns nothing and never says where it is."""

    Config: ClassVar[type] = IdleConfig

    def __init__(self, cfg: Any) -> None: ...
    def learn(self, ctx: Any) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        return 0
    def save(self, path: Any) -> None: ...
    def load(self, path: Any) -> None: ...
'''


def test_an_agent_whose_learn_reports_no_step_fails_its_run_saying_so(tmp_path: Path) -> None:
    """Its run ended FINISHED at step 0 of 300, exit 0: a plugin's bug passed for a trained agent."""
    fake_distribution(
        tmp_path,
        "idle-agent",
        "[framework.agents]\nidle = idle_agent:Idle\n[framework.conf]\nidle = idle_conf\n",
        module="idle_agent", source=IDLE_AGENT,
    )  # fmt: skip
    conf_package(tmp_path, "idle_conf", "agent", "idle")
    said = refused_run(tmp_path, "agent=idle", "total_steps=300", "eval.at_start=false")
    assert said.startswith(
        "Error: agent=idle: its learn returned at step 0 of 300 without reporting a step; an agent calls "
        "ctx.after_step(steps) as it trains"
    ), said
    assert "Run FAILED at step 0 of 300." in said
