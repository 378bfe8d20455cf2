"""A grid sweep's jobs, every one of them checked before the first runs; a sampled sweep's (Optuna's),
one job of its search space.

Hydra composes a job's config as the job starts, so a value refused in the sweep's fourth job was
refused after three whole runs. The sweep's start composes each job's config the way the launcher
will (`load_sweep_config`) and holds it to what the job's start would refuse (`plan.check_config`:
the root's values, each plugin's keys and values, its constructor's checks, the agent's check of
the others, the objective), no plugin's libraries loaded twice. A resumed job's config is its
run's, found as it starts.
"""

from __future__ import annotations

import math
import os

from omegaconf import DictConfig, OmegaConf

from framework import config
from framework.errors import ConfigError
from framework.hydra_errors import hydra_message

#: The Ray launcher's Hydra target (hydra-ray-launcher).
RAY_LAUNCHER = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"

#: Jobs a sweep's start composes at most (~0.25 CPU-s each; the newest 128 are kept for Hydra's own
#: composes of those jobs, framework/composes.py); a grid past it is checked for its first ones, the
#: rest by each job as it starts.
MOST_JOBS = 1000
#: Points of a sampled sweep's space checked at most, before its study starts.
SAMPLED_JOBS = 4


def check_jobs(sweep_config: DictConfig) -> list[list[str]]:
    """Refuse the sweep (ConfigError, naming the job and its values) where a job's config would
    be refused as that job starts; its jobs' overrides."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [str(o) for o in sweep_config.hydra.overrides.task]
    parsed = OverridesParser.create().parse_overrides(overrides)
    jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    empty = [o.input_line for o in parsed if o.is_sweep_override() and not list(o.sweep_string_iterator())]
    if empty:  # Hydra would launch no job, exit 0, and leave an empty sweep folder
        raise ConfigError(
            f"{empty[0]} sweeps no value, so the sweep has no job: range(start,stop) sweeps start, "
            "start+1, ... below stop (range(2,5): 2, 3, 4)"
        )
    if len(jobs) < 2 or not GlobalHydra.instance().is_initialized():
        return jobs  # one job: it checks itself as it starts
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    for number, job in enumerate(jobs[:MOST_JOBS]):
        _check_composed(sweep_config, job, swept, f"job {number} of the sweep")
    return jobs


def check_a_sampled_job(sweep_config: DictConfig) -> None:
    """Refuse a sampled sweep (ConfigError) whose jobs would be refused at any values of its swept
    keys: a mistyped objective, fixed value or key, said before the study starts rather than by its
    first trial. Jobs at the values of a few points of its space are checked (the i-th of each
    choice or range, an interval's middle); a value refused only at some of them (`choice(0,16)`)
    fails its trials, as `hydra.sweeper.max_failure_rate` allows."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep
    from hydra.errors import HydraException

    params = OmegaConf.select(sweep_config, "hydra.sweeper.params")
    lines = [str(o) for o in sweep_config.hydra.overrides.task]
    lines += [f"{key}={value}" for key, value in (params or {}).items()]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except HydraException:
        return  # the sweeper says what is wrong with its syntax
    if not GlobalHydra.instance().is_initialized():
        return
    fixed = [str(o.input_line) for o in parsed if not o.is_sweep_override()]
    points: dict[str, list[str]] = {}
    for override in (o for o in parsed if o.is_sweep_override()):
        value = override.value()
        if isinstance(value, IntervalSweep):
            low, high = float(value.start or 0), float(value.end or 0)
            middle = math.sqrt(low * high) if "log" in value.tags and low > 0 else (low + high) / 2
            ints = isinstance(value.start, int) and isinstance(value.end, int)
            points[override.get_key_element()] = [f"{round(middle) if ints else middle:g}"]
        else:
            points[override.get_key_element()] = list(override.sweep_string_iterator())[:SAMPLED_JOBS]
    if not points or not all(points.values()):
        return  # the sweeper says it has nothing to search (or an empty range)
    swept = {key.lstrip("+~") for key in points}
    refused: list[tuple[ConfigError, list[str]]] = []
    for i in range(max(len(values) for values in points.values())):
        drawn = [f"{key}={values[i % len(values)]}" for key, values in points.items()]
        try:
            _check_composed(sweep_config, fixed + drawn, swept, "a trial of the sweep")
            return
        except ConfigError as e:
            refused.append((e, drawn))
    # Said: a refusal of what every point shares (the objective), rather than of a drawn value.
    raise next(
        (e for e, drawn in refused if not any(d in str(e).partition("): ")[2] for d in drawn)), refused[0][0]
    )


def _check_composed(sweep_config: DictConfig, job: list[str], swept: set[str], which: str) -> None:
    """The job of these overrides composed as its launcher will, and checked as its start will."""
    from hydra.core.global_hydra import GlobalHydra

    try:
        check_job(GlobalHydra.instance().config_loader().load_sweep_config(sweep_config, job))
    except Exception as e:
        # Hydra's own refusals (a swept option that is no config of its group, an unknown key)
        # said as a single run's start says them.
        said = str(e) if isinstance(e, ConfigError) else hydra_message(e)
        if said is None:
            raise
        values = " ".join(o for o in job if o.split("=", 1)[0].lstrip("+~") in swept)
        raise ConfigError(f"{which} ({values}): {said}") from None


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


def check_launcher(cfg: DictConfig) -> None:
    """A ConfigError for the launcher settings whose library would refuse them with a traceback when
    the first job is due (joblib's n_jobs=0, Ray's num_cpus=abc), or wait for ever on (a task asking
    more CPUs than the Ray the launcher starts has)."""
    launcher = OmegaConf.select(cfg, "hydra.launcher")
    target = str(OmegaConf.select(cfg, "hydra.launcher._target_") or "")
    if "joblib" in target.lower():
        n = launcher.get("n_jobs")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n == 0):
            raise ConfigError(
                f"hydra.launcher.n_jobs={n}: the jobs run at once, a whole number from 1 (-1: one per "
                "CPU, -2: all but one, ...)"
            )
    if target != RAY_LAUNCHER:
        return
    amounts: dict[str, float] = {}
    for part in ("init", "remote"):
        for key in ("num_cpus", "num_gpus"):
            value = OmegaConf.select(launcher, f"ray.{part}.{key}")
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"hydra.launcher.ray.{part}.{key}={value}: give a number, 0 or more")
            amounts[f"{part}.{key}"] = float(value)
    address = OmegaConf.select(launcher, "ray.init.address")
    if address:  # a Ray that runs already (what it has is its own), said now if none answers there
        from framework_plugins.ray_runtime.address import check_address

        check_address(str(address), key="hydra.launcher.ray.init.address")
        return
    if os.environ.get("RAY_ADDRESS"):
        return
    has = {"num_cpus": amounts.get("init.num_cpus", float(os.cpu_count() or 1))}
    has["num_gpus"] = amounts.get("init.num_gpus", float("inf"))  # Ray counts the GPUs itself
    for key, available in has.items():
        asked = amounts.get(f"remote.{key}", 0.0)
        if asked > available:
            raise ConfigError(
                f"hydra.launcher.ray.remote.{key}={asked:g}: each job would ask for more than the Ray the "
                f"launcher starts has ({available:g}), and wait for ever: give {available:g} or less"
            )
