"""Where `resume=` continues from (a run dir's or tracked run's last checkpoint), and its config."""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from framework import config, registry
from framework.checkpoint import (
    AGENT_DIR,
    CONFIG_FILE,
    STATE_FILE,
    WENT_ON_FILE,
    find_latest,
    read_state,
    where_it_went_on,
)
from framework.contracts import Tracker
from framework.contracts.tracker import SUMMARY_SPEC_TAG
from framework.errors import ConfigError
from framework.provenance import resumes, run_dir_of
from framework.run_dirs import RunDirLock, refuse_if_held

log = logging.getLogger("framework")

#: Where a run resumed from a tracked run's artifacts keeps the checkpoint it downloaded.
RESUMED_DIR = "resumed_checkpoint"


@dataclass
class ResumePoint:
    run_id: str | None
    checkpoint: Path
    config: DictConfig
    step: int
    number: int = 1
    """Which resume of its tracked run this is (1: the first)."""
    source: Path | None = None
    """The run directory it goes on from (None: a checkpoint rebuilt from the tracked run's artifacts)."""
    changes: tuple[str, ...] = ()
    """This command's overrides that change its plugins' settings (`agent.hidden_sizes=[64,64]`)."""
    began_with: int = 0
    """The total_steps its checkpoint's run had (a schedule over the run's steps spans a new one)."""

    def hold_source(self) -> AbstractContextManager[object]:
        """Hold the directory the run goes on from while it runs (its lock): a run goes on in one
        process at a time, so the run still writing there, or another resume of it, refuses this one."""
        if self.source is None:
            return contextlib.nullcontext()
        try:
            return RunDirLock(self.source, _in_use)
        except PermissionError:  # a directory this user cannot write: no run of theirs goes on in it
            return contextlib.nullcontext()


def own_tracking(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """`resume=RUN_DIR` tracks where its run did (its checkpoint's `tracking` section: a server's URI, say),
    unless this command line sets `tracking`."""
    target = str(cfg.get("resume") or "")
    if not target or not Path(target).is_dir() or any(_sets_tracking(item) for item in overrides):
        return cfg
    checkpoint = find_latest(Path(target))
    if checkpoint is None or not (checkpoint / CONFIG_FILE).is_file():
        return cfg
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    if not isinstance(saved, DictConfig) or saved.get("tracking") is None:
        return cfg
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.tracking = saved.tracking
    return cfg


def _sets_tracking(item: str) -> bool:
    return item.split("=", 1)[0].lstrip("+~").split(".")[0] == "tracking"


def resume_point(cfg: DictConfig, tracker: Tracker, overrides: Sequence[str], run_dir: Path) -> ResumePoint:
    """Find the checkpoint named by `resume=` (a run directory or a tracked run id)."""
    target = str(cfg.resume)
    run_id: str | None = None
    if Path(target).is_dir():
        checkpoint = find_latest(Path(target))
        later = where_it_went_on(Path(target)) if checkpoint is None else None
        if later is not None:
            raise ConfigError(
                f"resume={target}: the run went on in {later}, which holds its checkpoints now (those "
                f"here were removed as it went on, as checkpoint.keep says): continue it with resume={later}"
            )
        if checkpoint is None:
            refuse_if_held(Path(target), _in_use)  # a live run that has not checkpointed yet
            jobs = sorted(str(d) for d in Path(target).iterdir() if d.is_dir() and find_latest(d))
            if jobs:  # a sweep's (Hydra's or a sweeper plugin's): its jobs are its runs
                raise ConfigError(
                    f"resume={target!r} is a sweep's directory: resume each of its runs, resume=JOB_DIR "
                    f"(or its run id): {', '.join(jobs[:5])}{', ...' if len(jobs) > 5 else ''}"
                )
            raise ConfigError(
                f"resume={target!r}: no checkpoint in that directory (a run directory holds "
                f"checkpoints/latest; give the run directory or one of its checkpoints/step_* folders)"
            )
    elif "/" in target or target.startswith("."):  # a path (a run id has neither)
        what = "is not a directory" if Path(target).exists() else "does not exist"
        raise ConfigError(
            f"resume={target}: {Path(target).absolute()} {what}; give a run directory (its `run dir` "
            "line) or a tracked run's id"
        )
    else:
        try:
            tags = tracker.run_tags(target)
        except LookupError as e:
            raise ConfigError(
                f"resume={target!r} is neither a run directory nor a tracked run: {e}"
            ) from None
        if SUMMARY_SPEC_TAG in tags:  # a sweep's parent: its jobs trained, each a run of its own
            raise ConfigError(
                f"resume={target} is a sweep's parent run, which holds no training of its own: resume "
                f"one of its runs, by its id or its run dir (its summary lists them: `python -m framework "
                f"ui --run {target}`)"
            )
        run_id, went_on_in = target, run_dir_of(tags)
        if went_on_in and Path(went_on_in).is_dir():
            refuse_if_held(Path(went_on_in), _in_use)
        checkpoint, why_not = local_checkpoint(run_id, went_on_in)
        if checkpoint is None:
            checkpoint = download_checkpoint(tracker, run_id, run_dir / RESUMED_DIR, why_not)
    source = None if checkpoint.is_relative_to(run_dir) else _dir_of(checkpoint)
    if source is not None:
        refuse_if_held(source, _in_use)  # before its checkpoint, which that run may be writing
    state = read_state(checkpoint)
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    config.migrate(saved)
    if run_id is None:
        run_id = _tracked_run_of(saved, cfg, overrides, state.get("run_id"), target)
        if run_id is not None:
            _refuse_if_the_run_went_on(tracker, run_id, checkpoint, int(state["step"]), target)
        # untracked too: its checkpoints folder says where it went on
        _refuse_if_it_went_on_elsewhere(checkpoint, int(state["step"]), target)
    merged = _apply_resume_overrides(saved, cfg, overrides)
    step, total = int(state["step"]), int(merged.total_steps)
    if step > total:
        raise ConfigError(
            f"resume={target}: the run is at step {step}, past total_steps={total}: give total_steps "
            f"above {step} to train it further"
        )
    if step == total:
        log.warning(
            "the run is at its total_steps=%d: it is evaluated and ends (raise total_steps to train)", total
        )
    try:
        number = resumes(tracker.run_tags(run_id)) + 1 if run_id is not None else 1
    except LookupError:
        number = 1
    changes = tuple(item for item in overrides if _changes_a_plugin(item, saved, merged))
    return ResumePoint(run_id, checkpoint, merged, step, number, source, changes, int(saved.total_steps))


def _changes_a_plugin(item: str, saved: DictConfig, merged: DictConfig) -> bool:
    key = item.split("=", 1)[0].lstrip("+~")
    if key.split(".")[0] not in config.plugin_sections() or key.split(".")[0] == "tracking":
        return False
    return bool(OmegaConf.select(saved, key) != OmegaConf.select(merged, key))


def _in_use(source: Path, holder: str) -> ConfigError:
    return ConfigError(
        f"The run this command resumes goes on from {source.resolve()}, which a live run holds{holder}: "
        "the run itself, or another resume of it. A run goes on in one process at a time: let that one "
        "end (or stop it), then resume"
    )


def _dir_of(checkpoint: Path) -> Path:
    """The run directory a checkpoint folder is in (`checkpoints/step_N`), else the folder itself."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint


def local_checkpoint(run_id: str, run_dir: str | None) -> tuple[Path | None, str]:
    """The tracked run's own last checkpoint in its directory (not another run's), else None and why not."""
    checkpoint = find_latest(Path(run_dir)) if run_dir else None
    if checkpoint is None:
        there = run_dir is not None and Path(run_dir).is_dir()
        return None, f"its run directory {run_dir} holds none" if there else "its run directory is gone"
    owner = read_state(checkpoint).get("run_id")
    if owner not in (None, run_id):
        log.warning("%s holds a checkpoint of run %s, not of run %s", run_dir, owner, run_id)
        return None, f"its run directory {run_dir} holds a checkpoint of another run ({owner})"
    return checkpoint, ""


def _refuse_if_the_run_went_on(
    tracker: Tracker, run_id: str, checkpoint: Path, step: int, target: str
) -> None:
    """A run directory's checkpoint is older than its tracked run's where a resume went on elsewhere:
    going on from it would leave the run's later part in its history, beside the new one."""
    try:
        tags = tracker.run_tags(run_id)
    except LookupError:
        return
    latest_dir = run_dir_of(tags)
    if not latest_dir or Path(latest_dir).resolve() == _dir_of(checkpoint).resolve():
        return
    later = find_latest(Path(latest_dir))
    if later is None and tags.get("framework.resumed_from_step") == str(step):
        return  # its last part went on from this very checkpoint, and stopped before it saved one
    if later is not None and (
        read_state(later).get("run_id") not in (None, run_id)
        or int(read_state(later).get("step", -1)) <= step
    ):
        return  # nothing of this run's later than this checkpoint there
    went_on = f"resume={latest_dir} (or resume={run_id})" if later is not None else f"resume={run_id}"
    raise ConfigError(
        f"resume={target}: run {run_id} went on in {latest_dir} after this checkpoint (step {step}), and "
        f"going on from here again would leave that part's metrics in its history beside these: continue "
        f"it from its latest with {went_on}"
    )


def _refuse_if_it_went_on_elsewhere(checkpoint: Path, step: int, target: str) -> None:
    """An untracked run's directory that a resume went on from, to a later checkpoint elsewhere: going
    on from here again would make a second, diverging run of that later part."""
    went, seen = _dir_of(checkpoint), set()
    while (went / "checkpoints" / WENT_ON_FILE).is_file() and went not in seen:
        seen.add(went)
        with contextlib.suppress(OSError):
            went = Path((went / "checkpoints" / WENT_ON_FILE).read_text().strip())
    later = find_latest(went) if seen else None
    if later is None or int(read_state(later).get("step", -1)) <= step:
        return
    raise ConfigError(
        f"resume={target}: the run went on in {went} after this checkpoint (step {step}), to step "
        f"{read_state(later)['step']}; going on from here again would run that part twice: continue it "
        f"from its latest with resume={went}"
    )


def _tracked_run_of(
    saved: DictConfig, cfg: DictConfig, overrides: Sequence[str], run_id: str | None, target: str
) -> str | None:
    """The tracked run a run dir continues: its own under the same tracker; None (tracked anew) where the
    command line changed the tracker; ConfigError where only the default did."""
    before = OmegaConf.select(saved, "tracking.name")
    now = OmegaConf.select(cfg, "tracking.name")
    if before == now:
        return run_id
    if any(_sets_tracking(item) for item in overrides):
        return None
    raise ConfigError(
        f"resume={target}: that run ran with tracking={before}, and this command would track it with "
        f"tracking={now}: add tracking={before} to continue it as it ran (or tracking={now} to track "
        "the rest of it as a new run)"
    )


def download_checkpoint(
    tracker: Tracker, run_id: str, dst: Path, why: str = "its run directory is gone"
) -> Path:
    """A tracked run's last checkpoint rebuilt from its artifacts; `why`: why not its dir's, to refuse."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    try:
        state = tracker.download_artifacts(run_id, f"checkpoint/{STATE_FILE}", dst)
        model = tracker.download_artifacts(run_id, "model", dst)
        cfg = tracker.download_artifacts(run_id, CONFIG_FILE, dst)
    except Exception as e:
        shutil.rmtree(dst, ignore_errors=True)  # the refused command's run directory is left unused
        raise ConfigError(
            f"resume={run_id!r}: the run has no checkpoint to continue from in its artifacts ({e}) and {why}"
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
        if key == "seed" and str(OmegaConf.select(cfg, key)) != str(saved.get("seed")):
            raise ConfigError(
                f"Cannot change seed on resume: the run is seed {saved.get('seed')}'s, and goes on as it "
                f"began (leave seed= out); seed={cfg.seed} is a new run"
            )
        if key in config.plugin_sections():
            before = OmegaConf.select(saved, f"{key}.name")
            after = OmegaConf.select(cfg, f"{key}.name")
            # The tracker, and a part an added kind hands the agent (its search), hold none of its state.
            if before != after and key != "tracking" and key not in registry.added_kinds():
                raise ConfigError(
                    f"Cannot change {key} on resume: the run used the {key} plugin {_label(saved, key)}, "
                    f"this command names {_label(cfg, key)}"
                )
            merged[key] = cfg[key]
            continue
        OmegaConf.update(merged, key, OmegaConf.select(cfg, key), force_add=True)
    merged.resume = cfg.resume
    merged.tracking = cfg.tracking
    return merged


def _label(cfg: DictConfig, section: str) -> str:
    """`'sb3' (PPO)`: a section's plugin, with the algorithm where the plugin runs several."""
    algo = OmegaConf.select(cfg, f"{section}.algo")
    return f"{OmegaConf.select(cfg, f'{section}.name')!r}" + (f" ({algo})" if algo else "")
