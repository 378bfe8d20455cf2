"""The MLflow calls of a tracked run, made inside the tracking process.

A run's writes go to its journal first (journal.py) and from there to MLflow, in order, from a
thread of the session's (journal_sender.py): a store that stops answering loses nothing and stops
nothing. Reads, the run's creation and sweep parents (sweep_parents.py) are made synchronously.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from framework.provenance import RESUMES_TAG, run_dir_of

from . import store_template
from .finished_before import ERROR_TAG, PAUSED_TAG, FinishedBefore
from .journal import FOLDER, SUFFIX, Journal, JournalBusy, RunRecord, sync_notice
from .journal_sender import JournalSender, say, short_reason
from .mlflow_quiet import quiet_libraries
from .store_checks import store_name
from .summary_page import address_of
from .sweep_child import TRIAL_STATE_TAG
from .sweep_parents import (  # noqa: F401 - the names a sweep's tests rely on here
    ENDED_BY_TAG,
    ORPHAN_GRACE_S,
    PARENT_ABANDONED,
    SUMMARY_SPEC_TAG,
    SweepParents,
    ms,
)

SQLITE_PREFIX = "sqlite:///"
#: Marks an experiment as model training, so the MLflow UI opens on its runs (not GenAI traces).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


#: At most how long a run stopped (KILLED) waits at its end for a store that does not answer: what is
#: left is kept for `sync`, and a scheduler's SIGKILL follows its SIGTERM (10 s for `docker stop`).
STOPPED_OUTAGE_WAIT_S = 5.0


class MlflowSession:
    """One tracked run (or a sweep's parent) against one tracking URI.

    `outage_wait_s` and `finish_timeout_s` bound the wait at a run's end for a store that does not
    answer, and for everything (the tracker passes its config's).
    """

    def __init__(
        self,
        uri: str,
        experiment: str,
        flush_every_s: float,
        orphan_grace_s: float = ORPHAN_GRACE_S,
        outage_wait_s: float = 0.0,
        finish_timeout_s: float = 600.0,
        launch_dir: str | None = None,
    ) -> None:
        quiet_libraries()
        if launch_dir is not None:  # the tracking process's own: a store's ./mlruns is the launch directory's
            os.chdir(launch_dir)  # (a job that hydra.job.chdir=true moved is not where its artifacts go)
        self.uri = uri
        self.experiment = experiment
        self.flush_every_s = flush_every_s
        self.outage_wait_s = outage_wait_s
        self.finish_timeout_s = finish_timeout_s
        self.run_id: str | None = None
        self._resumed = False
        self._trial_state: str | None = None
        """The run's trial's state as its tags last said (a sweeper's trial), None for no trial."""
        self._finished_before: FinishedBefore | None = None
        self.experiment_id: str | None = None
        self._sweeps = SweepParents(
            lambda: self.client, self._experiment_id, orphan_grace_s, address=address_of(uri)
        )
        self._journal: Journal | None = None
        self._sender: JournalSender | None = None
        self._scratch: Path | None = None
        """The journal's temporary folder, for a run that names no run directory."""
        self._logged_through: dict[str, int] = {}
        """A resumed run's metrics: the last step each had reached before (logged no more)."""
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
            raise ConnectionError(f"the tracking store does not answer ({short_reason(e)})") from None
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
        """Create (or reopen, to resume) the run, and open its journal in the directory its tags name;
        returns its run and experiment ids."""
        if resume_run_id is not None:
            run = self._get_run(resume_run_id)
            self._finished_before = FinishedBefore.of(run, tags)
            self.experiment_id = str(run.info.experiment_id)
            self._send_earlier_journal(resume_run_id, run_dir_of(run.data.tags))
            self._logged_through = self._last_steps(resume_run_id)
            # its name follows its budget where the resume changed it (`steps=8k` to `steps=10k`)
            renamed = run_name if run_name and run_name != run.info.run_name else None
            if run.info.end_time:  # the time it spent ended is no part of its duration
                paused = time.time() - run.info.end_time / 1000 + float(run.data.tags.get(PAUSED_TAG) or 0)
                self.client.set_tag(resume_run_id, PAUSED_TAG, f"{max(paused, 0.0):.1f}")
            self.client.update_run(resume_run_id, status="RUNNING", name=renamed)
            if ERROR_TAG in run.data.tags:  # its earlier part's error: no filter on it finds this part
                part = run.data.tags.get(RESUMES_TAG, "0")
                self.client.set_tag(
                    resume_run_id, f"framework.error_before_resume{int(part) + 1}", run.data.tags[ERROR_TAG]
                )
                self.client.delete_tag(resume_run_id, ERROR_TAG)
            run_id = resume_run_id
        else:
            self._finished_before = None
            all_tags = dict(tags)
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            run = self.client.create_run(
                self._experiment_id(), run_name=run_name, tags=all_tags, start_time=ms(start_time)
            )
            run_id = str(run.info.run_id)
        self._open_journal(run_id, run_dir_of(tags))
        self.run_id, self._resumed = run_id, resume_run_id is not None
        self._trial_state = tags.get(TRIAL_STATE_TAG)
        if resume_run_id is not None:
            self.set_tags(tags)
        return {"run_id": run_id, "experiment_id": self._experiment_id()}

    def _send_earlier_journal(self, run_id: str, run_dir: str | None) -> None:
        """What the run's previous part left unsent (its server was down when it ended) goes first,
        its end included, before the run is reopened: its points stay in order."""
        path = Path(run_dir) / FOLDER / f"{run_id}{SUFFIX}" if run_dir else None
        if path is None or not path.is_file():
            return
        try:
            journal = Journal.reopen(path)
        except (OSError, ValueError, JournalBusy) as e:
            say(f"tracking: the journal of the run's previous part is not sent ({e})")
            return
        try:
            sender = JournalSender(journal, self.client, say_outages=False)
            if not journal.all_sent() and not sender.send_pending():
                say(f"tracking: the rest of {path} is not sent yet: python -m framework sync {run_dir}")
        finally:
            journal.close()

    def _open_journal(self, run_id: str, run_dir: str | None) -> None:
        if run_dir:
            folder, self._scratch = Path(run_dir) / FOLDER, None
        else:
            folder = self._scratch = Path(tempfile.mkdtemp(prefix="framework-tracking-"))
        record = RunRecord(self.uri, self.experiment, self._experiment_id(), run_id)
        self._journal = Journal.open(folder, record)
        self._sender = JournalSender(self._journal, self.client, flush_every_s=self.flush_every_s)
        self._sender.start()

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._append("params", params={k: str(v) for k, v in params.items()})

    def _last_steps(self, run_id: str) -> dict[str, int]:
        """The last step each metric of a run reached: a resumed run starts again from its checkpoint,
        and the points its previous part logged past that step are not logged twice."""
        run = self._get_run(run_id)
        return {
            key: max(m.step for m in self.client.get_metric_history(run_id, key)) for key in run.data.metrics
        }

    def log_metrics(self, metrics: Mapping[str, float], step: int, timestamp: float | None = None) -> None:
        """Metric points at `step`, stamped with `timestamp` (when they were logged; default now);
        in a resumed run, only those past where the metric's curve had got to."""
        if self._logged_through:
            metrics = {k: v for k, v in metrics.items() if step > self._logged_through.get(k, -1)}
            if not metrics:
                return
        if self._finished_before is not None:
            self._finished_before.went_on = True
        stamp = ms(time.time() if timestamp is None else timestamp)
        self._append(
            "metrics", metrics={k: float(v) for k, v in metrics.items()}, step=int(step), time_ms=stamp
        )

    def log_artifact(self, path: Path | str, artifact_path: str | None = None) -> None:
        self._append("artifact", path=str(Path(path).resolve()), artifact_path=artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        if self._finished_before is not None:
            tags = self._finished_before.tags(tags)
        self._trial_state = tags.get(TRIAL_STATE_TAG, self._trial_state)
        self._append("tags", tags={k: str(v) for k, v in tags.items()})

    def _append(self, op: str, **data: Any) -> None:
        if self._journal is None or self._sender is None:
            raise RuntimeError("No MLflow run is active: call start_run first")
        self._journal.append(op, **data)
        self._sender.added(op)

    def end_run(self, status: str, end_time: float | None = None) -> dict[str, str]:
        """End the run as `status` once everything it logged is sent; a store that does not answer is
        waited for at most `outage_wait_s`. Returns what is left unsent ('' for nothing), where, and why."""
        if self.run_id is None or self._journal is None or self._sender is None:
            return {"unsent": ""}
        journal, sender, run_id = self._journal, self._sender, self.run_id
        end_ms = ms(end_time)
        put_back = self._finished_before.put_back(status) if self._finished_before is not None else None
        if put_back is not None and self._finished_before is not None:  # nothing of the run changed
            self._append("tags", tags=put_back)
            status, end_ms = "FINISHED", self._finished_before.end_time_ms
        self._finished_before = None
        try:
            self._append("end", status=status, end_time_ms=end_ms)
            # A stopped run (Ctrl-C, a scheduler's SIGTERM, whose SIGKILL follows) waits less.
            wait = self.outage_wait_s
            if status == "KILLED":
                wait = min(wait, STOPPED_OUTAGE_WAIT_S)
            sent = sender.finish(outage_wait_s=wait, timeout_s=self.finish_timeout_s)
            unsent = "" if sent else journal.describe_unsent()
        finally:
            journal.close()
            self.run_id, self._journal, self._sender = None, None, None
        if sent and self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        if sent and self._resumed:  # a sweep's run resumed after its sweep ended: its summary follows
            try:
                self._sweeps.resummarise(run_id)
            except Exception as e:  # the run itself has ended as it should: said, not raised
                say(f"tracking: the summary of the run's sweep was not made again ({type(e).__name__}: {e})")
        folder = journal.path.parent
        return {
            "unsent": unsent,
            "run_dir": str(folder.parent if folder.name == FOLDER and self._scratch is None else folder),
            "journal": str(journal.path),
            "store": store_name(self.uri),
            "reason": sender.outage.reason if sender.outage.down else "",
        }

    def stop_waiting(self) -> None:
        """The training process was stopped while its run's end waits for the store: wait no longer."""
        if self._sender is not None:
            self._sender.cut_short.set()

    def run_tags(self, run_id: str) -> dict[str, str]:
        if _creates_store(self.uri):  # looking would create the store
            raise LookupError(
                f"no MLflow run {run_id!r}: the store {self.uri} does not exist (no run tracked there yet); "
                "a run tracked in another store is found with tracking.uri=THAT_STORE (sqlite:///PATH/mlflow.db)"
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
        """A sweep's parent run (see SweepParents.start)."""
        return self._sweeps.start(
            run_name=run_name, tags=tags, params=params, start_time=start_time, resume_run_id=resume_run_id
        )

    def end_parent(
        self, run_id: str, status: str, summary: Mapping[str, Any] | None, end_time: float | None = None
    ) -> dict[str, Any]:
        """End a sweep's parent run, with its summary (see SweepParents.end)."""
        return self._sweeps.end(run_id, status, summary, end_time)

    def abandon(self, reason: str) -> None:
        """The training process is gone: end its run FAILED rather than leave it RUNNING (what the store
        does not take is kept, and the command that sends it said); and a sweep's parent KILLED, with
        its summary (the sweep's launching process was killed: SIGTERM, say)."""
        try:
            if self.run_id is not None:
                tags = {ERROR_TAG: reason}
                if self._trial_state == "RUNNING":  # a sweep's trial: its study marks it FAIL as well
                    tags[TRIAL_STATE_TAG] = "FAIL"
                self.set_tags(tags)
                left = self.end_run("FAILED")
                if left["unsent"]:
                    say(sync_notice(left))
        finally:
            self._sweeps.abandon()

    def _get_run(self, run_id: str) -> Any:
        try:
            return self.client.get_run(run_id)
        except MlflowException:
            elsewhere = " (A run tracked in another store is found with tracking.uri=THAT_STORE.)"
            raise LookupError(
                f"no MLflow run {run_id!r} in {self.uri}.{self._recent_runs(run_id)}{elsewhere}"
            ) from None
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


def _creates_store(uri: str) -> bool:
    return uri.startswith(SQLITE_PREFIX) and not Path(uri[len(SQLITE_PREFIX) :]).exists()
