"""MLflow tracking: the local SQLite store ./mlflow.db by default, or any tracking URI."""

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
import contextlib
import dataclasses
import getpass
import logging
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from framework.columns import WIDTH, wrap
from framework.contracts import SweepSummarySpec
from framework.contracts.sweeper import parent_run_of_this_job
from framework.provenance import run_dir_of
from framework.values import bounds

from . import local_views, pending_parents, run_names
from .journal import FOLDER, sync_notice
from .local_views import absolute_uri
from .store_checks import (
    TrackingUnavailable,
    check_reachable,
    check_writable,
    first_reason,
    limit_http_waits,
    store_name,
)
from .tracking_process import TrackingError, TrackingProcess

log = logging.getLogger("framework.tracking")
#: The query that opens an MLflow UI page in its model-training view (runs, params, metrics).
MLFLOW_VIEW = "?workflowType=machine_learning"
#: Beyond the waits a run's end allows the tracking process, for its answer to come back.
ANSWER_MARGIN_S = 30.0
#: Times a run's tracking process that died is started again on it.
MAX_RESTARTS = 3


def mlflow_source_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """`tags` and MLflow's own of a new run, which its runs table shows as User and Source."""
    own = {"mlflow.source.name": "python -m framework", "mlflow.source.type": "LOCAL"}
    with contextlib.suppress(Exception):  # no user name where the uid has no entry (a container's)
        own["mlflow.user"] = getpass.getuser()
    if "git.commit" in tags:
        own["mlflow.source.git.commit"] = tags["git.commit"]
    return {**own, **tags}


@dataclass
class MlflowConfig:
    uri: str = "sqlite:///mlflow.db"
    """Tracking URI: sqlite:///path.db, http://127.0.0.1:5000, databricks, ... (else $MLFLOW_TRACKING_URI)."""
    experiment: str = "framework"
    """Experiment that runs (and sweeps) are grouped under (else $MLFLOW_EXPERIMENT_NAME)."""
    run_name: Optional[str] = None
    """Run name (a sweep's: its parent's); default `<agent>-s<seed>` and the overrides that change
    what it trains, `sb3-ppo-s0 epochs=10 cartpole` (a sweep's child: its own values first,
    `lr=1e-3 ne=5 ...`)."""
    flush_every_s: float = field(default=1.0, metadata=bounds(gt=0))
    """Metrics are sent in batches at most this often (and at the end of the run)."""
    check_timeout_s: float = field(default=5.0, metadata=bounds(gt=0))
    """How long a tracking server has to answer the check made before anything starts."""
    http_timeout_s: int = field(default=30, metadata=bounds(ge=1))
    """Per-request timeout against a tracking server (MLFLOW_HTTP_REQUEST_TIMEOUT)."""
    http_retries: int = field(default=2, metadata=bounds(ge=0))
    """Retries of a failed request to a tracking server (MLFLOW_HTTP_REQUEST_MAX_RETRIES)."""
    start_timeout_s: float = field(default=300.0, metadata=bounds(gt=0))
    """Longest wait for the run to be created (a new SQLite store is migrated first)."""
    finish_timeout_s: float = field(default=600.0, metadata=bounds(gt=0))
    """Longest wait at the end of a run for metrics and artifacts to be written."""
    outage_wait_s: float = field(default=30.0, metadata=bounds(gt=0))
    """At a run's end, how long to wait for a tracking store that stopped answering mid-run (what it
    has not taken is kept in the run directory, and `python -m framework sync RUN_DIR` sends it); a
    stopped run (KILLED) waits 5 s at most."""


class MlflowTracker:
    """MLflow runs: params, metrics, artifacts, parent/child runs of sweeps."""

    Config: ClassVar[type] = MlflowConfig

    def __init__(self, cfg: MlflowConfig) -> None:
        self.cfg = cfg
        self.uri = absolute_uri(cfg.uri)
        # A sweep's job waits out a server that answered for its sweep and is restarting.
        patience = cfg.outage_wait_s if parent_run_of_this_job() else 0.0
        check_reachable(self.uri, timeout_s=cfg.check_timeout_s, patience_s=patience)
        check_writable(self.uri, cfg.experiment)
        limit_http_waits(cfg.http_timeout_s, cfg.http_retries)
        self._process = self._new_process()
        self._restarts = 0
        self._reopen: Optional[dict[str, Any]] = None
        """How a new tracking process reopens the run under way (start_run's arguments to resume it)."""
        self._start_ticket: Optional[int] = None
        self._start_error: Optional[TrackingUnavailable] = None
        self._run_id: Optional[str] = None
        self._experiment_id: Optional[str] = None
        self._sweep_dir = ""
        self._run_dir: Optional[str] = None

    def _new_process(self) -> TrackingProcess:
        return TrackingProcess(
            "framework_plugins.trackers.mlflow_session:MlflowSession",
            self.uri,
            self.cfg.experiment,
            self.cfg.flush_every_s,
            outage_wait_s=self.cfg.outage_wait_s,
            finish_timeout_s=self.cfg.finish_timeout_s,
            launch_dir=str(local_views.launch_dir()),
        )

    def _live(self) -> TrackingProcess:
        """The tracking process. One that died while a run was under way (killed: the OOM killer) is
        started again on that run, as a resume reopens it: what the dead one had not sent is in the
        run's journal, and is sent first; the run goes on (at most MAX_RESTARTS times)."""
        dead = self._process.process.poll()
        if dead is None or self._reopen is None or self._restarts >= MAX_RESTARTS:
            return self._process
        self._restarts += 1
        log.warning(
            "the tracking process ended (exit code %s); another goes on with the run (%d of %d), "
            "nothing it was given is lost: the run's journal holds it", dead, self._restarts, MAX_RESTARTS,
        )  # fmt: skip
        self._process.close(timeout=1.0)
        self._process = self._new_process()
        self._process.call("start_run", **self._reopen, timeout=self.cfg.start_timeout_s)
        return self._process

    def name_run(self, cfg: Any, env_name: str, overrides: Sequence[str], *, resumes: str | None) -> str:
        """`tracking.run_name` where given, else what sets the run apart, sized to MLflow's runs table."""
        return self.cfg.run_name or run_names.name_run(self, cfg, env_name, overrides, resumes)

    def start_run(
        self,
        *,
        run_name: Optional[str],
        tags: Mapping[str, str],
        parent_run_id: Optional[str] = None,
        resume_run_id: Optional[str] = None,
        start_time: Optional[float] = None,
    ) -> None:
        self._run_id, self._start_error, self._reopen = None, None, None
        self._run_dir = run_dir_of(tags)
        self._tags = dict(tags) if resume_run_id else mlflow_source_tags(tags)
        if self.cfg.run_name and not resume_run_id and run_name == self.cfg.run_name:
            self._tags[run_names.GIVEN_NAME_TAG] = self.cfg.run_name
        self._start_ticket = self._process.ask(
            "start_run",
            run_name=run_name,
            tags=self._tags,
            parent_run_id=parent_run_id,
            resume_run_id=resume_run_id,
            start_time=start_time,
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
                ids = self._process.wait(self._start_ticket, timeout=self.cfg.start_timeout_s)
            except TrackingError as e:
                self._start_error = TrackingUnavailable(
                    f"MLflow tracking URI {self.uri} cannot be used: {first_reason(str(e))}"
                )
                raise self._start_error from None
            self._run_id, self._experiment_id = str(ids["run_id"]), str(ids["experiment_id"])
            self._reopen = {"run_name": None, "tags": self._tags, "resume_run_id": self._run_id}
        return self._run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._live().send("log_params", dict(params))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Stamped here, when logged: a point sent late (after an outage) keeps its real time."""
        self._live().send("log_metrics", {k: float(v) for k, v in metrics.items()}, int(step), time.time())

    def log_artifact(self, path: Path, artifact_path: Optional[str] = None) -> None:
        self._live().send("log_artifact", Path(path).resolve(), artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._live().send("set_tags", {k: str(v) for k, v in tags.items()})

    def end_run(self, status: str, *, end_time: Optional[float] = None) -> None:
        """Waits until every metric and artifact of the run is sent, then ends it as `status`. What a
        tracking store that stopped answering has not taken (after tracking.outage_wait_s) stays in
        the run's journal, and the command that sends it later is said; the run is not failed for it."""
        if self._start_ticket is None:
            return
        self._start_ticket = None
        wait = self.cfg.finish_timeout_s + self.cfg.outage_wait_s + ANSWER_MARGIN_S
        stopped = False
        try:
            process, self._reopen = self._live(), None  # a process that died just now reopens it to end it
            ticket = process.ask("end_run", status, end_time)
            try:
                left: dict[str, str] = process.wait(ticket, timeout=wait)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM as it waits for a store: it waits no longer
                stopped = True
                process.stop_waiting()
                left = process.wait(ticket, timeout=self.cfg.finish_timeout_s + ANSWER_MARGIN_S)
        except TrackingError as e:
            if not self._run_dir:
                raise
            left = {
                "store": f"the tracking process of {store_name(self.uri)}",
                "reason": str(e),
                "unsent": "the entries it had not sent",
                "journal": str(Path(self._run_dir) / FOLDER),
                "run_dir": str(self._run_dir),
            }
        if left.get("unsent"):
            for line in sync_notice(left).splitlines():
                log.warning(line.strip())
        if stopped:  # said what is left, and where: the stop goes on
            raise KeyboardInterrupt

    def run_tags(self, run_id: str) -> dict[str, str]:
        try:
            tags: dict[str, str] = self._process.call("run_tags", run_id, timeout=self.cfg.start_timeout_s)
        except TrackingError as e:
            raise LookupError(str(e).removeprefix("LookupError: ")) from None
        return tags

    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path:
        return Path(
            self._process.call("download_artifacts", run_id, path, dst, timeout=self.cfg.finish_timeout_s)
        )

    def how_to_view(self, run_id: str) -> str:
        """The run's page in the MLflow UI, in its model-training view (MLFLOW_VIEW: MLflow 3.17 opens
        a fresh browser on its GenAI view otherwise): for a SQLite store, the command that serves and
        opens it (`python -m framework ui --run ID`), then the page's address, on a line of its own."""
        experiment = self._experiment_id
        page = f"#/experiments/{experiment}/runs/{run_id}{MLFLOW_VIEW}" if experiment else ""
        scheme = urllib.parse.urlparse(self.uri).scheme
        if scheme in ("http", "https"):
            return f"{self.uri.rstrip('/')}/{page}"
        if scheme == "sqlite":
            command = f"python -m framework ui --run {run_id}"
            if store := self.store_overrides():
                command += f" {store}"
            if self.cfg.experiment != MlflowConfig.experiment:
                command += f" tracking.experiment={self.cfg.experiment}"
            return f"{command}\n{local_views.ui_address(self.uri)}/{page}"
        return f"MLflow run {run_id} in experiment {self.cfg.experiment!r} at {self.uri}"

    def store_overrides(self) -> str:
        """`tracking.uri=...` where the store is not `./mlflow.db` of the directory a command runs in."""
        return "" if self.uri == absolute_uri(MlflowConfig.uri) else f"tracking.uri={self.uri}"

    def start_parent(
        self,
        *,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        start_time: Optional[float] = None,
        resume_run_id: Optional[str] = None,
    ) -> str:
        self._sweep_dir = str(tags.get("framework.sweep_dir", ""))
        run_id: str = self._process.call(
            "start_parent",
            run_name=self.cfg.run_name or run_name,
            tags=dict(tags) if resume_run_id else mlflow_source_tags(tags),
            params=dict(params),
            start_time=start_time,
            resume_run_id=resume_run_id,
            timeout=self.cfg.start_timeout_s,
        )
        return run_id

    def end_parent(
        self, run_id: str, status: str, *, summary: SweepSummarySpec, end_time: Optional[float] = None
    ) -> str:
        try:
            found: dict[str, Any] = self._process.call(
                "end_parent",
                run_id,
                status,
                dataclasses.asdict(summary),
                end_time,
                timeout=self.cfg.finish_timeout_s,
            )
        except TrackingError as e:  # its store does not answer: ended by `sync SWEEP_DIR` once it does
            if not self._sweep_dir:
                raise
            from .journal_sender import short_reason  # imports MLflow: not at the plugin listing's import

            spec = dataclasses.asdict(summary)
            kept = pending_parents.keep(self._sweep_dir, self.uri, run_id, status, spec, end_time)
            said = (
                f"Sweep {status}: its parent run {run_id} is not ended yet: {store_name(self.uri)} does not "
                f"answer ({short_reason(e)}); its end is kept in {kept}. Once it answers, this sends what "
                "the sweep's runs kept and ends the parent, with its summary:"
            )
            return "\n".join([*wrap(said, WIDTH), f"  python -m framework sync {kept.parent.parent}"])
            return (
                f"Sweep {status}: its parent run {run_id} is not ended yet: {store_name(self.uri)} does not "
                f"answer ({first_reason(str(e))}); its end is kept in {kept}. Once it answers, this sends "
                f"the sweep's runs what they kept and ends it, with its summary:\n"
                f"  python -m framework sync {self._sweep_dir}"
            )
        if not found.get("runs"):
            return ""
        counts = ", ".join(f"{n} {s}" for s, n in sorted(found["statuses"].items()))
        runs = int(found["runs"])
        lines = [f"Sweep {status}: {runs} run{'' if runs == 1 else 's'} ({counts})."]
        if "best" in found:
            lines.append(
                f"  best              {found['best']} ({summary.objective} {found['best_value']:.4g})"
            )
        self._experiment_id = str(found["experiment_id"])
        first, *more = self.how_to_view(run_id).splitlines()
        lines += [f"  summary           {first}", *(f"                    {line}" for line in more)]
        if "seeds" in found:
            lines += wrap(str(found["seeds"]), WIDTH, first="  over seeds        ", indent=" " * 20)
        return "\n".join(lines)

    def close(self) -> None:
        """A run not ended yet is ended FAILED by the tracking process, which may wait for its store."""
        self._process.close(timeout=self.cfg.outage_wait_s + ANSWER_MARGIN_S)


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import Tracker

    _mlflowtracker_contract: type[Tracker] = MlflowTracker
