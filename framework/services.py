"""The run's services (framework.contracts.service): one per plugin, process-wide as a local Ray is."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from framework import config, registry
from framework.building import show_info_lines
from framework.contracts.service import RunService
from framework.errors import ConfigError, ExplainedError

_open: list[RunService] = []


def open_all(cfg: DictConfig) -> None:
    """Open each service plugin with its section of `cfg` (again: a resumed run's settings)."""
    global _open
    opened = []
    for name in registry.names("service"):
        plugin = registry.load("service", name)
        node = cfg.get(name)
        section = node if node is not None else OmegaConf.structured(plugin.Config)
        typed = config.typed(section, plugin.Config, name, name)
        try:
            service: RunService = plugin(typed)
            show_info_lines(service)
            service.open()
        except (ConfigError, ExplainedError):
            raise
        except Exception as e:
            raise registry.failed("service", name, "as it opened", e) from e
        opened.append(service)
    _open = opened


def close_all(*, at_once: bool = False) -> None:
    """Close every open service (what it started for the run ends); each even where one fails."""
    global _open
    services, _open = _open, []
    errors = []
    for service in services:
        try:
            service.close(at_once=at_once)
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]
