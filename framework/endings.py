"""How a run ends: last checkpoint, tracker artifacts and status, how-to-go-on rows, full-disk-safe writes."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from framework.building import untracked
from framework.checkpoint import AGENT_DIR, CONFIG_FILE, STATE_FILE, DiskError, find_latest
from framework.context import RunContext
from framework.contracts import Agent, StoreTracker, Tracker

log = logging.getLogger("framework")


def log_file_errors_once() -> None:
    """A log file the disk stops taking is said once and given up, not a traceback per line after it."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and not getattr(handler, "_framework_once", False):

            def give_up(record: logging.LogRecord, handler: logging.FileHandler = handler) -> None:
                handler.setLevel(logging.CRITICAL + 1)  # not removed: logging would skip the next handler
                error = sys.exc_info()[1]
                print(
                    f"Warning: the log file {handler.baseFilename} takes no more lines: {error}",
                    file=sys.stderr,
                )

            handler.handleError = give_up  # type: ignore[method-assign]
            handler._framework_once = True  # type: ignore[attr-defined]


def resume_rows(
    run_dir: Path,
    saved: Path | None,
    tracker: Tracker,
    run_id: str,
    total_steps: int = 0,
    tracking: str = "",
) -> list[tuple[str, str]]:
    """The summary's last rows: the checkpoint and the command continuing from it, or that there is none;
    `tracking`: the run's tracker's name."""
    if saved is None:
        return [("checkpoint", "none: the run stopped before its first one, and starts over when run again")]
    home = saved.parent.parent if saved.parent.name == "checkpoints" else saved
    # Its run directory, or the checkpoint itself where that directory's latest is another (a resumed
    # run stopped before it saved goes on from where it was resumed, with this command's budget).
    budget = f" total_steps={total_steps}" if total_steps and not saved.is_relative_to(run_dir) else ""
    again = f"python -m framework resume={(home if find_latest(home) == saved else saved).resolve()}{budget}"
    if untracked(tracker):  # resume= tracks with MLflow unless told otherwise
        again += " tracking=none"
    else:  # a tracked run also continues by its id, from any directory
        # A store tracker says how a command reaches its store; of any other, `resume=<id>` needs its name.
        store = tracker.store_overrides() if isinstance(tracker, StoreTracker) else f"tracking={tracking}"
        again += f"\nor python -m framework resume={run_id}{budget}{f' {store}' if store else ''}"
    return [("checkpoint", str(saved)), ("continue with", again)]


def write_quietly(path: Path, text: str) -> bool:
    """Write `text` to `path`; False, and no half-written file, where the disk would not take it."""
    try:
        path.write_text(text)
        return True
    except OSError as e:
        log.warning("could not write %s: %s", path, e.strerror or e)
        path.unlink(missing_ok=True)
        return False


def last_checkpoint(ctx: RunContext, agent: Agent) -> Path | None:
    """Best effort: a fresh checkpoint at the current step, else the newest periodic one; a resumed run
    that took no step (its agent maybe not loaded yet) has only the checkpoint it went on from."""
    try:
        if ctx.progress.step > ctx.start_step:
            return ctx.save_checkpoint(ctx.progress.step, agent)
    except DiskError as e:
        log.warning("%s", e)
    except Exception:  # the agent may be in the state that caused the failure
        log.exception("could not save a last checkpoint")
    return ctx.checkpointer.latest() or ctx.resume_from


def end_safely(
    tracker: Tracker,
    run_dir: Path,
    saved: Path | None,
    status: str,
    trace: str = "",
    tags: dict[str, str] | None = None,
    wrote_trace: bool = True,
) -> None:
    """End the run KILLED or FAILED (`tags`: an Optuna trial's, say); a failing tracker hides no error."""
    end_time = time.time()
    tags = dict(tags or {})
    try:
        if trace:
            if wrote_trace:
                tracker.log_artifact(run_dir / "traceback.txt")
            tags["framework.error"] = trace.strip().splitlines()[-1][:5000]
        if tags:
            tracker.set_tags(tags)
        log_artifacts(tracker, run_dir, saved)
    except OSError as e:  # a full disk, say: said in one line
        log.warning("could not log the artifacts of a %s run: %s", status, e)
    except Exception:
        log.exception("could not log the artifacts of a %s run", status)
    finally:
        try:
            tracker.end_run(status, end_time=end_time)
        except Exception:
            log.exception("could not mark the run %s", status)


def log_artifacts(tracker: Tracker, run_dir: Path, checkpoint: Path | None) -> None:
    """The resolved config, the model (once: the checkpoint's agent files) and the checkpoint's state."""
    if checkpoint is not None:
        if write_quietly(run_dir / CONFIG_FILE, (checkpoint / CONFIG_FILE).read_text()):
            tracker.log_artifact(run_dir / CONFIG_FILE)
        else:
            tracker.log_artifact(checkpoint / CONFIG_FILE)
        tracker.log_artifact(checkpoint / AGENT_DIR, "model")
        tracker.log_artifact(checkpoint / STATE_FILE, "checkpoint")
    videos = run_dir / "videos"
    if videos.is_dir() and any(videos.iterdir()):
        tracker.log_artifact(videos, "videos")


def end_started_run(tracker: Tracker, status: str, tags: Mapping[str, str]) -> str | None:
    """End with `status` (and `tags`) the run a tracker began before a stop (Ctrl-C as a trial starts);
    its id, or None."""
    try:
        run_id = tracker.run_id
        if tags:
            tracker.set_tags(dict(tags))
        tracker.end_run(status, end_time=time.time())
    except Exception as e:  # it made no run: nothing to end
        log.debug("no run to end %s: %s", status, e)
        return None
    return str(run_id)
