"""Every registered plugin keeps its kind's contract; the contract check catches those that do not."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from framework import config, contracts, registry
from framework.app import compose
from framework.values import field_docs

# A conf entry point is a package of config files and a command a function: neither has a Protocol.
KINDS = [kind for kind in registry.groups() if kind in contracts.CONTRACTS or kind in registry.added_kinds()]
ENTRY_POINTS = [(kind, name) for kind in KINDS for name in registry.names(kind)]
CONF = Path(importlib.import_module("framework_conf").__file__ or "").parent


@pytest.mark.parametrize(("kind", "name"), ENTRY_POINTS)
def test_every_entry_point_satisfies_its_kinds_contract(kind: str, name: str) -> None:
    plugin = registry.load(kind, name)
    assert contracts.check(kind, plugin) == []


@pytest.mark.parametrize(("kind", "name"), ENTRY_POINTS)
def test_every_entry_point_built_from_its_default_config_has_the_contracts_attributes(
    kind: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the MLflow tracker's default store lives in the working directory
    plugin = registry.load(kind, name)
    built = plugin(plugin.Config())
    try:
        assert contracts.check_instance(kind, built) == []
    finally:
        if kind == "tracker":
            built.close()
    assert not (tmp_path / "mlflow.db").exists(), "building a tracker creates no store"


@pytest.mark.parametrize(("kind", "name"), ENTRY_POINTS)
def test_every_schema_field_has_a_one_line_description(kind: str, name: str) -> None:
    schema = registry.load(kind, name).Config
    docs = field_docs(schema)
    missing = [f.name for f in dataclasses.fields(schema) if not docs.get(f.name)]
    assert not missing, f"{schema.__name__} fields without a description: {missing}"


def test_optional_capabilities_are_declared_protocols() -> None:
    fighter, cartpole = registry.load("env", "fighter"), registry.load("env", "cartpole")
    assert contracts.capabilities("env", fighter) == [
        "VectorEnvPlugin",
        "VariantEnvPlugin",
        "EpisodeStatsEnvPlugin",
        "RunWatchingEnvPlugin",
    ]
    assert contracts.capabilities("env", cartpole) == ["EpisodeStatsEnvPlugin", "SpacesEnvPlugin"]
    assert contracts.capabilities("env", registry.load("env", "gym")) == ["SpacesEnvPlugin"]  # stats unknown
    gomoku = registry.load("env", "gomoku")
    assert contracts.capabilities("env", gomoku) == [
        "VariantEnvPlugin",
        "EpisodeStatsEnvPlugin",
        "GameEnvPlugin",  # a capability the board games' package adds to env plugins
    ]
    alphazero, dqn = registry.load("agent", "alphazero"), registry.load("agent", "dqn")
    assert contracts.capabilities("agent", alphazero) == [
        "CheckedAgent",
        "EvaluatingAgent",
        "MetricNamingAgent",
        "SearchAgent",
    ]
    assert contracts.capabilities("agent", dqn) == ["CheckedAgent"]
    assert contracts.capabilities("buffer", registry.load("buffer", "memory_efficient")) == ["FrameBuffer"]
    assert contracts.capabilities("buffer", registry.load("buffer", "replay")) == []


ENV_PLUGINS = registry.names("env")


@pytest.mark.parametrize("name", ENV_PLUGINS)
def test_every_env_plugins_evaluation_envs_keep_the_env_capabilities_they_claim(name: str) -> None:
    plugin_class = registry.load("env", name)
    plugin = plugin_class(plugin_class.Config())
    envs = [plugin.make(seed=0, index=0, evaluation=True)]
    if isinstance(plugin, contracts.VariantEnvPlugin):
        envs += [plugin.make_variant(variant, seed=0) for variant in plugin.eval_variants[:1]]
    try:
        for env in envs:
            assert contracts.check_env(env) == [], type(env).__name__
    finally:
        for env in envs:
            env.close()


def test_the_fighters_evaluation_envs_replay_their_best_round() -> None:
    fighter = registry.load("env", "fighter")
    plugin = fighter(fighter.Config(transport="inprocess"))
    for env in (plugin.make(seed=0, index=0, evaluation=True), plugin.make_variant("defensive", seed=0)):
        assert isinstance(env, contracts.BestEpisodeReplay)
        env.close()


def test_an_env_that_claims_a_capability_in_part_is_named() -> None:
    class HalfReplay:
        def keep_best_episode(self) -> None: ...

    class WrongReplay(HalfReplay):
        def write_best_episode(self, folder: Path) -> Path | None: ...

    assert contracts.check_env(object()) == []  # claims nothing
    (missing,) = contracts.check_env(HalfReplay())
    assert missing.startswith("has no write_best_episode(") and "BestEpisodeReplay" in missing
    (wrong,) = contracts.check_env(WrongReplay)
    assert wrong.startswith("write_best_episode(") and "name" in wrong


def test_registered_schemas_are_the_plugins_own() -> None:
    compose([])  # imports the conf packages, which register their schemas
    assert config.SCHEMAS
    for (section, name), schema in config.SCHEMAS.items():
        assert registry.load(config.plugin_sections()[section], name).Config is schema, (section, name)


#: Keys a config file may set to their default: they say what it selects (agent=ppo: algo PPO).
SELECTING = {"algo"}


SECTIONS = config.plugin_sections()


@pytest.mark.parametrize("path", sorted(p for s in SECTIONS for p in (CONF / s).glob("*.yaml")))
def test_config_files_set_only_what_differs_from_their_schema(path: Path) -> None:
    data = yaml.safe_load(path.read_text()) or {}
    section = path.parent.name
    schemas = [
        e for e in data.get("defaults", []) if isinstance(e, str) and e.startswith(f"/schema_{section}_")
    ]
    assert len(schemas) == 1, f"{path.name} starts from no schema"
    plugin = schemas[0].removeprefix(f"/schema_{section}_").split("@")[0]
    schema = config.SCHEMAS.get((section, plugin)) or registry.load(SECTIONS[section], plugin).Config
    defaults = {f.name: f for f in dataclasses.fields(schema)}
    for key, value in data.items():
        if key in ("defaults", "name"):
            assert key != "name", f"{path.name} repeats the plugin name its schema gives"
            continue
        assert key in defaults, f"{path.name}: {key} is not in {schema.__name__}"
        field = defaults[key]
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
        assert value != default or key in SELECTING, f"{path.name} repeats the default {key}={value!r}"


class Complete:
    """A hand-made agent that keeps the contract."""

    @dataclasses.dataclass
    class Config:
        lr: float = 0.1
        """Learning rate."""

    def __init__(self, cfg: Any) -> None: ...
    def learn(self, ctx: Any) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...


def test_a_conforming_class_passes() -> None:
    assert contracts.check("agent", Complete) == []


def test_a_missing_method_is_named() -> None:
    class NoSave(Complete):
        save = None  # type: ignore[assignment]

    assert any("has no save" in p for p in contracts.check("agent", NoSave))


def test_a_keyword_the_contract_passes_must_be_accepted() -> None:
    class PositionalAct(Complete):
        def act(self, obs: Any, deterministic: bool = True) -> Any: ...  # type: ignore[override]

    class NoDeterministic(Complete):
        def act(self, obs: Any) -> Any: ...  # type: ignore[override]

    assert contracts.check("agent", PositionalAct) == []  # accepts deterministic= by name too
    (problem,) = contracts.check("agent", NoDeterministic)
    assert "act(self, obs: 'Any') -> 'Any'" in problem and "deterministic" in problem


def test_a_buffer_insert_with_named_fields_breaks_the_transition_contract() -> None:
    @dataclasses.dataclass
    class Cfg:
        capacity: int = 1
        """Most transitions held."""

    class Positional:
        Config: ClassVar[type] = Cfg

        def __init__(self, cfg: Any) -> None: ...
        def seed(self, seed: int) -> None: ...
        def insert(self, observation: Any, action: Any) -> None: ...
        def sample(self, batch_size: int) -> dict: ...
        def __len__(self) -> int: ...
        def state_dict(self) -> dict: ...
        def load_state_dict(self, state: dict) -> None: ...

    (problem,) = contracts.check("buffer", Positional)
    assert problem.startswith("insert(") and "**transition" in problem


def test_a_config_that_is_not_a_dataclass_is_named() -> None:
    class Untyped(Complete):
        Config = dict  # type: ignore[assignment]

    assert contracts.check("agent", Untyped) == [
        "Config is not a dataclass (the schema of its config section)"
    ]


def test_a_missing_attribute_is_found_on_the_built_plugin() -> None:
    class NoCount:
        Config = Complete.Config

        def __init__(self, cfg: Any) -> None: ...
        def make(
            self, *, seed: int, index: int, evaluation: bool = False, render_mode: Any = None
        ) -> Any: ...

    assert contracts.check("env", NoCount) == []
    assert contracts.check_instance("env", NoCount(None)) == ["has no attribute n_envs (EnvPlugin)"]
