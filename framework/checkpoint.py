"""Checkpoints on disk: one folder per step, the newest named in `latest`."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framework.errors import ExplainedError

STATE_FILE = "state.json"
CONFIG_FILE = "config.yaml"
AGENT_DIR = "agent"
#: In a checkpoints folder a resumed run went on from: the run directory it went on in.
WENT_ON_FILE = "went_on_in"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or unreadable."""


#: Errors of a disk that takes no more (full, quota, read-only, file size limit): one line, not a traceback.
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


#: Free bytes under which a disk counts as full (a write failed that torch reports without errno).
FULL_BELOW_BYTES = 1 << 20


class DiskError(ExplainedError):
    """A checkpoint the disk would not take; the earlier ones are intact."""


class Checkpointer:
    """Saves and restores checkpoints under `root`, keeping the newest `keep` of the run's: those of
    `earlier` (the checkpoints of the run directory a resumed run goes on from) count, oldest first."""

    def __init__(
        self, root: Path, *, every_steps: int, keep: int, config_yaml: str, earlier: Path | None = None
    ) -> None:
        self.root = root
        self.every_steps = every_steps
        self.keep = max(1, keep)
        self.config_yaml = config_yaml
        self.earlier = earlier
        self.last_saved_step = -1

    def due(self, step: int, previous_step: int) -> bool:
        """True when `step` crossed a multiple of `every_steps` since `previous_step`."""
        return self.every_steps > 0 and step // self.every_steps > previous_step // self.every_steps

    def save(self, step: int, save_agent: Callable[[Path], None], state: dict[str, Any]) -> Path:
        """Write a checkpoint for `step`: the agent's files, the run state and the resolved config."""
        if step == self.last_saved_step and self.latest() is not None:
            return self.latest()  # type: ignore[return-value]
        final = self.root / f"step_{step:010d}"
        tmp = self.root / f".tmp_step_{step:010d}"
        # Any half-written one: this run's own, or the one a run killed mid-save left (this run holds
        # the directory now, and a resumed run the one it goes on from).
        for folder in (self.root, *([self.earlier] if self.earlier else [])):
            for left in folder.glob(".tmp_step_*"):
                shutil.rmtree(left, ignore_errors=True)
        self._prune(self.keep - 1)  # room for this one first (on a disk near full), the newest kept
        try:
            (tmp / AGENT_DIR).mkdir(parents=True)
            save_agent(tmp / AGENT_DIR)
            (tmp / STATE_FILE).write_text(json.dumps({**state, "step": step}, indent=2))
            (tmp / CONFIG_FILE).write_text(self.config_yaml)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)  # a crash mid-save never leaves a half-written checkpoint as `latest`
            _write_atomically(self.root / "latest", final.name)
        except Exception as e:
            disk = _disk_error(e, self.root)  # before the space the attempt took is given back
            shutil.rmtree(tmp, ignore_errors=True)
            if disk is None:
                raise
            failed = disk.strerror
        else:
            failed = None
        if failed is not None:
            # Outside the `except`: its exception holds torch's open file (and its space) till the block ends.
            gc.collect()
            earlier = self.latest()
            then = "make room there, then resume" if earlier else "make room there, then run it again"
            kept = f"the last one, {earlier}, is intact" if earlier else "it has no earlier one to resume"
            raise DiskError(
                f"The checkpoint of step {step} could not be written to {self.root}: {failed} ({kept}); "
                + then
            )
        self.last_saved_step = step
        self._prune(self.keep)
        return final

    def latest(self) -> Path | None:
        return find_latest(self.root)

    def _prune(self, keep: int) -> None:
        """Remove the run's oldest checkpoints beyond `keep` (at least the newest stays)."""
        earlier = self._done(self.earlier) if self.earlier is not None else []
        done = earlier + self._done(self.root)  # a resumed part's steps follow those it went on from
        for old in done[: -max(1, keep)]:
            shutil.rmtree(old, ignore_errors=True)
        if self.earlier is not None:  # where `resume=` of that directory is sent instead
            with contextlib.suppress(OSError):
                (self.earlier / WENT_ON_FILE).write_text(str(self.root.parent))

    @staticmethod
    def _done(root: Path) -> list[Path]:
        return sorted(p for p in root.glob("step_*") if p.is_dir())


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _disk_error(e: BaseException, where: Path) -> OSError | None:
    """The full-disk OSError behind `e` (torch.save's errno-less RuntimeError too, when the disk is full)."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    if isinstance(e, RuntimeError | OSError):
        try:
            full = shutil.disk_usage(where).free < FULL_BELOW_BYTES
        except OSError:
            full = False
        if full:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return None


def where_it_went_on(root: Path) -> Path | None:
    """Where the run of the run directory `root` went on, its checkpoints there removed as it did
    (the newest such directory); None where it holds its own."""
    seen: set[Path] = set()
    while find_latest(root) is None and root not in seen:
        seen.add(root)
        try:
            root = Path((root / "checkpoints" / WENT_ON_FILE).read_text().strip())
        except OSError:
            break
    return root if seen and find_latest(root) is not None else None


def find_latest(root: Path) -> Path | None:
    """The newest complete checkpoint under `root`: a run dir, its checkpoints dir, or a checkpoint."""
    if (root / STATE_FILE).is_file():
        return root
    for base in (root, root / "checkpoints"):
        pointer = base / "latest"
        if pointer.is_file():
            path = base / pointer.read_text().strip()
            if (path / STATE_FILE).is_file():
                return path
    return None


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"Cannot read checkpoint state in {checkpoint}: {e}") from e
    return state
