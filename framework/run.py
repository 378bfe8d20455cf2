"""The run lifecycle: validate → build → track → learn → evaluate → artifacts → end.

Everything that can be refused is refused before the tracked run exists: the config, the
plugins' own checks of their values, the resume target, the tracking store. A run that
starts always ends FINISHED, KILLED (Ctrl-C) or FAILED, with a last checkpoint, and its last
lines say where its results are.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from framework import __version__, config, contracts, registry
from framework.checkpoint import AGENT_DIR, CONFIG_FILE, STATE_FILE, Checkpointer, find_latest, read_state
from framework.context import RunContext
from framework.contracts import Agent, Buffer, EnvPlugin, SearchEngine, Tracker
from framework.errors import ConfigError, RunFailed
from framework.progress import ProgressDisplay
from framework.provenance import flatten, run_tags
from framework.summary import RunSummary

log = logging.getLogger("framework")

#: Process exit status of a run stopped with Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_KILLED = 130
#: Where a run resumed from a tracked run's artifacts keeps the checkpoint it downloaded.
RESUMED_DIR = "resumed_checkpoint"


@dataclass
class ResumePoint:
    run_id: str | None
    checkpoint: Path
    config: DictConfig
    step: int


@dataclass
class Plan:
    """A run that passed every check: its config and its constructed plugins."""

    cfg: DictConfig
    env_name: str
    agent_name: str
    env: EnvPlugin
    agent: Agent
    buffer: Buffer | None
    search: SearchEngine | None
    plugins: dict[str, str]
    device: str
    resume: ResumePoint | None


class RunKilled(SystemExit):
    """Raised after a run was stopped by Ctrl-C and ended KILLED with a checkpoint."""


def run(
    cfg: DictConfig,
    *,
    run_dir: Path,
    overrides: Sequence[str] = (),
    parent_run_id: str | None = None,
    run_name: str | None = None,
    started_at: float | None = None,
) -> dict[str, float]:
    """Run one experiment end to end; returns the final evaluation metrics."""
    started_at = time.time() if started_at is None else started_at
    config.check_root(cfg)
    tracking = config.plugin_section(cfg, "tracking")
    # The tracker starts first: a tracker that works in the background gets going while the
    # plugins below are imported and checked; it writes nothing until start_run.
    tracker: Tracker = _build(tracking, "tracker") if tracking else _null_tracker()
    try:
        plan = _prepare(cfg, tracker, overrides, run_dir)
        return _execute(plan, tracker, run_dir, overrides, parent_run_id, run_name, started_at)
    finally:
        tracker.close()


def _prepare(cfg: DictConfig, tracker: Tracker, overrides: Sequence[str], run_dir: Path) -> Plan:
    """Every check that can refuse the run, and its plugins built, before anything is tracked."""
    resume = None
    if cfg.resume:
        resume = _resume_point(cfg, tracker, overrides, run_dir)
        cfg = resume.config
        config.check_root(cfg)
    _seed_everything(int(cfg.seed))
    # Cheapest first, so that a mistake is refused before the agent's libraries are imported.
    env = _required(cfg, "env")
    env_plugin: EnvPlugin = _build(env, "env")
    buffer, search = config.plugin_section(cfg, "buffer"), config.plugin_section(cfg, "search")
    built_buffer: Buffer | None = _build(buffer, "buffer") if buffer else None
    built_search: SearchEngine | None = _build(search, "search") if search else None
    agent = _required(cfg, "agent")
    device = _setup_torch(str(cfg.device), int(cfg.threads), int(cfg.seed))
    plugins = {"env": env.name, "agent": agent.name}
    plugins.update({s: v.name for s, v in (("buffer", buffer), ("search", search)) if v is not None})
    plan = Plan(
        cfg=cfg,
        env_name=env.name,
        agent_name=agent.name,
        env=env_plugin,
        buffer=built_buffer,
        search=built_search,
        agent=_build(agent, "agent"),
        plugins=plugins,
        device=device,
        resume=resume,
    )
    if resume is not None:
        try:
            plan.agent.load(resume.checkpoint / AGENT_DIR)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise ConfigError(
                f"resume={cfg.resume!r}: the checkpoint {resume.checkpoint} cannot be loaded: {e}"
            ) from None
    return plan


def _execute(
    plan: Plan,
    tracker: Tracker,
    run_dir: Path,
    overrides: Sequence[str],
    parent_run_id: str | None,
    run_name: str | None,
    started_at: float,
) -> dict[str, float]:
    cfg, resume = plan.cfg, plan.resume
    run_dir.mkdir(parents=True, exist_ok=True)
    name = run_name or _run_name(cfg, plan.env_name)
    tracker.start_run(
        run_name=name,
        tags=run_tags(plan.plugins, run_dir, overrides),
        parent_run_id=parent_run_id,
        resume_run_id=resume.run_id if resume else None,
        start_time=started_at,
    )
    if resume is None:
        tracker.log_params(flatten(OmegaConf.to_container(cfg, resolve=True)))
    else:
        tracker.set_tags({"framework.resumed_from_step": str(resume.step)})
    run_id = tracker.run_id  # a tracker that cannot create its run stops here, before training
    checkpointer = Checkpointer(
        run_dir / "checkpoints",
        every_steps=int(cfg.checkpoint.every_steps),
        keep=int(cfg.checkpoint.keep),
        config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
    )
    start_step = resume.step if resume else 0
    ctx = RunContext(
        cfg=cfg,
        env_plugin=plan.env,
        seed=int(cfg.seed),
        rng=np.random.default_rng(int(cfg.seed)),
        device=plan.device,
        total_steps=int(cfg.total_steps),
        tracker=tracker,
        checkpointer=checkpointer,
        progress=ProgressDisplay(
            int(cfg.total_steps),
            mode=str(cfg.progress),
            start=start_step,
            log_every_s=float(cfg.log_every_s),
            metric=str(cfg.objective.metric),
        ),
        run_dir=run_dir,
        start_step=start_step,
        buffer=plan.buffer,
        search=plan.search,
        resume_from=resume.checkpoint if resume else None,
    )
    summary = RunSummary(
        run_name=name,
        run_id=run_id,
        run_dir=run_dir,
        total_steps=int(cfg.total_steps),
        objective=str(cfg.objective.metric),
        view=tracker.how_to_view(run_id),
    )
    agent = plan.agent
    try:
        log.info("run started: env=%s agent=%s dir=%s", plan.env_name, plan.agent_name, run_dir)
        with _stop_on_sigint(ctx.stop):
            agent.learn(ctx)
        step = ctx.progress.step
        if ctx.stop.is_set():
            raise KeyboardInterrupt
        if ctx.progress.steps_per_s > 0:  # short runs end before their first periodic perf metric
            ctx.log_metrics({"perf/env_steps_per_s": ctx.progress.steps_per_s}, step)
        video_dir = run_dir / "videos" if cfg.eval.video else None
        final = ctx.evaluate(agent, step, video_dir=video_dir)
        last = ctx.save_checkpoint(step, agent)
        _log_artifacts(tracker, run_dir, last)
        tracker.end_run("FINISHED", end_time=time.time())
        ctx.close()
        print(summary.text("FINISHED", step, final), flush=True)
        return final
    except KeyboardInterrupt:
        saved = _last_checkpoint(ctx, agent)
        _end_safely(tracker, run_dir, saved, "KILLED")
        ctx.close()
        resume_with = ("continue with", f"python -m framework resume={run_id or run_dir}")
        print(
            summary.text(
                "KILLED", ctx.progress.step, ctx.last_eval, extra=[("checkpoint", str(saved)), resume_with]
            ),
            flush=True,
        )
        raise RunKilled(EXIT_KILLED) from None
    except BaseException as e:
        trace = traceback.format_exc()
        (run_dir / "traceback.txt").write_text(trace)
        saved = _last_checkpoint(ctx, agent)
        _end_safely(tracker, run_dir, saved, "FAILED", trace)
        ctx.close()
        if not isinstance(e, Exception):
            raise
        raise RunFailed(summary.text("FAILED", ctx.progress.step, ctx.last_eval, error=e)) from e
    finally:
        ctx.close()


def _required(cfg: DictConfig, section: str) -> config.Section:
    found = config.plugin_section(cfg, section)
    assert found is not None  # check_root guarantees env and agent
    return found


def _build(section: config.Section, kind: str) -> Any:
    """The plugin constructed from its typed config; a value it refuses is a ConfigError."""
    try:
        plugin = section.plugin(section.cfg)
    except ConfigError:
        raise
    except ValueError as e:  # a plugin's constructor checks its config values
        raise ConfigError(str(e)) from None
    problems = contracts.check_instance(kind, plugin)
    if problems:
        raise registry.RegistryError(
            f"The {kind} plugin {section.name!r} does not satisfy its contract: " + "; ".join(problems)
        )
    return plugin


def _null_tracker() -> Tracker:
    from framework.null_tracker import NullTracker

    return NullTracker(None)


def _run_name(cfg: DictConfig, env_name: str) -> str:
    agent = cfg.agent
    label = agent.get("algo") or agent.get("name")
    return f"{env_name}-{str(label).lower()}-s{cfg.seed}"


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


def _setup_torch(device: str, threads: int, seed: int) -> str:
    """Seed and configure torch if a plugin brought it in; resolve `auto` to the GPU when present."""
    if "torch" not in sys.modules:
        return "cpu" if device == "auto" else device
    import torch

    torch.manual_seed(seed)
    if threads > 0:
        torch.set_num_threads(threads)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _last_checkpoint(ctx: RunContext, agent: Agent) -> Path | None:
    """Best effort: a fresh checkpoint at the current step, else the newest periodic one."""
    try:
        if ctx.progress.step > 0:
            return ctx.save_checkpoint(ctx.progress.step, agent)
    except Exception:  # the agent may be in the state that caused the failure
        log.exception("could not save a last checkpoint")
    return ctx.checkpointer.latest()


def _end_safely(tracker: Tracker, run_dir: Path, saved: Path | None, status: str, trace: str = "") -> None:
    """End the run KILLED or FAILED; a tracker that fails too must not hide the original error."""
    end_time = time.time()
    try:
        if trace:
            tracker.log_artifact(run_dir / "traceback.txt")
            tracker.set_tags({"framework.error": trace.strip().splitlines()[-1][:5000]})
        _log_artifacts(tracker, run_dir, saved)
    except Exception:
        log.exception("could not log the artifacts of a %s run", status)
    finally:
        try:
            tracker.end_run(status, end_time=end_time)
        except Exception:
            log.exception("could not mark the run %s", status)


def _log_artifacts(tracker: Tracker, run_dir: Path, checkpoint: Path | None) -> None:
    """The resolved config, the model (once: the checkpoint's agent files) and the checkpoint's state."""
    if checkpoint is not None:
        (run_dir / CONFIG_FILE).write_text((checkpoint / CONFIG_FILE).read_text())
        tracker.log_artifact(run_dir / CONFIG_FILE)
        tracker.log_artifact(checkpoint / AGENT_DIR, "model")
        tracker.log_artifact(checkpoint / STATE_FILE, "checkpoint")
    videos = run_dir / "videos"
    if videos.is_dir() and any(videos.iterdir()):
        tracker.log_artifact(videos, "videos")


def _resume_point(cfg: DictConfig, tracker: Tracker, overrides: Sequence[str], run_dir: Path) -> ResumePoint:
    """Find the checkpoint named by `resume=` (a run directory or a tracked run id)."""
    target = str(cfg.resume)
    run_id: str | None = None
    if Path(target).is_dir():
        checkpoint = find_latest(Path(target))
        if checkpoint is None:
            raise ConfigError(
                f"resume={target!r}: no checkpoint in that directory (a run directory holds "
                f"checkpoints/latest; give the run directory or one of its checkpoints/step_* folders)"
            )
    else:
        try:
            tags = tracker.run_tags(target)
        except LookupError as e:
            raise ConfigError(
                f"resume={target!r} is neither a run directory nor a tracked run: {e}"
            ) from None
        run_id = target
        local = tags.get("framework.run_dir")
        checkpoint = find_latest(Path(local)) if local else None
        if checkpoint is None:
            checkpoint = _download_checkpoint(tracker, run_id, run_dir / RESUMED_DIR)
    state = read_state(checkpoint)
    run_id = run_id or state.get("run_id")
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    merged = _apply_resume_overrides(saved, cfg, overrides)
    return ResumePoint(run_id, checkpoint, merged, int(state["step"]))


def _download_checkpoint(tracker: Tracker, run_id: str, dst: Path) -> Path:
    """A tracked run's last checkpoint, rebuilt from its artifacts: state, model and config."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    try:
        state = tracker.download_artifacts(run_id, f"checkpoint/{STATE_FILE}", dst)
        model = tracker.download_artifacts(run_id, "model", dst)
        cfg = tracker.download_artifacts(run_id, CONFIG_FILE, dst)
    except Exception as e:
        raise ConfigError(
            f"resume={run_id!r}: the run has no checkpoint to continue from in its artifacts ({e}) "
            "and its run directory is gone"
        ) from None
    model.rename(dst / AGENT_DIR)
    for path in (state, cfg):
        if path.parent != dst:
            path.rename(dst / path.name)
    return dst


def _apply_resume_overrides(saved: DictConfig, cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """The saved config, with this command line's explicit `key=value` overrides on top."""
    merged = saved.copy()
    OmegaConf.set_struct(merged, False)
    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith("hydra.") or key == "resume":
            continue
        if key in config.PLUGIN_SECTIONS:
            before = OmegaConf.select(saved, f"{key}.name")
            after = OmegaConf.select(cfg, f"{key}.name")
            if before != after and key != "tracking":
                raise ConfigError(
                    f"Cannot change {key} on resume: the run used {key}={before!r}, not {after!r}"
                )
            merged[key] = cfg[key]
            continue
        OmegaConf.update(merged, key, OmegaConf.select(cfg, key), force_add=True)
    merged.resume = cfg.resume
    merged.tracking = cfg.tracking
    return merged


@contextmanager
def _stop_on_sigint(stop: threading.Event) -> Iterator[None]:
    """First Ctrl-C asks the agent to stop at the next step; a second one interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nStopping after the current step (Ctrl-C again to abort now)...", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


__all__ = ["EXIT_KILLED", "RunFailed", "RunKilled", "__version__", "run"]
