"""A tracker that records nothing (`tracking=none`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from framework.contracts import SweepSummarySpec

from . import run_names


@dataclass
class NullTrackerConfig:
    """`tracking=none` takes no settings."""


class NullTracker:
    """Tracks nothing: metrics and artifacts stay in the run directory only."""

    Config: ClassVar[type] = NullTrackerConfig

    def __init__(self, cfg: Any) -> None:
        self.run_id = ""

    def name_run(self, cfg: Any, env_name: str, overrides: Sequence[str], *, resumes: str | None) -> str:
        """Named as a tracked run would be, for the run's last lines."""
        return run_names.name_run(self, cfg, env_name, overrides, resumes)

    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
        start_time: float | None = None,
    ) -> None:
        self.run_id = resume_run_id or uuid.uuid4().hex

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Params are not recorded (the resolved config is in the run directory)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Metrics are not recorded."""

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Artifacts stay where they are, in the run directory."""

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Tags are not recorded."""

    def end_run(self, status: str, *, end_time: float | None = None) -> None:
        """Nothing to close."""

    def run_tags(self, run_id: str) -> dict[str, str]:
        raise LookupError(
            "tracking=none keeps no runs; resume from a run directory (outputs/DATE/TIME) instead"
        )

    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path:
        raise LookupError(f"tracking=none keeps no artifacts for run {run_id!r}")

    def how_to_view(self, run_id: str) -> str:
        return "not tracked (tracking=none): the run directory holds the checkpoints and the config"

    def start_parent(
        self,
        *,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        start_time: float | None = None,
        resume_run_id: str | None = None,
    ) -> str:
        return resume_run_id or uuid.uuid4().hex

    def end_parent(
        self, run_id: str, status: str, *, summary: SweepSummarySpec, end_time: float | None = None
    ) -> str:
        """Nothing to summarise."""
        return ""

    def close(self) -> None:
        """Nothing to release."""


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import Tracker

    _nulltracker_contract: type[Tracker] = NullTracker
