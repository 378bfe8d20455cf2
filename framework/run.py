"""The run lifecycle: validate → seed → track → build → learn → evaluate → artifacts → end."""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from framework import __version__, config
from framework.checkpoint import AGENT_DIR, CONFIG_FILE, Checkpointer, find_latest, read_state
from framework.context import RunContext
from framework.progress import ProgressDisplay
from framework.provenance import flatten, run_tags

log = logging.getLogger("framework")

#: Process exit status of a run stopped with Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_KILLED = 130


@dataclass
class ResumePoint:
    run_id: str | None
    checkpoint: Path
    config: DictConfig
    step: int


class RunKilled(SystemExit):
    """Raised after a run was stopped by Ctrl-C and ended KILLED with a checkpoint."""


def run(
    cfg: DictConfig,
    *,
    run_dir: Path,
    overrides: Sequence[str] = (),
    parent_run_id: str | None = None,
    job_label: str | None = None,
) -> dict[str, float]:
    """Run one experiment end to end; returns the final evaluation metrics."""
    config.check_root(cfg)
    tracking = config.plugin_section(cfg, "tracking")
    # The tracker starts first: a tracker that works in the background gets going while the
    # plugins below are imported and validated; it writes nothing until start_run.
    tracker = tracking[1](tracking[2]) if tracking else _null_tracker()
    try:
        return _run(cfg, tracker, run_dir, overrides, parent_run_id, job_label)
    finally:
        tracker.close()


def _run(
    cfg: DictConfig,
    tracker: Any,
    run_dir: Path,
    overrides: Sequence[str],
    parent_run_id: str | None,
    job_label: str | None,
) -> dict[str, float]:
    # Every plugin section is validated before anything starts.
    _required(cfg, "env"), _required(cfg, "agent")
    resume = _resume_point(cfg, tracker, overrides) if cfg.resume else None
    if resume is not None:
        cfg = resume.config
    env_name, env_cls, env_cfg = _required(cfg, "env")
    agent_name, agent_cls, agent_cfg = _required(cfg, "agent")
    extras = {s: config.plugin_section(cfg, s) for s in ("buffer", "search")}
    resolved_yaml = OmegaConf.to_yaml(cfg, resolve=True)

    _seed_everything(int(cfg.seed))
    device = _setup_torch(str(cfg.device), int(cfg.threads), int(cfg.seed))
    run_dir.mkdir(parents=True, exist_ok=True)
    plugins = {"env": env_name, "agent": agent_name}
    plugins.update({s: v[0] for s, v in extras.items() if v is not None})
    tags = run_tags(plugins, run_dir, overrides)
    tracker.start_run(
        run_name=_run_name(cfg, env_name) + (f" {job_label}" if job_label else ""),
        tags=tags,
        parent_run_id=parent_run_id,
        resume_run_id=resume.run_id if resume else None,
    )
    if resume is None:
        tracker.log_params(flatten(OmegaConf.to_container(cfg, resolve=True)))
    else:
        tracker.set_tags({"framework.resumed_from_step": str(resume.step)})

    checkpointer = Checkpointer(
        run_dir / "checkpoints",
        every_steps=int(cfg.checkpoint.every_steps),
        keep=int(cfg.checkpoint.keep),
        config_yaml=resolved_yaml,
    )
    ctx: RunContext | None = None
    agent: Any = None
    try:
        env_plugin = env_cls(env_cfg)
        start_step = resume.step if resume else 0
        ctx = RunContext(
            cfg=cfg,
            env_plugin=env_plugin,
            agent_cfg=agent_cfg,
            seed=int(cfg.seed),
            rng=np.random.default_rng(int(cfg.seed)),
            device=device,
            total_steps=int(cfg.total_steps),
            tracker=tracker,
            checkpointer=checkpointer,
            progress=ProgressDisplay(
                int(cfg.total_steps),
                mode=str(cfg.progress),
                start=start_step,
                log_every_s=float(cfg.log_every_s),
            ),
            run_dir=run_dir,
            start_step=start_step,
            buffer=_build(extras["buffer"]),
            search=_build(extras["search"]),
            resume_from=resume.checkpoint if resume else None,
        )
        agent = agent_cls(agent_cfg)
        if resume is not None:
            agent.load(resume.checkpoint / AGENT_DIR)
        log.info("run started: env=%s agent=%s dir=%s", env_name, agent_name, run_dir)
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
        _log_artifacts(tracker, run_dir, last, model=True)
        tracker.end_run("FINISHED")
        log.info("run %s FINISHED at step %d: %s", ctx.run_id, step, _fmt(final))
        return final
    except KeyboardInterrupt:
        saved = _last_checkpoint(ctx, agent)
        _end_safely(tracker, run_dir, saved, "KILLED")
        where = f"step {ctx.progress.step}" if ctx else "start-up"
        run_id = _known_run_id(tracker)
        print(
            f"\nRun {run_id} KILLED at {where}; checkpoint: {saved}. "
            f"Continue with: python -m framework resume={run_id or run_dir}",
            file=sys.stderr,
        )
        raise RunKilled(EXIT_KILLED) from None
    except BaseException:
        trace = traceback.format_exc()
        (run_dir / "traceback.txt").write_text(trace)
        saved = _last_checkpoint(ctx, agent)
        _end_safely(tracker, run_dir, saved, "FAILED", trace)
        raise
    finally:
        if ctx is not None:
            ctx.close()


def _known_run_id(tracker: Any) -> str:
    try:
        return str(tracker.run_id)
    except Exception:  # the tracker never got as far as creating the run
        return ""


def _required(cfg: DictConfig, section: str) -> tuple[str, Any, Any]:
    found = config.plugin_section(cfg, section)
    assert found is not None  # check_root guarantees env and agent
    return found


def _build(section: tuple[str, Any, Any] | None) -> Any:
    return None if section is None else section[1](section[2])


def _null_tracker() -> Any:
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


def _last_checkpoint(ctx: RunContext | None, agent: Any) -> Path | None:
    """Best effort: a fresh checkpoint at the current step, else the newest periodic one."""
    if ctx is None or agent is None:
        return None
    try:
        if ctx.progress.step > 0:
            return ctx.save_checkpoint(ctx.progress.step, agent)
    except Exception:  # the agent may be in the state that caused the failure
        log.exception("could not save a last checkpoint")
    return ctx.checkpointer.latest()


def _end_safely(tracker: Any, run_dir: Path, saved: Path | None, status: str, trace: str = "") -> None:
    """End the run KILLED or FAILED; a tracker that fails too must not hide the original error."""
    try:
        if trace:
            tracker.log_artifact(run_dir / "traceback.txt")
            tracker.set_tags({"framework.error": trace.strip().splitlines()[-1][:5000]})
        _log_artifacts(tracker, run_dir, saved, model=False)
    except Exception:
        log.exception("could not log the artifacts of a %s run", status)
    finally:
        try:
            tracker.end_run(status)
        except Exception:
            log.exception("could not mark the run %s", status)


def _log_artifacts(tracker: Any, run_dir: Path, checkpoint: Path | None, *, model: bool) -> None:
    if checkpoint is not None:
        (run_dir / CONFIG_FILE).write_text((checkpoint / CONFIG_FILE).read_text())
        tracker.log_artifact(run_dir / CONFIG_FILE)
        tracker.log_artifact(checkpoint, "checkpoint")
        if model:
            tracker.log_artifact(checkpoint / AGENT_DIR, "model")
    videos = run_dir / "videos"
    if videos.is_dir() and any(videos.iterdir()):
        tracker.log_artifact(videos, "videos")


def _resume_point(cfg: DictConfig, tracker: Any, overrides: Sequence[str]) -> ResumePoint:
    """Find the checkpoint named by `resume=` (a run directory or a tracked run id)."""
    target = str(cfg.resume)
    run_id: str | None = None
    checkpoint: Path | None = find_latest(Path(target)) if Path(target).is_dir() else None
    if checkpoint is None and not Path(target).is_dir():
        run_id = target
        tags = tracker.run_tags(run_id)
        local = tags.get("framework.run_dir")
        checkpoint = find_latest(Path(local)) if local else None
        if checkpoint is None:
            dst = Path(tempfile.mkdtemp(prefix="framework-resume-"))
            checkpoint = find_latest(tracker.download_artifacts(run_id, "checkpoint", dst))
    if checkpoint is None:
        raise config.ConfigError(f"resume={target!r}: no checkpoint found there")
    state = read_state(checkpoint)
    run_id = run_id or state.get("run_id")
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    merged = _apply_resume_overrides(saved, cfg, overrides)
    return ResumePoint(run_id, checkpoint, merged, int(state["step"]))


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
                raise config.ConfigError(
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


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.2f}" for k, v in metrics.items() if k.endswith("mean"))


__all__ = ["EXIT_KILLED", "RunKilled", "__version__", "run"]
