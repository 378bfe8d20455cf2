"""A run's plan: config checked and plugins built before anything starts (by a run, and a sweep per
job); the name it is tracked by."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from framework import config
from framework.building import added_plugins, build_plugin, untracked
from framework.checkpoint import AGENT_DIR, CONFIG_FILE
from framework.contracts import Agent, Buffer, CheckedAgent, EnvPlugin, SpacesEnvPlugin, Tracker
from framework.errors import ConfigError
from framework.resume import ResumePoint


@dataclass
class Plan:
    """A run that passed every check: its config and its constructed plugins."""

    cfg: DictConfig
    env_name: str
    env: EnvPlugin
    agent: Agent
    buffer: Buffer | None
    parts: dict[str, object]
    """Its plugins of the kinds plugin packages add (`search`), by kind."""
    plugins: dict[str, str]
    device: str
    resume: ResumePoint | None


def check_config(cfg: DictConfig) -> None:
    """Refuse what a run's start would, without tracker, device or checkpoint; skipped on resume."""
    if cfg.get("resume"):
        return
    config.check_root(cfg)
    check_plan(built(cfg, lambda: str(cfg.device), None))


def built(cfg: DictConfig, device: Callable[[], str], resume: ResumePoint | None) -> Plan:
    # Cheapest first, so that a mistake is refused before the agent's libraries are imported.
    env = _required(cfg, "env")
    env_plugin: EnvPlugin = build_plugin(env, "env")
    buffer = config.plugin_section(cfg, "buffer")
    built_buffer: Buffer | None = build_plugin(buffer, "buffer") if buffer else None
    agent = _required(cfg, "agent")
    built_agent: Agent = build_plugin(agent, "agent")
    parts = added_plugins(cfg, env, env_plugin, agent, built_agent)
    plugins = {"env": env.name, "agent": agent.name}
    if buffer is not None:
        plugins["buffer"] = buffer.name
    plugins.update({kind: str(cfg[kind].name) for kind in parts})
    return Plan(
        cfg=cfg,
        env_name=env.name,
        env=env_plugin,
        buffer=built_buffer,
        parts=parts,
        agent=built_agent,
        plugins=plugins,
        device=device(),
        resume=resume,
    )


def check_plan(plan: Plan) -> None:
    """The agent's check of the other plugins, the objective against their metrics, the resumed checkpoint."""
    cfg, resume = plan.cfg, plan.resume
    if isinstance(plan.agent, CheckedAgent):
        try:
            plan.agent.check_run(env=plan.env, buffer=plan.buffer, parts=plan.parts)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    from framework.building import check_objective

    check_objective(str(cfg.objective.metric), plan.env, plan.agent)
    if resume is not None:
        _check_same_spaces(plan, resume)
        try:
            plan.agent.load(resume.checkpoint / AGENT_DIR)
        except Exception as e:  # HYDRA_FULL_ERROR=1 shows its traceback
            # torch's: a heading, then a line per tensor: the heading and the first
            lines = [line.strip() for line in str(e).strip().splitlines()] or [type(e).__name__]
            reason = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
            if not isinstance(e, OSError | ValueError | RuntimeError):  # KeyError's says only the key
                reason = f"agent={cfg.agent.name}'s load raised {type(e).__name__}: {reason}"
            changed = ", ".join(item.lstrip("+") for item in resume.changes)
            changed = f" with {changed}" if changed else ""
            hint = " (a resumed run goes on as it was built: leave those out)" if changed else ""
            raise ConfigError(
                f"resume={cfg.resume!r}: the checkpoint {resume.checkpoint} cannot be loaded{changed}: "
                f"{reason}{hint}"
            ) from e


def run_name_of(plan: Plan, tracker: Tracker, overrides: Sequence[str], given: str | None) -> str:
    """The run's name, its tracker's (`Tracker.name_run`): a name given stays, a resumed run keeps its own."""
    if plan.resume is None:
        return given or tracker.name_run(
            plan.cfg, plan.env_name, config.named_overrides(plan.cfg, overrides), resumes=None
        )
    first: list[str] = []  # the overrides its first part was named by, where its directory has them
    if plan.resume.source is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            first = [str(o) for o in OmegaConf.load(plan.resume.source / ".hydra" / "overrides.yaml")]
    # A tracked run keeps its own name (its sweep's, say), bar a budget this resume changes.
    named = config.named_overrides(plan.cfg, first) if first and untracked(tracker) else []
    if plan.resume.began_with not in (0, int(plan.cfg.total_steps)):  # a name shows its new budget
        named = [o for o in named if not o.startswith("total_steps=")]
        named.append(f"total_steps={int(plan.cfg.total_steps)}")
    return tracker.name_run(plan.cfg, plan.env_name, named, resumes=plan.resume.run_id or "")


def _check_same_spaces(plan: Plan, resume: ResumePoint) -> None:
    """A resume whose env keys (`env.game=Breakout`) change the spaces its agent trained on is refused."""
    changed = [c.lstrip("+~") for c in resume.changes if c.lstrip("+~").startswith("env.")]
    if not changed or not isinstance(plan.env, SpacesEnvPlugin):
        return
    run = OmegaConf.load(resume.checkpoint / CONFIG_FILE)
    saved = config.plugin_section(run, "env") if isinstance(run, DictConfig) else None
    before = build_plugin(saved, "env") if saved is not None else None
    if isinstance(before, SpacesEnvPlugin) and before.spaces() != plan.env.spaces():
        raise ConfigError(
            f"resume={plan.cfg.resume!r} with {', '.join(changed)}: the run trained on observations "
            f"{before.spaces()[0]} and actions {before.spaces()[1]}, and this env gives "
            f"{plan.env.spaces()[0]} and {plan.env.spaces()[1]}; a resumed run goes on in the env it "
            "trained in (leave those out, or start a new run)"
        )


def _required(cfg: DictConfig, section: str) -> config.Section:
    found = config.plugin_section(cfg, section)
    assert found is not None  # check_root guarantees env and agent
    return found
