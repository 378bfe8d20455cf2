"""The run lifecycle: validate → build → track → learn → evaluate → artifacts → end.

Whatever can be refused is refused before the tracked run exists; a run that starts ends FINISHED,
KILLED or FAILED with a last checkpoint, and its last lines say where its results are.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from framework import __version__, config, endings, registry, run_dirs, services, sweepers
from framework.building import (
    NO_TRACKING,
    build_plugin,
    null_tracker,
    run_threads,
    setup_torch,
    untracked,
)
from framework.checkpoint import Checkpointer, DiskError
from framework.context import RunContext
from framework.contracts import Agent, RunPart, RunWatchingEnvPlugin, Tracker
from framework.contracts.sweeper import PRUNED_STATUS
from framework.contracts.tracker import NAME_TAG
from framework.errors import ConfigError, ExplainedError, RunFailed
from framework.interrupts import (
    CTRL_C,
    EXIT_KILLED,
    STOP_ASKED,
    exit_at_the_next_signal,
    forget_caught_interrupt,
    sigterm_as_interrupt,
    stop_on_sigint,
)
from framework.plan import Plan, built, check_plan, run_name_of
from framework.progress import ProgressDisplay
from framework.provenance import flatten, resume_tags, run_tags
from framework.resume import own_tracking, resume_point
from framework.run_dirs import RunDirLock
from framework.summary import RunSummary, say

log = logging.getLogger("framework")

STOPPING_NOTICE = "\nStopping after the current step (Ctrl-C or SIGTERM again to abort now)..."


class RunKilled(SystemExit):
    """Raised after a run was stopped by Ctrl-C and ended KILLED with a checkpoint."""


class RunAborted(RunKilled):
    """Raised where a second Ctrl-C or SIGTERM cut a stopped run's ending short: the rest ends unwaited."""


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
    endings.log_file_errors_once()
    config.check_root(cfg)
    services.open_all(cfg)
    cfg = own_tracking(cfg, overrides)
    tracking = config.plugin_section(cfg, "tracking")
    # First, so that a background tracker gets going while the plugins are imported; it writes nothing yet.
    tracker: Tracker = build_plugin(tracking, "tracker") if tracking else null_tracker()
    stop = threading.Event()  # set by the first Ctrl-C, or by SIGTERM
    with sigterm_as_interrupt(stop):
        try:
            plan = _prepare(cfg, tracker, overrides, run_dir)
            if CTRL_C.is_set():  # a Ctrl-C taken before, whose interrupt something lost: it stops here
                raise KeyboardInterrupt
            if STOP_ASKED.is_set():  # its sweep began stopping as it started: nothing was tracked
                raise RunKilled(EXIT_KILLED)
            # A run directory is its run's alone, for as long as it runs; a resumed run's first one too.
            with plan.resume.hold_source() if plan.resume else contextlib.nullcontext(), RunDirLock(run_dir):
                return _execute(plan, tracker, run_dir, overrides, parent_run_id, run_name, started_at, stop)
        finally:
            aborted = isinstance(sys.exc_info()[1], RunAborted | KeyboardInterrupt)
            if stop.is_set():  # stopped, and ended: another signal while it closes ends the process
                exit_at_the_next_signal()
            try:
                if not aborted:
                    tracker.close()
            finally:
                services.close_all(at_once=aborted)


def _prepare(cfg: DictConfig, tracker: Tracker, overrides: Sequence[str], run_dir: Path) -> Plan:
    """Every check that can refuse the run, and its plugins built, before anything is tracked."""
    resume = None
    if not cfg.resume:
        run_dirs.check_fresh(run_dir)
    else:
        resume = resume_point(cfg, tracker, overrides, run_dir)
        cfg = resume.config
        config.check_root(cfg)
        services.open_all(cfg)  # the run's own settings (its Ray's), with this command's on top
    _seed_everything(int(cfg.seed))
    plan = built(cfg, lambda: setup_torch(str(cfg.device), int(cfg.threads), int(cfg.seed)), resume)
    check_plan(plan)
    return plan


def _execute(
    plan: Plan,
    tracker: Tracker,
    run_dir: Path,
    overrides: Sequence[str],
    parent_run_id: str | None,
    run_name: str | None,
    started_at: float,
    stop: threading.Event,
) -> dict[str, float]:
    cfg, resume = plan.cfg, plan.resume
    name = run_name_of(plan, tracker, overrides, run_name)
    ctx = _context(plan, tracker, run_dir, stop)
    if isinstance(plan.env, RunWatchingEnvPlugin):  # its envs show the run's steps and how it ended
        plan.env.watch_run(ctx.stop, start_step=0 if resume is None else resume.step)
    try:
        if resume is None:
            tags = run_tags(plan.plugins, run_dir, overrides)
        else:  # the run's own tags (its first directory, command line) stay; this resume's go beside
            tags = resume_tags(resume.number, run_dir, overrides, resume.step, int(cfg.total_steps))
        if ctx.trial is not None:  # a run killed outright still says which trial it was
            tags = {**tags, **ctx.trial.tags("RUNNING")}
        tracker.start_run(
            run_name=name,
            tags=tags,
            parent_run_id=parent_run_id,
            resume_run_id=resume.run_id if resume else None,
            start_time=started_at,
        )
        run_id = tracker.run_id  # a tracker that cannot create its run stops here, before training
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the tracked run was being made
        forget_caught_interrupt()
        started = endings.end_started_run(tracker, "KILLED", ctx.trial.tags("FAIL") if ctx.trial else {})
        ctx.close()
        say(f"Run KILLED as it started{f' ({started})' if started else ''}: nothing to continue from.")
        raise RunKilled(EXIT_KILLED) from None
    except BaseException as e:
        ctx.close()
        if not isinstance(e, Exception) or isinstance(e, ConfigError | ExplainedError):
            raise
        raise registry.failed("tracker", _tracking(cfg), "as it started the run", e) from e
    summary = RunSummary(
        run_name=name,
        run_id="" if untracked(tracker) else run_id,  # an id no store keeps: resume= would refuse it
        run_dir=run_dir,
        total_steps=int(cfg.total_steps),
        objective=str(cfg.objective.metric),
        view=tracker.how_to_view(run_id),
    )
    agent = plan.agent
    # From here on the run exists: whatever happens, it ends FINISHED, KILLED or FAILED.
    try:
        if resume is None:  # params cannot change once logged: the budget of a resumed part is a tag
            tracker.log_params(flatten(OmegaConf.to_container(cfg, resolve=True)))
        log.info(
            "run started: env=%s agent=%s dir=%s%s",
            plan.env_name,
            _agent_label(cfg),
            run_dir,
            f" (resumed at step {resume.step} from {resume.checkpoint})" if resume else "",
        )
        if resume is not None and resume.began_with not in (0, int(cfg.total_steps)):
            log.warning(
                "total_steps=%d, the run had %d until now: a schedule over the run's steps (a fraction "
                "of total_steps, SB3's lin_ rates) spans the new total from here on",
                int(cfg.total_steps), resume.began_with,
            )  # fmt: skip
        with stop_on_sigint(ctx.stop, STOPPING_NOTICE, on_stop=ctx.interrupt_parts):
            agent.learn(ctx)
        step = ctx.progress.step
        if ctx.trial is not None and ctx.trial.pruned_at is not None:
            return _end_pruned(ctx, agent, summary)
        if ctx.stop.is_set():
            raise KeyboardInterrupt
        if step == ctx.start_step < ctx.total_steps:  # not FINISHED: it never said it trained
            raise ExplainedError(
                f"agent={cfg.agent.name}: its learn returned at step {step} of {ctx.total_steps} without "
                "reporting a step; an agent calls ctx.after_step(steps) as it trains (framework.contracts)"
            )
        if ctx.progress.steps_per_s > 0:  # short runs end before their first periodic perf metric
            ctx.log_metrics({"perf/env_steps_per_s": ctx.progress.steps_per_s}, step)
        video_dir = run_dir / "videos" if cfg.eval.video else None
        final = ctx.evaluate(agent, step, video_dir=video_dir)
        last = ctx.save_checkpoint(step, agent)
        endings.log_artifacts(tracker, run_dir, last)
        if ctx.trial is not None:
            tracker.set_tags(ctx.trial.tags("COMPLETE"))
        try:
            tracker.end_run("FINISHED", end_time=time.time())
        except KeyboardInterrupt:  # as its tracker waited for a store: it has finished all the same
            forget_caught_interrupt()
            STOP_ASKED.set()  # and its sweep starts no other job
        ctx.close()
        say(summary.text("FINISHED", step, final))
        return final
    except KeyboardInterrupt:
        forget_caught_interrupt()  # the status is EXIT_KILLED, whatever code the interrupt landed in
        try:
            saved = endings.last_checkpoint(ctx, agent)
            # A trial stopped before its end is one its sweeper's study records as failed.
            tags = ctx.trial.tags("FAIL") if ctx.trial is not None else {}
            endings.end_safely(tracker, run_dir, saved, "KILLED", tags=tags)
            ctx.close()
            extra = endings.resume_rows(run_dir, saved, tracker, run_id, ctx.total_steps, _tracking(cfg))
            text = summary.text("KILLED", ctx.progress.step, ctx.last_eval, ctx.last_eval_step, extra=extra)
        except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: no more waiting
            forget_caught_interrupt()
            print(
                f"Aborted while the run was ending (a second Ctrl-C or SIGTERM); its last checkpoint: "
                f"{ctx.checkpointer.latest() or 'none'}",
                file=sys.stderr,
            )
            raise RunAborted(EXIT_KILLED) from None
        if stop.is_set():  # stopped and ended: another signal exits at once (130), not as an interrupt
            exit_at_the_next_signal()  # outside the run's handlers, taken for one before the run started
        say(text)
        raise RunKilled(EXIT_KILLED) from None
    except BaseException as e:
        trace = traceback.format_exc()
        wrote_trace = endings.write_quietly(run_dir / "traceback.txt", trace)
        saved = None if isinstance(e, DiskError) else endings.last_checkpoint(ctx, agent)
        saved = saved or ctx.checkpointer.latest()
        tags = ctx.trial.tags("FAIL") if ctx.trial is not None else {}
        endings.end_safely(tracker, run_dir, saved, "FAILED", trace, tags, wrote_trace)
        ctx.close()
        if not isinstance(e, Exception):
            raise
        # A mistake only the started run could see is said once, by the command line.
        error = None if isinstance(e, ConfigError | ExplainedError) else e
        extra = (
            endings.resume_rows(run_dir, saved, tracker, run_id, ctx.total_steps, _tracking(cfg))
            if saved is not None
            else []
        )
        text = summary.text(
            "FAILED", ctx.progress.step, ctx.last_eval, ctx.last_eval_step, error=error, extra=extra
        )
        raise RunFailed(text) from e
    finally:
        ctx.close()


def _context(plan: Plan, tracker: Tracker, run_dir: Path, stop: threading.Event) -> RunContext:
    cfg, resume = plan.cfg, plan.resume
    start_step = resume.step if resume else 0
    return RunContext(
        cfg=cfg,
        env_plugin=plan.env,
        seed=int(cfg.seed),
        rng=np.random.default_rng(int(cfg.seed)),
        device=plan.device,
        total_steps=int(cfg.total_steps),
        tracker=tracker,
        checkpointer=Checkpointer(
            run_dir / "checkpoints",
            every_steps=int(cfg.checkpoint.every_steps),
            keep=int(cfg.checkpoint.keep),
            config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
            earlier=resume.source / "checkpoints" if resume and resume.source else None,
        ),
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
        parts=_parts(plan, stop),
        stop=stop,
        resume_from=resume.checkpoint if resume else None,
        trial=sweepers.trial_of_this_job(str(cfg.objective.metric)),
    )


def _end_pruned(ctx: RunContext, agent: Agent, summary: RunSummary) -> dict[str, float]:
    """A trial its pruner stopped: its checkpoint, tags and last metrics; the trial told PRUNED."""
    assert ctx.trial is not None
    step = ctx.progress.step
    last = ctx.save_checkpoint(step, agent)
    endings.log_artifacts(ctx.tracker, ctx.run_dir, last)
    ctx.tracker.set_tags({**ctx.trial.tags("PRUNED"), NAME_TAG: f"{summary.run_name} (pruned)"})
    ctx.tracker.end_run(PRUNED_STATUS, end_time=time.time())
    ctx.trial.tell_pruned()
    ctx.close()
    say(summary.text("PRUNED", step, ctx.last_eval, ctx.last_eval_step))
    return ctx.last_eval


def _parts(plan: Plan, stop: threading.Event) -> dict[str, RunPart]:
    """What the run hands its agent of each added kind's plugin (`search`: its searches)."""
    kinds = registry.added_kinds()
    return {
        name: kinds[name].part(
            plugin,
            env_plugin=plan.env,
            agent_plugin=plan.agent,
            device=plan.device,
            threads=run_threads(int(plan.cfg.threads)),
            seed=int(plan.cfg.seed),
            stop=stop,
        )
        for name, plugin in plan.parts.items()
    }


def _tracking(cfg: DictConfig) -> str:
    """The name of the run's tracker (`tracking=NAME`)."""
    return str(OmegaConf.select(cfg, "tracking.name", default=NO_TRACKING))


def _agent_label(cfg: DictConfig) -> str:
    """The agent plugin, with its algorithm where it runs several: `sb3 (PPO)`."""
    algo = cfg.agent.get("algo")
    return f"{cfg.agent.name} ({algo})" if algo else str(cfg.agent.name)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


__all__ = ["EXIT_KILLED", "RunFailed", "RunKilled", "__version__", "run"]
