"""The sweeper plugins (framework.contracts.sweeper): the one running a sweep, and a job's trial."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from framework import registry
from framework.contracts.sweeper import SweeperPlugin, Trial, trial_spec


def sweeper_plugin(config: DictConfig) -> SweeperPlugin | None:
    """The sweeper plugin whose Hydra sweeper runs this sweep, built from its section; None for any other."""
    target = OmegaConf.select(config, "hydra.sweeper._target_")
    for name in registry.names("sweeper"):
        plugin = registry.load("sweeper", name)
        if plugin.target == target:
            built: SweeperPlugin = plugin(config.hydra.sweeper)
            return built
    return None


def trial_of_this_job(metric: str) -> Trial | None:
    """The trial this job is, judged by `metric`, when a sweeper plugin's sweep launched it."""
    spec = trial_spec()
    if spec is None:
        return None
    plugin = registry.load("sweeper", str(spec["sweeper"]))
    return plugin(plugin.Config()).trial(spec, metric)
