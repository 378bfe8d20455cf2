"""The Hydra application: compose the config from every installed conf package, then run it."""

from __future__ import annotations

import os
from pathlib import Path

import hydra
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin
from hydra.types import RunMode
from omegaconf import DictConfig

from framework import config, registry
from framework.sweep import PARENT_RUN_ENV


class EntryPointSearchPath(SearchPathPlugin):
    """Adds every `framework.conf` entry point's package to Hydra's config search path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for name, entries in registry.discover("conf").items():
            for entry in entries:
                module = entry.value.split(":", 1)[0].strip()
                search_path.append(provider=f"framework.conf:{name}", path=f"pkg://{module}")


def task(cfg: DictConfig) -> float | None:
    """Hydra's task function: one job of a run or a sweep."""
    from framework.run import run

    hc = HydraConfig.get()
    final = run(
        cfg,
        run_dir=Path(hc.runtime.output_dir),
        overrides=list(hc.overrides.task),
        parent_run_id=os.environ.get(PARENT_RUN_ENV),
        job_label=f"#{hc.job.num}" if hc.mode == RunMode.MULTIRUN else None,
    )
    # The return value is what a Hydra sweeper (Optuna, Nevergrad) optimises.
    return final.get("eval/return_mean")


def _setup() -> None:
    config.register_schema()
    Plugins.instance().register(EntryPointSearchPath)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The config the command line would build from `overrides`, for notebooks and tests."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    _setup()
    with initialize_config_module(config_module="framework_conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides or [])


def main() -> None:
    _setup()
    hydra.main(version_base="1.3", config_path=None, config_name="config")(task)()
