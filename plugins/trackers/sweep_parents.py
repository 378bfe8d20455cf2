"""The parent runs of sweeps, made synchronously (inside the tracking process): start, reopen,
summarise and end them, and end the children their jobs left RUNNING."""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from framework.contracts.tracker import SUMMARY_SPEC_TAG
from framework.provenance import run_dir_of

from . import report, seed_summary, sweep_child, sweep_summary
from .journal import Journal, JournalBusy, journals
from .journal_sender import MAX_PARAM_VALUE, MAX_PARAMS_PER_BATCH, JournalSender
from .sweep_child import TRIAL_STATE_TAG

log = logging.getLogger("framework.tracking")

#: Children of one sweep read back for its summary.
MAX_CHILDREN = 10_000
#: The tag on a run that another than its own tracker ended, saying who.
ENDED_BY_TAG = "framework.ended_by"
#: The tag on a stopped sweep's parent that a resume made FINISHED: the child whose resume did.
FINISHED_BY_TAG = "framework.finished_by_resume_of"
#: The status a sweep's child still RUNNING when the sweep ends gets, by the sweep's status.
ORPHAN_STATUS = {"KILLED": "KILLED", "FAILED": "FAILED", "FINISHED": "FAILED"}
#: How long the parent of a sweep whose launching process is gone waits for its RUNNING children's own
#: trackers (which see their job end at about the same time) to end them, before it ends them itself.
ORPHAN_GRACE_S = 10.0
#: MLflow's limit on the metrics of one log_batch call.
MAX_METRICS_PER_BATCH = 1000
PARENT_ABANDONED = "tracking process: the sweep's process ended without ending the sweep"


class SweepParents:
    """The sweep parents one tracking process started and has not ended yet."""

    def __init__(
        self,
        client: Callable[[], MlflowClient],
        experiment_id: Callable[[], str],
        orphan_grace_s: float = ORPHAN_GRACE_S,
        address: str = "",
    ) -> None:
        self._client = client
        self.address = address
        """Where a downloaded summary page opens the runs (summary_page.address_of)."""
        self._experiment_id = experiment_id
        self.orphan_grace_s = orphan_grace_s
        self._open: dict[str, Mapping[str, Any] | None] = {}
        """The parents started here and not yet ended, with what their summary needs (if known)."""

    @property
    def client(self) -> MlflowClient:
        return self._client()

    def start(
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
            self._open[resume_run_id] = _summary_spec(tags.get(SUMMARY_SPEC_TAG))
            return resume_run_id
        run = self.client.create_run(
            self._experiment_id(), run_name=run_name, tags=dict(tags), start_time=ms(start_time)
        )
        run_id = str(run.info.run_id)
        self._open[run_id] = _summary_spec(tags.get(SUMMARY_SPEC_TAG))
        items = [Param(k, str(v)[:MAX_PARAM_VALUE]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i : i + MAX_PARAMS_PER_BATCH])
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

    def end(
        self, run_id: str, status: str, summary: Mapping[str, Any] | None, end_time: float | None = None
    ) -> dict[str, Any]:
        """End the children still RUNNING, summarise the sweep on its parent run (table, plots, best
        child), then end the parent.

        A child is still RUNNING when its job was killed with its tracker (the joblib and Ray launchers
        kill a job's whole process tree on Ctrl-C): it ends as the sweep did (a FAILED one if the sweep
        FINISHED), tagged ENDED_BY_TAG. A sweep none of whose jobs started (its first was refused, say)
        leaves no parent behind. Returns the counts and the best child, for the command line to say.
        """
        self._open.pop(run_id, None)
        try:
            self._end_orphans(run_id, ORPHAN_STATUS.get(status, "FAILED"), end_time)
            found = (
                self._summarise_as(run_id, summary)
                if summary is not None
                else {"runs": len(self._children(run_id))}
            )
        finally:
            self.client.set_terminated(run_id, status, end_time=ms(end_time))
        if not found["runs"]:
            self.client.delete_run(run_id)
        return found

    def resummarise(self, child_id: str) -> None:
        """A child resumed after its sweep ended: its parent's summary (table, plots, best) is made
        again with the child's new result; the parent keeps its status, bar a stopped grid sweep's
        whose every job is FINISHED now (FINISHED_BY_TAG)."""
        tags = self.client.get_run(child_id).data.tags
        parent_id = tags.get("mlflow.parentRunId")
        if not parent_id or parent_id in self._open:
            return  # its sweep is going on: it summarises itself at its end
        parent = self.client.get_run(parent_id)
        spec = _summary_spec(parent.data.tags.get(SUMMARY_SPEC_TAG))
        if spec is not None and parent.info.status != "RUNNING":
            self._summarise_as(parent_id, spec)
            jobs = spec.get("jobs")
            children = self._children(parent_id) if jobs and parent.info.status != "FINISHED" else []
            if jobs and len(children) >= int(jobs) and all(c.info.status == "FINISHED" for c in children):
                # A stopped sweep whose every job its resumes have finished: finished, as a whole.
                self.client.set_tag(parent_id, FINISHED_BY_TAG, child_id)
                self.client.set_terminated(parent_id, "FINISHED", end_time=ms(time.time()))

    def _summarise_as(self, parent_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The sweep's summary on its parent, as its SUMMARY_SPEC_TAG says."""
        return self._summarise(
            parent_id,
            list(spec["swept_keys"]),
            str(spec["objective"]),
            str(spec["mode"]),
            [str(m) for m in spec.get("also") or ()],
            spec.get("study_dir"),
        )

    def abandon(self) -> None:
        """The sweep's launching process is gone (killed: SIGTERM, say): each open parent ends KILLED,
        with its summary, once its children's own trackers had the time to end them."""
        for parent_id, spec in list(self._open.items()):
            self._wait_for_children(parent_id)
            self.client.set_tag(parent_id, ENDED_BY_TAG, PARENT_ABANDONED)
            self.end(parent_id, "KILLED", spec, end_time=time.time())

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
        """End, as `status`, the children of the sweep that are still RUNNING; one whose journal holds
        its end (its store did not answer as its job ended, and answers now) gets what it holds."""
        for run in self._children(parent_id, running=True):
            child = str(run.info.run_id)
            if self._send_ended_journal(child, run.data.tags):
                continue
            self.client.set_tag(child, ENDED_BY_TAG, "sweep parent")
            if run.data.tags.get(TRIAL_STATE_TAG) == "RUNNING":  # its study marks it FAIL as well
                self.client.set_tag(child, TRIAL_STATE_TAG, "FAIL")
            self.client.set_terminated(child, status, end_time=ms(end_time))

    def _send_ended_journal(self, run_id: str, tags: Mapping[str, str]) -> bool:
        """Send the journal of a child whose job ended while its store did not answer; whether it did."""
        run_dir = run_dir_of(tags)
        for path in journals(Path(run_dir)) if run_dir else ():
            try:
                journal = Journal.reopen(path)
            except (ValueError, JournalBusy, OSError):  # its own tracker holds it: the job goes on
                continue
            try:
                if journal.record.run_id == run_id and journal.ended():
                    sender = JournalSender(journal, self.client, notify=log.info, say_outages=False)
                    return sender.send_pending()
            finally:
                journal.close()
        return False

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
        budgets = {sweep_child.value_of(r, "total_steps") for r in runs}
        if len(budgets) > 1 and "total_steps" not in swept_keys:  # a child resumed to a larger budget
            swept_keys = [*swept_keys, "total_steps"]  # is a configuration of its own, as compare has it
        children = [sweep_child.child_from_run(r, swept_keys, objective, also) for r in runs]
        if not children:
            return {"runs": 0}
        study = self._log_study(parent_id, Path(study_dir)) if study_dir else None
        experiment = self._experiment_id()
        links = {c.run_id: run_fragment(experiment, c.run_id) for c in children}
        with tempfile.TemporaryDirectory(prefix="framework-sweep-") as tmp:
            found = report.write(
                children,
                swept_keys,
                objective,
                mode,
                Path(tmp),
                history=lambda run_id: history(self.client, run_id, objective),
                also=also,
                title=str(self.client.get_run(parent_id).info.run_name or ""),
                links=links,
                address=self.address,
                grid_plots=study is None,
            )
            for path in found.files:
                self.client.log_artifact(parent_id, str(path))
        top = found.top
        said = sweep_summary.note(
            children,
            top,
            objective,
            mode,
            links,
            [p.name for p in found.heatmaps],
            study,
            found.configs,
            files=[p.name for p in found.files],
        )
        tags = {"mlflow.note.content": said}
        if study and "best_params" in study:
            tags.update({f"best.{k}": str(v) for k, v in study["best_params"].items()})
            tags["framework.study_name"] = str(study["study_name"])
        now = int(time.time() * 1000)
        metrics = [Metric("sweep/children", float(len(children)), now, 0)]
        if top is not None and top.objective is not None:
            tags.update({"framework.best_child_run_id": top.run_id, "framework.best_child": top.name})
            metrics.append(Metric(f"best/{objective}", top.objective, now, 0))
        metrics += [Metric(k, v, now, 0) for k, v in seed_summary.metrics(found.configs, objective).items()]
        for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
            self.client.log_batch(parent_id, metrics=metrics[i : i + MAX_METRICS_PER_BATCH])
        self.client.log_batch(parent_id, tags=[RunTag(k, v) for k, v in tags.items()])
        statuses: dict[str, int] = {}
        for c in children:
            statuses[c.outcome] = statuses.get(c.outcome, 0) + 1
        best = {"best": top.name, "best_value": top.objective} if top is not None else {}
        if found.configs:  # a child is one seed: what the seeds say, beside the luckiest one
            best["seeds"] = seed_summary.verdict(found.configs, objective)
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
        if not isinstance(found, dict):
            return None
        return {**found, "plots": sorted(p.stem for p in folder.glob("*.png"))}

    def _wait_for_children(self, parent_id: str) -> None:
        """Until the children's own trackers have ended them (their jobs went with the sweep's
        process), or the grace is over."""
        deadline = time.monotonic() + self.orphan_grace_s
        while time.monotonic() < deadline and self._children(parent_id, running=True):
            time.sleep(min(0.5, self.orphan_grace_s))


def _summary_spec(tag: str | None) -> Mapping[str, Any] | None:
    """What a parent's summary needs, from its SUMMARY_SPEC_TAG; None without it (or if unreadable)."""
    if not tag:
        return None
    try:
        spec = json.loads(tag)
    except ValueError:
        return None
    return spec if isinstance(spec, dict) and {"swept_keys", "objective", "mode"} <= set(spec) else None


def run_fragment(experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI, in its model-training view, from the UI's root."""
    return f"#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


def history(client: MlflowClient, run_id: str, metric: str) -> tuple[list[int], list[float]]:
    """A run's values of `metric` in step order (the last one logged at a step)."""
    at: dict[int, float] = {}
    for m in sorted(client.get_metric_history(run_id, metric), key=lambda m: (m.step, m.timestamp)):
        at[int(m.step)] = float(m.value)
    steps = sorted(at)
    return steps, [at[s] for s in steps]


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)
