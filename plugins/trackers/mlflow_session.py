"""The MLflow calls of a tracked run, made synchronously (inside the tracking process)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

#: MLflow's per-request limits on a log_batch call.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000


class MlflowSession:
    """One tracked run (or a sweep's parent) against one tracking URI."""

    def __init__(self, uri: str, experiment: str, flush_every_s: float) -> None:
        self.uri = uri
        self.experiment = experiment
        self.flush_every_s = flush_every_s
        self.run_id: str | None = None
        self._pending: list[Metric] = []
        self._last_flush = time.monotonic()
        self._client: MlflowClient | None = None
        if not _creates_store(uri):
            # Open the store while the trainer starts up; a real problem surfaces at start_run.
            with contextlib.suppress(Exception):
                self.client.search_experiments(max_results=1)

    @property
    def client(self) -> MlflowClient:
        """Created on first use, so that a new SQLite store is created only for a run."""
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def _experiment_id(self) -> str:
        try:
            exp = self.client.get_experiment_by_name(self.experiment)
        except MlflowException as e:
            raise ConnectionError(f"the tracking store does not answer: {e.message}") from None
        if exp is not None:
            return str(exp.experiment_id)
        try:
            return str(self.client.create_experiment(self.experiment))
        except MlflowException:  # another job of the sweep created it first
            exp = self.client.get_experiment_by_name(self.experiment)
            assert exp is not None
            return str(exp.experiment_id)

    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
    ) -> str:
        if resume_run_id is not None:
            self._get_run(resume_run_id)
            self.client.update_run(resume_run_id, status="RUNNING")
            self.run_id = resume_run_id
            self.set_tags(tags)
            return resume_run_id
        all_tags = dict(tags)
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self._experiment_id(), run_name=run_name, tags=all_tags)
        self.run_id = str(run.info.run_id)
        return self.run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        items = [Param(k, str(v)[:MAX_PARAM_VALUE]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self._active(), params=items[i : i + MAX_PARAMS_PER_BATCH])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        stamp = int(time.time() * 1000)
        self._pending.extend(Metric(k, float(v), stamp, int(step)) for k, v in metrics.items())
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), MAX_METRICS_PER_BATCH):
            self.client.log_batch(self._active(), metrics=pending[i : i + MAX_METRICS_PER_BATCH])
        self._last_flush = time.monotonic()

    def log_artifact(self, path: Path | str, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self._active(), str(path), artifact_path)
        else:
            self.client.log_artifact(self._active(), str(path), artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self._active(), tags=items[i : i + MAX_PARAMS_PER_BATCH])

    def end_run(self, status: str) -> None:
        if self.run_id is None:
            return
        try:
            self.flush()
        finally:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None

    def run_tags(self, run_id: str) -> dict[str, str]:
        return dict(self._get_run(run_id).data.tags)

    def download_artifacts(self, run_id: str, path: str, dst: Path | str) -> str:
        return str(self.client.download_artifacts(run_id, path, str(dst)))

    def start_parent(self, *, run_name: str, tags: Mapping[str, str]) -> str:
        run = self.client.create_run(self._experiment_id(), run_name=run_name, tags=dict(tags))
        return str(run.info.run_id)

    def end_parent(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status)

    def due(self) -> bool:
        return bool(self._pending) and time.monotonic() - self._last_flush >= self.flush_every_s

    def abandon(self, reason: str) -> None:
        """The training process is gone: end its run FAILED rather than leave it RUNNING."""
        if self.run_id is not None:
            self.set_tags({"framework.error": reason})
            self.end_run("FAILED")

    def _active(self) -> str:
        if self.run_id is None:
            raise RuntimeError("No MLflow run is active: call start_run first")
        return self.run_id

    def _get_run(self, run_id: str) -> Any:
        try:
            return self.client.get_run(run_id)
        except MlflowException as e:
            raise LookupError(f"No MLflow run {run_id!r} in {self.uri}: {e.message}") from None


def _creates_store(uri: str) -> bool:
    prefix = "sqlite:///"
    return uri.startswith(prefix) and not Path(uri[len(prefix) :]).exists()
