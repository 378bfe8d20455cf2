"""MLflow tracking: the local SQLite store ./mlflow.db by default, or any tracking URI."""

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .tracking_process import TrackingError, TrackingProcess


@dataclass
class MlflowConfig:
    uri: str = "sqlite:///mlflow.db"
    """Tracking URI: sqlite:///path.db, http://127.0.0.1:5000, databricks, ..."""
    experiment: str = "framework"
    """Experiment that runs (and sweeps) are grouped under."""
    run_name: Optional[str] = None
    """Run name; default `<env>-<algo>-s<seed>`."""
    flush_every_s: float = 1.0
    """Metrics are sent in batches at most this often (and at the end of the run)."""
    http_timeout_s: int = 30
    """Per-request timeout against a tracking server (MLFLOW_HTTP_REQUEST_TIMEOUT)."""
    http_retries: int = 2
    """Retries of a failed request to a tracking server (MLFLOW_HTTP_REQUEST_MAX_RETRIES)."""
    start_timeout_s: float = 300.0
    """Longest wait for the run to be created (a new SQLite store is migrated first)."""
    finish_timeout_s: float = 600.0
    """Longest wait at the end of a run for metrics and artifacts to be written."""


class MlflowTracker:
    """MLflow runs: params, metrics, artifacts, parent/child runs of sweeps."""

    Config = MlflowConfig

    def __init__(self, cfg: MlflowConfig) -> None:
        self.cfg = cfg
        self.uri = absolute_uri(cfg.uri)
        # MLflow's own defaults (7 retries, 120 s timeouts) stall a run for minutes on a dead server.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(cfg.http_timeout_s))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(cfg.http_retries))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        self._process = TrackingProcess(
            "framework_plugins.trackers.mlflow_session:MlflowSession",
            self.uri,
            cfg.experiment,
            cfg.flush_every_s,
        )
        self._start_ticket: int | None = None
        self._start_error: TrackingError | None = None
        self._run_id: str | None = None

    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
    ) -> None:
        self._run_id, self._start_error = None, None
        self._start_ticket = self._process.ask(
            "start_run",
            run_name=self.cfg.run_name or run_name,
            tags=dict(tags),
            parent_run_id=parent_run_id,
            resume_run_id=resume_run_id,
        )

    @property
    def run_id(self) -> str:
        """The run's id; the first access waits until the tracking process has created the run."""
        if self._run_id is None:
            if self._start_error is not None:
                raise self._start_error
            if self._start_ticket is None:
                raise TrackingError("No MLflow run was started")
            try:
                self._run_id = str(self._process.wait(self._start_ticket, timeout=self.cfg.start_timeout_s))
            except TrackingError as e:
                self._start_error = TrackingError(f"MLflow tracking URI {self.uri} cannot be used: {e}")
                raise self._start_error from None
        return self._run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._process.send("log_params", dict(params))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._process.send("log_metrics", {k: float(v) for k, v in metrics.items()}, int(step))

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self._process.send("log_artifact", Path(path).resolve(), artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._process.send("set_tags", {k: str(v) for k, v in tags.items()})

    def end_run(self, status: str) -> None:
        """Waits until every metric and artifact of the run is written, then ends it as `status`."""
        if self._start_ticket is None:
            return
        self._start_ticket = None
        self._process.call("end_run", status, timeout=self.cfg.finish_timeout_s)

    def run_tags(self, run_id: str) -> dict[str, str]:
        try:
            tags: dict[str, str] = self._process.call("run_tags", run_id, timeout=self.cfg.start_timeout_s)
        except TrackingError as e:
            raise LookupError(str(e)) from None
        return tags

    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path:
        return Path(
            self._process.call("download_artifacts", run_id, path, dst, timeout=self.cfg.finish_timeout_s)
        )

    def start_parent(self, *, run_name: str, tags: Mapping[str, str]) -> str:
        run_id: str = self._process.call(
            "start_parent", run_name=run_name, tags=dict(tags), timeout=self.cfg.start_timeout_s
        )
        return run_id

    def end_parent(self, run_id: str, status: str) -> None:
        self._process.call("end_parent", run_id, status, timeout=self.cfg.finish_timeout_s)

    def close(self) -> None:
        self._process.close()


def absolute_uri(uri: str) -> str:
    """Pin a relative SQLite path to the launch directory, so every job of a sweep shares it."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri
