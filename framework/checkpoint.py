"""Checkpoints on disk: one folder per step, the newest named in `latest`."""

from __future__ import annotations

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


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or unreadable."""


#: Errors of a disk that takes no more (full, quota, read-only, file size limit): one line, not a traceback.
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


#: Free bytes under which a disk counts as full (a write failed that torch reports without errno).
FULL_BELOW_BYTES = 1 << 20


class DiskError(ExplainedError):
    """A checkpoint the disk would not take; the earlier ones are intact."""


class Checkpointer:
    """Saves and restores checkpoints under `root`, keeping the newest `keep`."""

    def __init__(self, root: Path, *, every_steps: int, keep: int, config_yaml: str) -> None:
        self.root = root
        self.every_steps = every_steps
        self.keep = max(1, keep)
        self.config_yaml = config_yaml
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
        shutil.rmtree(tmp, ignore_errors=True)
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
            kept = f"the last one, {earlier}, is intact" if earlier else "there is no earlier one"
            raise DiskError(
                f"The checkpoint of step {step} could not be written to {self.root}: {failed} ({kept}); "
                "make room there, then resume"
            )
        self.last_saved_step = step
        self._prune()
        return final

    def latest(self) -> Path | None:
        return find_latest(self.root)

    def _prune(self) -> None:
        done = sorted(p for p in self.root.glob("step_*") if p.is_dir())
        for old in done[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)


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
