"""A run's config composed once by Hydra, not three times (~0.25 CPU-s each), and the config its
command line composes without the values it sets, from what that compose saw (a run's name).

Hydra composes a command line to read `hydra.mode` (`Hydra.get_mode`, as a sweep, so that a sweep's
values pass), then, with `hydra.mode=RUN` (`-m`: MULTIRUN) added, to run it. Here the first is
composed as the second, which is then that config with the mode applied as Hydra applies it (or that
compose's error, where Hydra's own reading of the mode fails too). Where a config sets the mode, or a
run's compose is refused where a sweep's passes, Hydra composes as it does. Hydra is pinned to 1.3.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Collection
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

#: The run's config (or error) composed for get_mode, by its loader and the arguments of the compose
#: it serves.
_composed: dict[tuple[Any, ...], DictConfig | Exception] = {}
#: The last compose's value overrides and its config before them (its groups chosen).
_before_values: dict[str, Any] = {}
#: A loader's attribute: the composes it made, by their arguments, with what `_before_values` held
#: after each (~160 KiB each).
MADE = "framework_made"
#: The most kept: a sweep's jobs are composed three times each (checked by the sweep's parent, by
#: Hydra's sweeper, and as each starts), the first two before its first job starts.
MOST_MADE = 128
_load = ConfigLoaderImpl.load_configuration
_apply = ConfigLoaderImpl._apply_overrides_to_config


def install() -> None:
    """Hydra's config loader composes as this module says (again: the same, the originals kept)."""
    ConfigLoaderImpl.load_configuration = _load_configuration  # type: ignore[method-assign]
    ConfigLoaderImpl._apply_overrides_to_config = staticmethod(_apply_values)  # type: ignore[method-assign]


def _load_configuration(
    self: ConfigLoaderImpl,
    config_name: str | None,
    overrides: list[str],
    run_mode: RunMode,
    from_shell: bool = True,
    validate_sweep_overrides: bool = True,
) -> DictConfig:
    key = (self, config_name, tuple(overrides), from_shell, run_mode)
    ready = _composed.pop(key, None) if validate_sweep_overrides else None
    _composed.clear()
    if isinstance(ready, Exception):
        raise ready
    if ready is not None:
        _apply(OverridesParser.create().parse_overrides(overrides[-1:]), ready)
        ready.hydra.overrides.hydra.append(overrides[-1])
        return ready
    if run_mode != RunMode.MULTIRUN or validate_sweep_overrides:
        return _compose(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
    # get_mode's: composed as the command's run or sweep, which Hydra then composes with its mode added
    mode = RunMode.MULTIRUN if {"-m", "--multirun"} & set(sys.argv[1:]) else RunMode.RUN
    served = (self, config_name, (*overrides, f"hydra.mode={mode.name}"), from_shell, mode)
    try:
        cfg = _compose(self, config_name, overrides, mode, from_shell, True)
    except Exception as e:
        refused = e
    else:
        if cfg.hydra.mode is None:
            _composed[served] = cfg
        return cfg
    try:
        cfg = _compose(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
    except Exception:
        _composed[served] = refused
        raise
    if cfg.hydra.mode is None:  # Hydra adds the mode, and the same compose refuses it then
        _composed[served] = refused
    return cfg


def _compose(
    self: ConfigLoaderImpl, name: str | None, overrides: list[str], mode: RunMode, shell: bool, validate: bool
) -> DictConfig:
    """Hydra's compose (a copy of the same one's, where it was made here), its values and the config
    before them kept with its task overrides."""
    key = (name, tuple(overrides), mode, shell, validate, os.getcwd())
    made_here: dict[tuple[Any, ...], tuple[DictConfig, dict[str, Any]]] = self.__dict__.setdefault(MADE, {})
    _before_values.clear()
    if key in made_here:
        made, before = made_here.pop(key)
        copied = _plain(made.hydra.job.env_set)  # hydra.job.env_copy's, as they were then
        if copied == {k: os.environ.get(k) for k in copied}:
            made_here[key] = made, before  # the newest
            _before_values.update(before)
            return copy.deepcopy(made)
    cfg = _load(self, name, overrides, mode, shell, validate)
    _before_values["task"] = _plain(cfg.hydra.overrides.task)
    made_here[key] = copy.deepcopy(cfg), dict(_before_values)
    while len(made_here) > MOST_MADE:
        del made_here[next(iter(made_here))]
    return cfg


def _apply_values(overrides: list[Override], cfg: DictConfig) -> None:
    _before_values.update(overrides=list(overrides), cfg=copy.deepcopy(cfg))  # ~5 ms
    _apply(overrides, cfg)


def _plain(node: Any) -> Any:
    """A node's values as given (`${oc.env:X}` unresolved: an unset one is refused by the run)."""
    return OmegaConf.to_container(node, resolve=False)


def without_values(keys: Collection[str]) -> DictConfig | None:
    """The running job's config as its command line composes it without its values for `keys`; None
    where one of them is not a value there (a group's choice) or the job's compose is not known."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    if _before_values.get("task") != _plain(HydraConfig.get().overrides.task):
        return None
    overrides: list[Override] = _before_values["overrides"]
    if not set(keys) <= {o.key_or_group for o in overrides}:
        return None
    cfg = copy.deepcopy(_before_values["cfg"])
    _apply([o for o in overrides if o.key_or_group not in keys], cfg)
    return cfg
