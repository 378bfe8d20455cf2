"""A grid sweep's jobs, every one of them checked before the first runs.

Hydra composes a job's config as the job starts, so a value refused in the sweep's fourth job was
refused after three whole runs. The sweep's start composes each job's config the way the launcher
will (`load_sweep_config`) and holds it to what the job's start would refuse (`plan.check_config`:
the root's values, each plugin's keys and values, its constructor's checks, the agent's check of
the others, the objective), no plugin's libraries loaded twice. A resumed job's config is its
run's, found as it starts.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from framework import config
from framework.errors import ConfigError, hydra_message

#: Jobs a sweep's start composes at most (some tens of milliseconds each); a grid past it is
#: checked for its first ones, the rest by each job as it starts.
MOST_JOBS = 1000


def check_jobs(sweep_config: DictConfig) -> None:
    """Refuse the sweep (ConfigError, naming the job and its values) where a job's config would
    be refused as that job starts."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [str(o) for o in sweep_config.hydra.overrides.task]
    parsed = OverridesParser.create().parse_overrides(overrides)
    jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    if len(jobs) < 2 or not GlobalHydra.instance().is_initialized():
        return  # one job: it checks itself as it starts
    loader = GlobalHydra.instance().config_loader()
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    for number, job in enumerate(jobs[:MOST_JOBS]):
        try:
            check_job(loader.load_sweep_config(sweep_config, job))
        except Exception as e:
            # Hydra's own refusals (a swept option that is no config of its group, an unknown key)
            # said as a single run's start says them.
            said = str(e) if isinstance(e, ConfigError) else hydra_message(e)
            if said is None:
                raise
            values = " ".join(o for o in job if o.split("=", 1)[0].lstrip("+~") in swept)
            raise ConfigError(f"job {number} of the sweep ({values}): {said}") from None


def check_job(job_config: DictConfig) -> None:
    """What a job's start refuses of its config (less Hydra's own node, which a job never sees)."""
    from hydra.core.hydra_config import HydraConfig

    from framework.plan import check_config

    cfg = OmegaConf.masked_copy(job_config, [str(k) for k in job_config if k != "hydra"])
    assert isinstance(cfg, DictConfig)
    # A check that reads the job's own overrides (what was set on the command line) reads them as
    # the job's start will: Hydra's config is the job's while it runs (as Hydra's run_job sets it).
    hydra = HydraConfig.instance()
    sweep = hydra.cfg
    hydra.set_config(job_config)
    try:
        check_config(cfg)
    finally:
        if sweep is not None:
            hydra.set_config(sweep)  # type: ignore[arg-type]
    if not cfg.get("resume"):
        config.plugin_section(cfg, "tracking")
