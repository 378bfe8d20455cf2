"""Checkpoints on disk: one folder per step, the newest named in `latest`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"
CONFIG_FILE = "config.yaml"
AGENT_DIR = "agent"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or unreadable."""


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
        (tmp / AGENT_DIR).mkdir(parents=True)
        save_agent(tmp / AGENT_DIR)
        (tmp / STATE_FILE).write_text(json.dumps({**state, "step": step}, indent=2))
        (tmp / CONFIG_FILE).write_text(self.config_yaml)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)  # a crash mid-save never leaves a half-written checkpoint as `latest`
        (self.root / "latest").write_text(final.name)
        self.last_saved_step = step
        self._prune()
        return final

    def latest(self) -> Path | None:
        return find_latest(self.root)

    def _prune(self) -> None:
        done = sorted(p for p in self.root.glob("step_*") if p.is_dir())
        for old in done[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)


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
