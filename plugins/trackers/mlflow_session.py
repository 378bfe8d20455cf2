"""The MLflow calls of a tracked run, made synchronously (inside the tracking process)."""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from . import store_template, sweep_summary

#: MLflow's per-request limits on a log_batch call.
SQLITE_PREFIX = "sqlite:///"
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000
#: Marks an experiment as model training, so the MLflow UI opens on its runs (not GenAI traces).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: Children of one sweep read back for its summary.
MAX_CHILDREN = 10_000
#: The parent's tag with what its summary needs (framework.sweep.SUMMARY_SPEC_TAG: the same name), so that
#: the tracking process can summarise the sweep when the process that ran it is gone.
SUMMARY_SPEC_TAG = "framework.summary_spec"
#: The tag on a run that another than its own tracker ended, saying who.
ENDED_BY_TAG = "framework.ended_by"
#: The status a sweep's child still RUNNING when the sweep ends gets, by the sweep's status.
ORPHAN_STATUS = {"KILLED": "KILLED", "FAILED": "FAILED", "FINISHED": "FAILED"}
#: How long the parent of a sweep whose launching process is gone waits for its RUNNING children's own
#: trackers (which see their job end at about the same time) to end them, before it ends them itself.
ORPHAN_GRACE_S = 10.0
PARENT_ABANDONED = "tracking process: the sweep's process ended without ending the sweep"


def quiet_libraries() -> None:
    """MLflow's and its database's INFO lines and known-harmless warnings stay out of the run's output."""
    for name in ("mlflow", "alembic", "sqlalchemy", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # SQLAlchemy's deprecation notes about MLflow's own queries are MLflow's to fix, not the user's.
    warnings.filterwarnings("ignore", message=r".*SADeprecationWarning.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    with contextlib.suppress(ImportError):
        from sqlalchemy.exc import SADeprecationWarning

        warnings.filterwarnings("ignore", category=SADeprecationWarning)


class MlflowSession:
    """One tracked run (or a sweep's parent) against one tracking URI."""

    def __init__(
        self, uri: str, experiment: str, flush_every_s: float, orphan_grace_s: float = ORPHAN_GRACE_S
    ) -> None:
        quiet_libraries()
        self.uri = uri
        self.experiment = experiment
        self.flush_every_s = flush_every_s
        self.orphan_grace_s = orphan_grace_s
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self._parents: dict[str, Mapping[str, Any] | None] = {}
        """The sweep parents started here and not yet ended, with what their summary needs (if known)."""
        self._pending: list[Metric] = []
        self._last_flush = time.monotonic()
        self._client: MlflowClient | None = None
        if not _creates_store(uri):
            # Open the store while the trainer starts up; a real problem surfaces at start_run.
            with contextlib.suppress(Exception):
                self.client.search_experiments(max_results=1)

    @property
    def client(self) -> MlflowClient:
        """Created on first use, so that a new SQLite store is created only for a run. A SQLite store
        is created and first opened by one process at a time (two building one schema fail)."""
        if self._client is None:
            if not self.uri.startswith(SQLITE_PREFIX):
                self._client = MlflowClient(tracking_uri=self.uri)
                return self._client
            path = Path(self.uri[len(SQLITE_PREFIX) :])
            with store_template.first_opening(path):
                if not path.exists():  # a new store: a copy of an empty one, not MLflow's migrations
                    store_template.place(path)
                client = MlflowClient(tracking_uri=self.uri)
                client.search_experiments(max_results=1)  # MLflow completes the schema here, if it must
                self._client = client
        return self._client

    def _experiment_id(self) -> str:
        if self.experiment_id is None:
            self.experiment_id = self._find_or_create_experiment()
        return self.experiment_id

    def _find_or_create_experiment(self) -> str:
        try:
            exp = self.client.get_experiment_by_name(self.experiment)
        except MlflowException as e:
            raise ConnectionError(f"the tracking store does not answer: {e.message}") from None
        if exp is None:
            try:
                return str(
                    self.client.create_experiment(
                        self.experiment, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
                    )
                )
            except MlflowException:  # another job of the sweep created it first
                exp = self.client.get_experiment_by_name(self.experiment)
                assert exp is not None
        if EXPERIMENT_KIND_TAG not in exp.tags:  # made before the tag, or by hand: the UI guesses otherwise
            self.client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return str(exp.experiment_id)

    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
        start_time: float | None = None,
    ) -> dict[str, str]:
        """Create (or reopen, to resume) the run; returns its run and experiment ids."""
        if resume_run_id is not None:
            run = self._get_run(resume_run_id)
            self.experiment_id = str(run.info.experiment_id)
            self.client.update_run(resume_run_id, status="RUNNING")
            self.run_id = resume_run_id
            self.set_tags(tags)
        else:
            all_tags = dict(tags)
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            run = self.client.create_run(
                self._experiment_id(), run_name=run_name, tags=all_tags, start_time=_ms(start_time)
            )
            self.run_id = str(run.info.run_id)
        return {"run_id": str(self.run_id), "experiment_id": self._experiment_id()}

    def log_params(self, params: Mapping[str, Any], run_id: str | None = None) -> None:
        items = [Param(k, str(v)[:MAX_PARAM_VALUE]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id or self._active(), params=items[i : i + MAX_PARAMS_PER_BATCH])

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

    def end_run(self, status: str, end_time: float | None = None) -> None:
        if self.run_id is None:
            return
        try:
            self.flush()
        finally:
            self.client.set_terminated(self.run_id, status, end_time=_ms(end_time))
            self.run_id = None

    def run_tags(self, run_id: str) -> dict[str, str]:
        if _creates_store(self.uri):  # looking would create the store
            raise LookupError(
                f"no MLflow run {run_id!r}: the store {self.uri} does not exist (no run tracked there yet)"
            )
        return dict(self._get_run(run_id).data.tags)

    def download_artifacts(self, run_id: str, path: str, dst: Path | str) -> str:
        return str(self.client.download_artifacts(run_id, path, str(dst)))

    def start_parent(
        self,
        *,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        start_time: float | None = None,
        resume_run_id: str | None = None,
    ) -> str:
        """A new parent run; or `resume_run_id` reopened (its params kept: MLflow's cannot change),
        when it still exists in this experiment."""
        if resume_run_id is not None and self._reopen(resume_run_id, tags):
            self._parents[resume_run_id] = _summary_spec(tags.get(SUMMARY_SPEC_TAG))
            return resume_run_id
        run = self.client.create_run(
            self._experiment_id(), run_name=run_name, tags=dict(tags), start_time=_ms(start_time)
        )
        run_id = str(run.info.run_id)
        self._parents[run_id] = _summary_spec(tags.get(SUMMARY_SPEC_TAG))
        if params:
            self.log_params(params, run_id)
        return run_id

    def _reopen(self, run_id: str, tags: Mapping[str, str]) -> bool:
        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            return False
        if run.info.lifecycle_stage != "active" or str(run.info.experiment_id) != self._experiment_id():
            return False
        self.client.update_run(run_id, status="RUNNING")
        self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])
        return True

    def end_parent(
        self, run_id: str, status: str, summary: Mapping[str, Any] | None, end_time: float | None = None
    ) -> dict[str, Any]:
        """End the children still RUNNING, summarise the sweep on its parent run (table, plots, best
        child), then end the parent.

        A child is still RUNNING when its job was killed with its tracker (the joblib and Ray launchers
        kill a job's whole process tree on Ctrl-C): it ends as the sweep did (a FAILED one if the sweep
        FINISHED), tagged ENDED_BY_TAG. A sweep none of whose jobs started (its first was refused, say)
        leaves no parent behind. Returns the counts and the best child, for the command line to say.
        """
        self._parents.pop(run_id, None)
        try:
            self._end_orphans(run_id, ORPHAN_STATUS.get(status, "FAILED"), end_time)
            found = (
                self._summarise(
                    run_id,
                    list(summary["swept_keys"]),
                    str(summary["objective"]),
                    str(summary["mode"]),
                    [str(m) for m in summary.get("also") or ()],
                    summary.get("study_dir"),
                )
                if summary is not None
                else {"runs": len(self._children(run_id))}
            )
        finally:
            self.client.set_terminated(run_id, status, end_time=_ms(end_time))
        if not found["runs"]:
            self.client.delete_run(run_id)
        return found

    def _children(self, parent_id: str, *, running: bool = False) -> list[Any]:
        where = f"tags.mlflow.parentRunId = '{parent_id}'"
        return list(
            self.client.search_runs(
                [self._experiment_id()],
                filter_string=f"{where} and attributes.status = 'RUNNING'" if running else where,
                max_results=MAX_CHILDREN,
                order_by=["attributes.start_time ASC"],
            )
        )

    def _end_orphans(self, parent_id: str, status: str, end_time: float | None) -> None:
        """End, as `status`, the children of the sweep that are still RUNNING."""
        for run in self._children(parent_id, running=True):
            child = str(run.info.run_id)
            self.client.set_tag(child, ENDED_BY_TAG, "sweep parent")
            self.client.set_terminated(child, status, end_time=_ms(end_time))

    def _summarise(
        self,
        parent_id: str,
        swept_keys: list[str],
        objective: str,
        mode: str,
        also: list[str],
        study_dir: str | None = None,
    ) -> dict[str, Any]:
        runs = self._children(parent_id)
        children = [sweep_summary.child_from_run(r, swept_keys, objective, also) for r in runs]
        if not children:
            return {"runs": 0}
        top = sweep_summary.best(children, mode)
        study = self._log_study(parent_id, Path(study_dir)) if study_dir else None
        links = {
            c.run_id: f"#/experiments/{self._experiment_id()}/runs/{c.run_id}?workflowType=machine_learning"
            for c in children
        }
        with tempfile.TemporaryDirectory(prefix="framework-sweep-") as tmp:
            folder = Path(tmp)
            title = str(self.client.get_run(parent_id).info.run_name or "")
            files = sweep_summary.write_table(
                # The page is served from the server's get-artifact address: links from its root.
                children,
                swept_keys,
                objective,
                folder,
                also,
                mode=mode,
                title=title,
                links={run_id: f"/{link}" for run_id, link in links.items()},
            )
            # A study's trials sit anywhere in a continuous space: Optuna's own plots show them.
            plot = None if study else sweep_summary.plot_objective(children, swept_keys, objective, folder)
            heatmaps = (
                [] if study else sweep_summary.plot_heatmaps(children, swept_keys, objective, folder, also)
            )
            for path in [*files, *([plot] if plot else []), *heatmaps]:
                self.client.log_artifact(parent_id, str(path))
        said = sweep_summary.note(children, top, objective, mode, links, [p.name for p in heatmaps], study)
        tags = {"mlflow.note.content": said}
        if study and "best_params" in study:
            tags.update({f"best.{k}": str(v) for k, v in study["best_params"].items()})
            tags["framework.study_name"] = str(study["study_name"])
        metrics = [Metric("sweep/children", float(len(children)), int(time.time() * 1000), 0)]
        if top is not None and top.objective is not None:
            tags.update({"framework.best_child_run_id": top.run_id, "framework.best_child": top.name})
            metrics.append(Metric(f"best/{objective}", top.objective, int(time.time() * 1000), 0))
        self.client.log_batch(parent_id, metrics=metrics, tags=[RunTag(k, v) for k, v in tags.items()])
        statuses: dict[str, int] = {}
        for c in children:
            statuses[c.outcome] = statuses.get(c.outcome, 0) + 1
        best = {"best": top.name, "best_value": top.objective} if top is not None else {}
        return {"runs": len(children), "statuses": statuses, **best, "experiment_id": self._experiment_id()}

    def _log_study(self, parent_id: str, folder: Path) -> dict[str, Any] | None:
        """The sweeper's results (study.json, plots) on the parent, under the folder's name."""
        if not folder.is_dir():
            return None
        self.client.log_artifacts(parent_id, str(folder), folder.name)
        try:
            found = json.loads((folder / "study.json").read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def due(self) -> bool:
        return bool(self._pending) and time.monotonic() - self._last_flush >= self.flush_every_s

    def abandon(self, reason: str) -> None:
        """The training process is gone: end its run FAILED rather than leave it RUNNING; and a sweep's
        parent KILLED, with its summary (the sweep's launching process was killed: SIGTERM, say)."""
        try:
            if self.run_id is not None:
                self.set_tags({"framework.error": reason})
                self.end_run("FAILED")
        finally:
            for parent_id, spec in list(self._parents.items()):
                self._wait_for_children(parent_id)
                self.client.set_tag(parent_id, ENDED_BY_TAG, PARENT_ABANDONED)
                self.end_parent(parent_id, "KILLED", spec, end_time=time.time())

    def _wait_for_children(self, parent_id: str) -> None:
        """Until the children's own trackers have ended them (their jobs went with the sweep's
        process), or the grace is over."""
        deadline = time.monotonic() + self.orphan_grace_s
        while time.monotonic() < deadline and self._children(parent_id, running=True):
            time.sleep(min(0.5, self.orphan_grace_s))

    def _active(self) -> str:
        if self.run_id is None:
            raise RuntimeError("No MLflow run is active: call start_run first")
        return self.run_id

    def _get_run(self, run_id: str) -> Any:
        try:
            return self.client.get_run(run_id)
        except MlflowException:
            raise LookupError(f"no MLflow run {run_id!r} in {self.uri}.{self._recent_runs(run_id)}") from None
        except Exception as e:
            raise LookupError(f"the tracking store {self.uri} cannot be read: {e}") from None

    def _recent_runs(self, wanted: str) -> str:
        """' Closest: …; newest runs: …' from this experiment, to help find the id that was meant."""
        try:
            exp = self.client.get_experiment_by_name(self.experiment)
            runs = self.client.search_runs([exp.experiment_id], max_results=200) if exp else []
        except Exception:
            return ""
        if not runs:
            return f" The experiment {self.experiment!r} there holds no runs."
        ids = {r.info.run_id: r for r in runs}
        prefixed = [i for i in ids if wanted and i.startswith(wanted)]
        close = prefixed[:1] if len(prefixed) == 1 else difflib.get_close_matches(wanted, list(ids), n=1)
        describe = lambda r: f"{r.info.run_id} ({r.info.run_name}, {r.info.status})"  # noqa: E731
        hint = f" Did you mean {describe(ids[close[0]])}?" if close else ""
        newest = "; ".join(describe(r) for r in runs[:3])
        return f"{hint} Newest runs of experiment {self.experiment!r}: {newest}."


def _summary_spec(tag: str | None) -> Mapping[str, Any] | None:
    """What a parent's summary needs, from its SUMMARY_SPEC_TAG; None without it (or if unreadable)."""
    if not tag:
        return None
    try:
        spec = json.loads(tag)
    except ValueError:
        return None
    return spec if isinstance(spec, dict) and {"swept_keys", "objective", "mode"} <= set(spec) else None


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _creates_store(uri: str) -> bool:
    return uri.startswith(SQLITE_PREFIX) and not Path(uri[len(SQLITE_PREFIX) :]).exists()
