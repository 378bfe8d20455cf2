"""Structured config: the root schema, and validation of each plugin's own section."""

# Optional[...] rather than `X | None`: OmegaConf 2.3 cannot read PEP 604 unions.
import difflib
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from framework import registry


class ConfigError(ValueError):
    """A config value or key that the chosen plugin does not accept."""


@dataclass
class EvalConfig:
    every_steps: int = 10_000
    """Evaluate every N env steps during training (0: only at the end)."""
    episodes: int = 10
    """Episodes per evaluation."""
    deterministic: bool = True
    """Act greedily during evaluation."""
    video: bool = False
    """Record the final evaluation to video and attach it to the run."""
    video_episodes: int = 1
    """How many final-evaluation episodes to record."""


@dataclass
class CheckpointConfig:
    every_steps: int = 10_000
    """Save a checkpoint every N env steps (0: only at the end and on Ctrl-C)."""
    keep: int = 2
    """How many recent checkpoints to keep on disk."""


@dataclass
class FrameworkConfig:
    """The root config; `env`, `agent`, ... are validated against their plugin's schema."""

    env: Any = None
    agent: Any = None
    buffer: Any = None
    search: Any = None
    tracking: Any = None
    seed: int = 0
    """Seed for numpy, torch, python and the environments."""
    total_steps: int = 100_000
    """Training budget in environment steps (summed over vectorised envs)."""
    device: str = "auto"
    """Torch device: auto (GPU when present), cpu, cuda, cuda:1, ..."""
    threads: int = 1
    """Torch CPU threads (0: leave torch's default)."""
    resume: Optional[str] = None
    """An MLflow run id or a run directory to continue from its last checkpoint."""
    progress: str = "auto"
    """auto (a bar on a terminal, log lines otherwise), bar, log or off."""
    log_every_s: float = 10.0
    """Seconds between progress log lines and perf/ metrics."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)


PLUGIN_SECTIONS = {
    "env": "env",
    "agent": "agent",
    "buffer": "buffer",
    "search": "search",
    "tracking": "tracker",
}
PROGRESS_MODES = ("auto", "bar", "log", "off")


def register_schema() -> None:
    """Put the root schema in Hydra's ConfigStore; config.yaml lists it first in its defaults."""
    ConfigStore.instance().store(name="framework_schema", node=FrameworkConfig)


def check_root(cfg: DictConfig) -> None:
    """Checks on root values that their type alone does not express."""
    if cfg.progress not in PROGRESS_MODES:
        raise ConfigError(
            f"progress={cfg.progress!r} is not valid; choose one of {', '.join(PROGRESS_MODES)}"
        )
    for key in ("total_steps", "eval.every_steps", "eval.episodes", "checkpoint.every_steps"):
        if OmegaConf.select(cfg, key) < 0:
            raise ConfigError(f"{key}={OmegaConf.select(cfg, key)} must be >= 0")
    if cfg.env is None or cfg.agent is None:
        raise ConfigError("Both env and agent must be chosen, e.g. env=cartpole agent=ppo")


def plugin_section(cfg: DictConfig, section: str) -> tuple[str, Any, Any] | None:
    """(name, plugin object, typed config) for one section, or None when the section is unset."""
    node = cfg.get(section)
    if node is None:
        return None
    kind = PLUGIN_SECTIONS[section]
    name = node.get("name")
    if not name:
        raise ConfigError(f"{section}.name is missing: it names the {kind} plugin to use")
    plugin = registry.load(kind, name)
    return name, plugin, typed(node, getattr(plugin, "Config", None), section, name)


def typed(node: DictConfig, schema: type | None, section: str, name: str) -> Any:
    """Merge `node` (less its `name`) into the plugin's dataclass schema; errors name the key."""
    data = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "name"}  # type: ignore[union-attr]
    if schema is None:
        return data
    assert is_dataclass(schema)
    base = OmegaConf.structured(schema)
    try:
        merged = OmegaConf.merge(base, data)
    except ConfigKeyError as e:
        key = str(e.full_key or e.key)
        leaf = key.rsplit(".", 1)[-1]
        valid = [f.name for f in fields(schema)]
        close = difflib.get_close_matches(leaf, valid, n=1)
        hint = f" Did you mean {section}.{close[0]}?" if close else ""
        raise ConfigError(
            f"Unknown config key {section}.{key} for {section} plugin {name!r}.{hint} "
            f"Valid keys: {', '.join(valid)}"
        ) from None
    except OmegaConfBaseException as e:
        key = str(e.full_key or e.key)
        raise ConfigError(f"Invalid value for {section}.{key} ({name!r}): {e.msg}") from None
    return OmegaConf.to_object(merged)
