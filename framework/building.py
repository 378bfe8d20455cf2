"""A run's plugins built and checked against their contracts (a refused value: ConfigError), the objective
checked against the metrics they log, torch set up; for training and for gomoku's `play RUN` alike."""

from __future__ import annotations

import difflib
import logging
import sys
from pathlib import Path
from typing import Any

from framework import config, contracts, registry
from framework.contracts import (
    Agent,
    EnvPlugin,
    EpisodeStatsEnvPlugin,
    EvaluatingAgent,
    MetricNamingAgent,
    Tracker,
    VariantEnvPlugin,
)
from framework.errors import ConfigError, closest
from framework.evaluation import Episodes, summarize

#: The prefix of every metric an evaluation logs (framework.context, EvaluatingAgent).
EVAL_PREFIX = "eval/"


def build_plugin(section: config.Section, kind: str) -> Any:
    """The plugin constructed from its typed config; a value it refuses is a ConfigError."""
    try:
        plugin = section.plugin(section.cfg)
    except ConfigError:
        raise
    except ValueError as e:  # a plugin's constructor checks its config values
        raise ConfigError(str(e)) from None
    except Exception as e:
        raise registry.failed(kind, section.name, "as it was built", e) from e
    problems = contracts.check_instance(kind, plugin)
    if problems:
        raise registry.RegistryError(
            f"The {kind} plugin {section.name!r} does not satisfy its contract: " + "; ".join(problems)
        )
    show_info_lines(plugin)
    return plugin


def show_info_lines(plugin: object) -> None:
    """Its package's INFO lines shown as the core's are (hydra.job_logging sets the root at WARNING),
    unless the user set that logger's level."""
    package = logging.getLogger(type(plugin).__module__.split(".")[0])
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)


def load_agent(run: str | Path) -> Agent:
    """The trained agent of a run directory (or of one of its checkpoints/step_* folders), ready to
    `act(obs)`: its plugin built from the checkpoint's config, and its last checkpoint loaded."""
    from omegaconf import DictConfig, OmegaConf

    from framework.checkpoint import AGENT_DIR, CONFIG_FILE, find_latest, where_it_went_on
    from framework.conf_packages import register_schemas

    checkpoint = find_latest(where_it_went_on(Path(run)) or Path(run))
    if checkpoint is None:
        raise ConfigError(f"{run}: no checkpoint there (a run directory holds checkpoints/latest)")
    register_schemas()
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    config.migrate(saved)
    section = config.plugin_section(saved, "agent")
    assert section is not None
    agent: Agent = build_plugin(section, "agent")
    agent.load(checkpoint / AGENT_DIR)
    return agent


def added_plugins(
    cfg: Any, env: config.Section, env_plugin: EnvPlugin, agent: config.Section, agent_plugin: Agent
) -> dict[str, Any]:
    """Plugins of the kinds plugin packages add (`search`), by kind; a kind refuses an unfit env or agent."""
    built = {}
    for name, kind in registry.added_kinds().items():
        section = config.plugin_section(cfg, name)
        if section is None:
            continue
        kind.check(
            section.name, env=env.name, env_plugin=env_plugin, agent=agent.name, agent_plugin=agent_plugin
        )
        built[name] = build_plugin(section, name)
    return built


def evaluation_metrics(env: EnvPlugin, agent: Agent) -> tuple[frozenset[str], bool]:
    """The metrics the run's evaluation logs, and whether that is all of them (not where the agent's or the
    env's are unnamed: `MetricNamingAgent`, `EpisodeStatsEnvPlugin`)."""
    if isinstance(agent, EvaluatingAgent):
        if isinstance(agent, MetricNamingAgent):
            return frozenset(agent.eval_metric_names(env)), True
        return frozenset(), False
    stats = env.episode_stat_names() if isinstance(env, EpisodeStatsEnvPlugin) else ()
    # The names `summarize` gives each stat (a 0-or-1 *_rate gets its interval too), as the run logs them.
    episodes = Episodes(returns=[0.0], lengths=[1], stats={name: [0.0] for name in stats})
    prefixes = ["eval", *(f"eval/{v}" for v in _variants(env))]
    names = frozenset(name for prefix in prefixes for name in summarize(episodes, prefix))
    return names, isinstance(env, EpisodeStatsEnvPlugin)


def check_objective(metric: str, env: EnvPlugin, agent: Agent) -> None:
    """Refuse an objective the evaluation won't log (a sweep would rank nothing); with names not all known,
    only one outside eval/, under no variant, or one letter-swap from a known one."""
    names, complete = evaluation_metrics(env, agent)
    if metric in names or not _refused(metric, names, complete, env, agent):
        return
    hint = f" Did you mean {found[0]}?" if (found := closest(metric, names)) else ""
    pooled = sorted(n for n in names if n.count("/") == 1)
    logs = f"It logs {', '.join(pooled)}" if pooled else f"It logs {EVAL_PREFIX}... metrics"
    variants = _variants(env)
    if variants and not isinstance(agent, EvaluatingAgent):
        logs += f"; the same under eval/<variant>/ for each of {', '.join(variants)}"
    elif deeper := [n.split("/") for n in names if n.count("/") == 2]:  # an agent's, per opponent
        leaves = sorted({parts[2] for parts in deeper})
        groups = sorted({parts[1] for parts in deeper})
        logs += f"; and eval/<opponent>/ {', '.join(leaves)} for each of {', '.join(groups)}"
    if not complete and not isinstance(agent, EvaluatingAgent):
        logs += "; and the env's episode stats as eval/<stat>"
    raise ConfigError(
        f"objective.metric={metric!r} is not a metric this run's evaluation logs.{hint} {logs}."
    )


def _refused(metric: str, names: frozenset[str], complete: bool, env: EnvPlugin, agent: Agent) -> bool:
    if complete or not metric.startswith(EVAL_PREFIX):
        return True
    if isinstance(agent, EvaluatingAgent):
        return False  # its own metrics, unnamed: any eval/ name may be one
    parts = metric.removeprefix(EVAL_PREFIX).split("/")
    if len(parts) == 2 and parts[0] in _variants(env):
        parts = parts[1:]
    if len(parts) != 1:
        return True  # deeper than eval/<variant>/<stat>, or under no variant of this env
    leaves = {name.rsplit("/", 1)[-1] for name in names}
    return bool(difflib.get_close_matches(parts[0], leaves, n=1, cutoff=0.8))  # else maybe an env stat


def _variants(env: EnvPlugin) -> tuple[str, ...]:
    return tuple(env.eval_variants) if isinstance(env, VariantEnvPlugin) else ()


#: The tracker that keeps no runs (`tracking=none`), which a run without `tracking` gets too.
NO_TRACKING = "none"


def null_tracker() -> Tracker:
    return registry.load("tracker", NO_TRACKING)(None)


def untracked(tracker: Tracker) -> bool:
    return isinstance(tracker, registry.load("tracker", NO_TRACKING))


def run_threads(threads: int) -> int:
    """The CPU threads a run computes on: `threads`, or with 0 every CPU this process may use."""
    from framework import machine

    return threads if threads > 0 else machine.cpus()


def setup_torch(device: str, threads: int, seed: int) -> str:
    """Seed torch and set its threads (`run_threads`) if a plugin imported it; `auto`: the GPU if present."""
    if "torch" not in sys.modules:
        return "cpu" if device == "auto" else device
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(run_threads(threads))
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise ConfigError(
            f"device={device!r} is not valid; choose auto (the GPU when there is one), cpu, cuda or cuda:N"
        ) from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device={device} but torch {torch.__version__} finds no CUDA GPU here; "
            "use device=auto (the GPU when there is one) or device=cpu"
        )
    if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
        raise ConfigError(f"device={device}: torch finds {torch.cuda.device_count()} GPU(s), numbered from 0")
    return device
