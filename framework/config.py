"""Structured config: the root schema, plugin schemas in Hydra's ConfigStore, and validation.

Each default and its description live once, in a dataclass schema (the root's below, each plugin's
in its `Config`); a YAML file starts from its schema and sets only what differs.
"""

# Optional[...] rather than `X | None`: OmegaConf 2.3 cannot read PEP 604 unions.
import dataclasses
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, make_dataclass
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from framework import contracts, errors, registry
from framework.errors import ConfigError, check_choice, did_you_mean, moved_message, wrong_type
from framework.values import OPERATIONAL, bounds, check_values, resolved

__all__ = [
    "ConfigError",
    "FrameworkConfig",
    "Section",
    "bounds",
    "check_root",
    "plugin_section",
    "store_schema",
]


@dataclass
class EvalConfig:
    every_steps: int = field(default=10_000, metadata=bounds(ge=0))
    """Evaluate every N env steps during training (0: only at the end)."""
    at_start: bool = True
    """Evaluate the untrained agent too, logged as eval_untrained/* at step 0: beside each learning
    curve, never its first point nor the objective, and not reported to an Optuna trial."""
    episodes: int = field(default=10, metadata=bounds(ge=0))
    """Episodes per evaluation (0: none, and no metric for the objective). Every evaluation of a
    run plays the same episodes, seeded apart from every training seed (evaluation_seed)."""
    deterministic: bool = True
    """Act greedily during evaluation."""
    video: bool = False
    """Record the final evaluation to video and attach it to the run."""
    video_episodes: int = field(default=1, metadata=bounds(ge=1))
    """How many final-evaluation episodes to record."""


@dataclass
class CheckpointConfig:
    every_steps: int = field(default=10_000, metadata=bounds(ge=0))
    """Save a checkpoint every N env steps (0: only at the end and on Ctrl-C)."""
    keep: int = field(default=2, metadata=bounds(ge=1))
    """How many of the run's newest checkpoints to keep on disk (a resumed run's earlier directory's
    count too, oldest first)."""


@dataclass
class ObjectiveConfig:
    metric: str = "eval/return_mean"
    """The final metric a run is judged by: what a sweeper optimises and a sweep's summary ranks."""
    mode: str = "max"
    """max or min: which end of the metric is best."""
    also: list[str] = field(default_factory=list)
    """More metrics a sweep's parent run summarises beside the objective (perf/sims_per_s, say):
    a column each in its table, and a heat map each when two settings are swept."""


@dataclass
class FrameworkConfig:
    """The root config; `env`, `agent`, ... are checked against their plugin's schema (root_schema
    adds a section per service plugin and per added kind)."""

    env: Any = None
    agent: Any = None
    buffer: Any = None
    tracking: Any = None
    seed: int = field(default=0, metadata=bounds(ge=0, le=2**32 - 1))
    """Seed for numpy, torch, python and the environments (numpy's legacy generator takes 32 bits)."""
    total_steps: int = field(default=100_000, metadata=bounds(ge=0))
    """Training budget in environment steps (summed over vectorised envs)."""
    device: str = "auto"
    """Torch device: auto (GPU when present), cpu, cuda, cuda:1, ..."""
    threads: int = field(default=1, metadata=bounds(ge=0))
    """CPU threads the run computes on: torch's (the network's, ONNX Runtime's too) and a search's
    tree kernels, which walk a batch of games' trees on that many threads (0: every CPU this
    process may use, its affinity and cgroup quota honoured)."""
    resume: Optional[str] = None
    """An MLflow run id or a run directory to continue from its last checkpoint."""
    progress: str = "auto"
    """auto (a bar on a terminal, log lines otherwise), bar, log or off."""
    log_every_s: float = field(default=10.0, metadata=bounds(ge=0))
    """Seconds between progress log lines and perf/ metrics (0: a line every step)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)


#: Every schema a conf package registered, by (section, plugin name).
SCHEMAS: dict[tuple[str, str], type] = {}

#: The core's plugin sections and the kind of plugin each names (`plugin_sections()`: every one).
PLUGIN_SECTIONS = {
    "env": "env",
    "agent": "agent",
    "buffer": "buffer",
    "tracking": "tracker",
}
PROGRESS_MODES = ("auto", "bar", "log", "off")
OBJECTIVE_MODES = ("max", "min")


@dataclass(frozen=True)
class Section:
    """One plugin section of a run's config: the plugin's name, the loaded plugin, its typed config."""

    name: str
    plugin: Any
    cfg: Any


def plugin_sections() -> dict[str, str]:
    """Every plugin section of a run's config and its kind: the core's, then the added kinds'."""
    return {**PLUGIN_SECTIONS, **{name: name for name in registry.added_kinds()}}


@functools.cache
def root_schema() -> type:
    """FrameworkConfig with a section per service plugin (`ray`) and per added kind (`search`)."""
    sections = [(name, registry.load("service", name).Config) for name in registry.names("service")]
    extra: list[tuple[str, Any, Any]] = [(name, Any, field(default=None)) for name in registry.added_kinds()]
    extra += [(name, schema, field(default_factory=schema)) for name, schema in sections]
    if not extra:
        return FrameworkConfig
    return make_dataclass("FrameworkConfig", extra, bases=(FrameworkConfig,))


def register_schema() -> None:
    """Put the root schema in Hydra's ConfigStore; config.yaml lists it first in its defaults."""
    ConfigStore.instance().store(name="framework_schema", node=root_schema())


def store_schema(section: str, name: str, schema: type) -> None:
    """Register a plugin's schema as the config `schema_<section>_<name>` (`defaults:
    [/schema_agent_dqn@_here_, _self_]`), untyped so that a preset may switch plugins; the run checks
    the section against the chosen plugin's schema (`plugin_section`)."""
    if not is_dataclass(schema):
        raise TypeError(f"The schema of {section} plugin {name!r} must be a dataclass, not {schema!r}")
    if "name" in {f.name for f in fields(schema)}:  # the section's `name` is the plugin it chose
        raise TypeError(
            f"The schema {schema.__name__} of {section} plugin {name!r} has a field `name`, the key that "
            f"chooses the plugin ({section}={name}); give the field another name"
        )
    try:
        defaults = OmegaConf.to_container(OmegaConf.structured(schema))
    except OmegaConfBaseException as e:  # a default its field's type refuses
        reason = str(e).strip().splitlines()[0]
        raise TypeError(f"The schema {schema.__name__} of {section} plugin {name!r}: {reason}") from None
    assert isinstance(defaults, dict)
    SCHEMAS[(section, name)] = schema
    for key, place in (getattr(schema, "MOVED", None) or {}).items():
        errors.MOVED[f"{section}.{key}"] = place
    # Outside any group, so that `--help` lists only the groups a user chooses from.
    ConfigStore.instance().store(name=schema_config_name(section, name), node={"name": name, **defaults})


def schema_config_name(section: str, name: str) -> str:
    """`schema_agent_dqn`: the name a config file's defaults list gives a plugin's schema by."""
    return f"schema_{section}_{name}"


def check_root(cfg: DictConfig) -> None:
    """Every interpolation resolved (an unset `${oc.env:X}` is refused here, not mid-run), then the
    root's values held to their schema."""
    values = resolved(cfg)
    _check_chosen_options()
    if isinstance(cfg.get("resume"), str) and not cfg.resume.strip():
        raise ConfigError(
            "resume= is empty (an unset shell variable?): give the run directory or tracked run id to "
            "continue, or leave resume= out to start a new run"
        )
    check_choice("progress", cfg.progress, PROGRESS_MODES)
    check_choice("objective.mode", cfg.objective.mode, OBJECTIVE_MODES)
    check_values(root_schema(), values)
    if cfg.env is None or cfg.agent is None:
        raise ConfigError("Both env and agent must be chosen, e.g. env=cartpole agent=ppo")


def _check_chosen_options() -> None:
    """An option the command line chose (`tuned=dqn_cartpol`) that its group lacks: Hydra refuses it
    but in an optional default (`tuned`), which it leaves out silently."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or not GlobalHydra.instance().is_initialized():
        return  # composed outside Hydra's app (a notebook): nothing was chosen on a command line
    loader = GlobalHydra.instance().config_loader()
    for item in HydraConfig.get().overrides.task:
        group, _, option = str(item).lstrip("+").partition("=")
        if group.startswith("~") or "." in group or "," in option or option in ("", "null"):
            continue
        options = loader.get_group_options(group)
        if options and option not in options:
            hint = did_you_mean(option, options, prefix=f"{group}=")
            raise ConfigError(
                f"{group}={option} is not a config of group {group}.{hint} Options: {', '.join(options)}"
            )


def plugin_section(cfg: DictConfig, section: str) -> Section | None:
    """The plugin a section names, checked against its kind's contract, and its typed config."""
    node = cfg.get(section)
    if node is None:
        return None
    kind = plugin_sections()[section]
    name = node.get("name")
    if not name:
        raise ConfigError(f"{section}.name is missing: it names the {kind} plugin to use")
    plugin = registry.load(kind, name)
    problems = contracts.check(kind, plugin)
    if problems:
        where = registry.info(kind, name)
        raise registry.RegistryError(
            f"The {kind} plugin {name!r} ({where.value}, from {where.distribution} {where.version}) does "
            f"not satisfy {_qualified(contracts.contract_of(kind))}: " + "; ".join(problems)
        )
    return Section(name, plugin, typed(node, plugin.Config, section, name))


def _qualified(contract: type) -> str:
    """`framework.contracts.Agent`: a contract by the package that exports it."""
    return f"{contract.__module__.rpartition('.')[0]}.{contract.__name__}"


def typed(node: DictConfig, schema: type, section: str, name: str) -> Any:
    """Merge `node` (less its `name`) into the plugin's dataclass schema; errors name the key."""
    data = {k: v for k, v in resolved(node).items() if k != "name"}
    assert is_dataclass(schema)
    base = OmegaConf.structured(schema)
    try:
        merged = OmegaConf.merge(base, data)
    except ConfigKeyError as e:
        key = str(e.full_key or e.key)
        leaf = key.rsplit(".", 1)[-1]
        valid = [f.name for f in fields(schema)]
        place = moved(schema, leaf)
        if place is not None:
            raise ConfigError(moved_message(f"{section}.{key}", place)) from None
        hint = did_you_mean(leaf, valid, prefix=f"{section}.")
        raise ConfigError(
            f"Unknown config key {section}.{key} for {section} plugin {name!r}.{hint} "
            f"Valid keys: {', '.join(valid)}"
        ) from None
    except OmegaConfBaseException as e:
        key = str(e.full_key or e.key)
        reason = str(e.msg).strip().splitlines()[0]
        if "is not a ListConfig" in reason:  # `agent.hidden_sizes=64`
            value = OmegaConf.select(OmegaConf.create(data), key)
            reason = f"a list, written in brackets: {section}.{key}=[{value}]"
        raise ConfigError(
            wrong_type(f"{section}.{key}", reason)
            or f"Invalid value for {section}.{key} ({section} plugin {name!r}): {reason}"
        ) from None
    typed_cfg = OmegaConf.to_object(merged)
    check_values(schema, typed_cfg, f"{section}.")
    return typed_cfg


def moved(schema: Any, key: str) -> str | None:
    """Where a key of a plugin's schema lives now (its `MOVED` table), None if it never moved."""
    table = getattr(schema, "MOVED", None)
    return table.get(key) if isinstance(table, dict) else None


def migrate(saved: DictConfig) -> DictConfig:
    """A saved run's config with each `MOVED` key at its new place, unless that holds a value already."""
    for _, node, schema in _schemas(saved):
        for key, place in (getattr(schema, "MOVED", None) or {}).items():
            if key not in node:
                continue
            value = node[key]
            with open_dict(node):
                del node[key]
            if OmegaConf.select(saved, place) is None:
                with open_dict(saved):
                    OmegaConf.update(saved, place, value, force_add=True)
    return saved


def task_overrides(node: Any) -> list[str]:
    """Hydra's `overrides.task` as typed: `${oc.env:X}` stays text (resolving an unset one would raise
    before the run can refuse it)."""
    return [str(item) for item in OmegaConf.to_container(node, resolve=False)]  # type: ignore[union-attr]


def named_overrides(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """The overrides a name may say: less those of plugin keys marked OPERATIONAL (open_browser)."""
    shown = {
        f"{section}.{f.name}"
        for section, _, schema in _schemas(cfg)
        if dataclasses.is_dataclass(schema)
        for f in dataclasses.fields(schema)
        if f.metadata.get(OPERATIONAL)
    }
    return [o for o in overrides if o.partition("=")[0].lstrip("+~") not in shown]


def _schemas(cfg: DictConfig) -> Iterator[tuple[str, DictConfig, Any]]:
    """(section, node, plugin schema) for each plugin section of `cfg` whose plugin loads."""
    for section, kind in plugin_sections().items():
        node = cfg.get(section)
        name = node.get("name") if isinstance(node, DictConfig) else None
        if not name:
            continue
        try:
            schema = registry.load(kind, str(name)).Config
        except Exception:  # a plugin that does not load: its run is refused elsewhere
            continue
        yield section, node, schema
