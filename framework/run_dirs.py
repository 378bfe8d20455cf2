"""A run directory is its run's alone: named by its start second, claimed atomically (`10-31-13`, `-1`, ...)
where Hydra gave runs started in one second the same one, and locked while its run lives. OmegaConf caches
the resolver's answer and Hydra copies it into each sweep job: a run or a sweep claims one directory, once."""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from framework.columns import refuse
from framework.errors import ConfigError

#: The resolver conf/config.yaml names the run and sweep directories with.
RESOLVER = "framework_new_dir"
#: The file a running run holds locked in its directory.
LOCK_FILE = ".run.lock"


def claim(base: str) -> str:
    """A new directory at `base`, or `base-1`, `base-2`, ... where taken (`mkdir` is atomic: none shared)."""
    path = Path(base)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for n in itertools.count():
            candidate = path if n == 0 else path.with_name(f"{path.name}-{n}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            _claimed.append(candidate)
            return str(candidate)
    except OSError as e:
        raise ConfigError(
            f"The run's directory {path} cannot be made in {Path.cwd()}: {e.strerror or e}. Run from a "
            "directory you can write to, or give the run one: hydra.run.dir=PATH (a sweep: "
            "hydra.sweep.dir=PATH)"
        ) from None
    raise AssertionError("unreachable")


#: The directories this process claimed, for a refused command to remove (`forget_claimed`).
_claimed: list[Path] = []
#: What Hydra writes into a run's or a sweep's directory before the run itself writes anything.
HYDRAS_OWN = (".hydra", "multirun.yaml")


def forget_if_unused(run_dir: Path) -> None:
    """Remove a refused run's (or sweep's) directory holding only Hydra's files, and emptied outputs/."""
    run_dir = run_dir.absolute()
    if not _only_hydras(run_dir):
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    folder = run_dir.parent
    if (folder / "multirun.yaml").is_file() and _only_hydras(folder):  # a sweep refused at its first job
        shutil.rmtree(folder, ignore_errors=True)
        folder = folder.parent
    for root in (Path.cwd() / "outputs", Path.cwd() / "multirun"):
        while folder.is_relative_to(root) and folder != root.parent:
            try:
                folder.rmdir()  # only an empty one
            except OSError:
                return
            folder = folder.parent


def _only_hydras(folder: Path) -> bool:
    try:
        return all(
            e.name in (*HYDRAS_OWN, LOCK_FILE) or (e.suffix == ".log" and e.stat().st_size == 0)
            for e in folder.iterdir()
        )
    except OSError:  # gone, or unreadable: not ours to remove
        return False


def forget_claimed() -> None:
    """Remove the directories this process claimed that its refused command left unused."""
    while _claimed:
        forget_if_unused(_claimed.pop())


def register_resolver() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, claim, use_cache=True)


def check_fresh(run_dir: Path) -> None:
    """Refuse a new run a directory holding an earlier run's checkpoints (this run would overwrite them)."""
    from framework.checkpoint import find_latest, read_state, where_it_went_on

    refuse_if_held(run_dir)  # a live run's: said as such, whether or not it checkpointed yet
    checkpoint = find_latest(run_dir)
    went_on = where_it_went_on(run_dir) if checkpoint is None else None
    if went_on is not None:  # its checkpoints went with it, as checkpoint.keep says; its files stay
        raise RunDirInUse(
            f"The run directory {run_dir.resolve()} is an earlier run's, which went on in {went_on}: "
            f"continue that run with resume={went_on}, or give this run a directory of its own (leave "
            f"{_dir_key()} unset, or set it to a new directory)"
        )
    if checkpoint is None:
        return
    try:
        state = read_state(checkpoint)
    except (OSError, ValueError):
        state = {}
    owner = f"run {state['run_id']}, " if state.get("run_id") else ""
    step = f"at step {state['step']}" if "step" in state else f"in {checkpoint.name}"
    where = run_dir.resolve()
    raise RunDirInUse(
        f"The run directory {where} holds the checkpoints of an earlier run ({owner}its latest {step}): "
        f"continue that run with resume={where}, or give this run a directory of its own (leave "
        f"{_dir_key()} unset, or set it to a new directory)"
    )


def _dir_key() -> str:
    """The key that gave this job its directory: a sweep's jobs are in `hydra.sweep.dir`."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    sweep = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    return "hydra.sweep.dir" if sweep else "hydra.run.dir"


class FreshRunDir(Callback):
    """Hydra callback: `check_fresh` before Hydra's `.hydra/` overwrites an earlier run's record of it."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        if config.get("resume"):
            return
        try:
            check_fresh(Path(str(config.hydra.run.dir)))
        except ConfigError as e:  # what a callback raises Hydra turns into a warning; an exit it lets through
            refuse(str(e))
            sys.exit(1)


class RunDirInUse(ConfigError):
    """Another live run holds the directory this run was given (`hydra.run.dir=` set by hand)."""


class RunDirLock:
    """An exclusive lock on a run directory for its run's life; the kernel drops it however the run ends.
    `in_use(dir, holder)` is the refusal where a live run holds it (`holder`: ' (process PID)')."""

    def __init__(self, run_dir: Path, in_use: Callable[[Path, str], ConfigError] | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / LOCK_FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(self._fd)
            os.close(self._fd)
            raise (in_use or _in_use)(run_dir, holder) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _in_use(run_dir: Path, holder: str) -> RunDirInUse:
    return RunDirInUse(
        f"The run directory {run_dir} is in use by another run{holder}: give each run its own "
        f"(leave {_dir_key()} unset, or set it to a directory of this run's own)"
    )


def refuse_if_held(run_dir: Path, in_use: Callable[[Path, str], ConfigError] | None = None) -> None:
    """RunDirInUse (or `in_use`'s refusal, as RunDirLock's) where a live run holds `run_dir`'s lock
    (nothing is taken or made)."""
    holder = _holder(run_dir)
    if holder is not None:
        raise (in_use or _in_use)(run_dir.resolve(), holder)


def held(run_dir: Path) -> bool:
    """Whether a live run holds `run_dir` (nothing is taken or made)."""
    return _holder(run_dir) is not None


def _holder(run_dir: Path) -> str | None:
    """None where no live run holds `run_dir`'s lock; else its holder, ' (process PID)' or ''."""
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file: no run ever held it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(fd)
    finally:
        os.close(fd)
    return None


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""
