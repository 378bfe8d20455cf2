"""Sends a run's journal to its MLflow run, in order, in MLflow's batches; an outage only waits.

A store that does not answer (a tracking server that is down, a store that cannot be written) is
an outage: said once when it starts and once when it ends, retried with a growing pause, never
an error of the run. A store that refuses one entry (a param whose value changed, a run deleted
meanwhile) is not an outage: the entry is reported and passed over, and the entries after it go on.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from .journal import Entry, Journal
from .store_checks import first_reason, store_name

#: MLflow's per-request limits on a log_batch call.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
MAX_PARAM_VALUE = 6000
#: The first pause before trying a store that did not answer again, doubled up to the longest.
RETRY_FIRST_S = 0.5
RETRY_LONGEST_S = 5.0
#: How long a sender that is told to stop waits for a request it has in flight.
JOIN_S = 2.0
#: Entries sent at once, not on the next flush: the run waits for them, or they are rare.
URGENT = ("artifact", "end")
#: HTTP statuses of errors that another try may not repeat (not the entry's fault).
_PASSING = (401, 403, 404, 408, 429, 499)


class ArtifactGone(Exception):
    """An artifact's file was removed before it could be sent."""


def say(message: str) -> None:
    """The tracking process's notices go to its stderr, which the training process logs; once that
    process is gone (killed), nothing reads them, and they are dropped rather than end the sending."""
    with contextlib.suppress(OSError, ValueError):  # a closed pipe (EPIPE), or a stream closed at exit
        print(message, file=sys.stderr, flush=True)


def transient(error: BaseException) -> bool:
    """Whether a later try may succeed: the store is unreachable, overloaded or failing, or cannot
    find the run yet (a server restarted on another store), as opposed to refusing the entry."""
    if isinstance(error, ArtifactGone):
        return False
    if isinstance(error, MlflowException):
        status = error.get_http_status_code()
        return not 400 <= status < 500 or status in _PASSING
    return True  # a connection, a file system: kept, and tried again


def short_reason(error: BaseException) -> str:
    """One short line for what went wrong: 'Connection refused', not MLflow's paragraph."""
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    for pattern in (r"\[Errno -?\d+\] ([^'\"()\]]+)", r"(read timed out|timed out)"):
        found = re.search(pattern, text, flags=re.IGNORECASE)
        if found:  # "[Errno 28] No space left on device: '/path'": the reason, not its colon
            return found.group(1).strip().rstrip(":").strip()
    return first_reason(text)[:200]


class Outage:
    """Whether the store answers; its start and end are said once each, not at every retry."""

    def __init__(self, uri: str, folder: Path, notify: Callable[[str], None] | None = say) -> None:
        self.store = store_name(uri)
        self.folder = folder
        self.notify = notify
        self.since: float | None = None
        """When (time.monotonic) the store last stopped answering; None while it answers."""
        self.since_wall = 0.0
        self.reason = ""
        self.failures = 0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        if self.since is None:
            self.since, self.since_wall, self.reason = time.monotonic(), time.time(), short_reason(error)
            if self.notify is not None:
                self.notify(
                    f"tracking: {self.store} does not answer ({self.reason}); the run goes on, and what "
                    f"it logs is kept in {self.folder} and sent when it answers"
                )

    def answered(self, sent: int) -> None:
        if self.since is not None and self.notify is not None:
            lasted = time.monotonic() - self.since
            self.notify(
                f"tracking: {self.store} answers again, after {lasted:.0f} s; the {sent} entries "
                "kept meanwhile were sent"
            )
        self.since, self.failures = None, 0

    def retry_in(self) -> float:
        return min(RETRY_FIRST_S * 2 ** max(self.failures - 1, 0), RETRY_LONGEST_S)


class JournalSender:
    """Sends a journal's unsent entries to the journal's run: from a thread of its own while the run
    goes on (`start`, `added`, `finish`), or in one pass (`send_pending`, for `sync`)."""

    def __init__(
        self,
        journal: Journal,
        client: MlflowClient,
        *,
        flush_every_s: float = 1.0,
        notify: Callable[[str], None] = say,
        say_outages: bool = True,
    ) -> None:
        self.journal = journal
        self.client = client
        self.run_id = journal.record.run_id
        self.flush_every_s = flush_every_s
        self.notify = notify
        self.outage = Outage(journal.record.uri, journal.path.parent, notify if say_outages else None)
        self.refused: dict[str, int] = {}
        """Entries the store refused, by kind (each kind's first is said)."""
        self._sent_in_outage = 0
        self.cut_short = threading.Event()
        """Set (Ctrl-C in the training process): `finish` waits for the store no longer."""
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._progress = threading.Condition()
        self._thread: threading.Thread | None = None
        self._journal_failed = False

    def send_pending(self) -> bool:
        """Send every unsent entry in order; False when the store stopped answering (the rest stays)."""
        while entries := self.journal.unsent():
            for group in batches(entries):
                if self._stopping.is_set():  # finished: what is left is `sync`'s
                    return False
                try:
                    self._send_group(group)
                except Exception as e:
                    self.outage.failed(e)
                    return False
                self.journal.mark_sent(group[-1].end)
                self._sent_in_outage += len(group) if self.outage.down else 0
        self.outage.answered(self._sent_in_outage)
        self._sent_in_outage = 0
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="journal-sender")
        self._thread.start()

    def added(self, op: str) -> None:
        """An entry was appended: sent now if it is urgent, else with the next flush."""
        if op in URGENT or self.flush_every_s <= 0:
            self._wake.set()

    def finish(self, *, outage_wait_s: float, timeout_s: float) -> bool:
        """Send what is left, waiting for a store that does not answer at most `outage_wait_s` (and
        for everything at most `timeout_s`); stop. True when everything was sent."""
        asked, said = time.monotonic(), False
        self._wake.set()
        with self._progress:
            # A sender thread that has died sends nothing more: no waiting for it.
            while self._thread is not None and self._thread.is_alive() and not self.journal.all_sent():
                now = time.monotonic()
                since = self.outage.since
                if (
                    (since is not None and now - max(asked, since) >= outage_wait_s)
                    or now - asked >= timeout_s
                    or self.cut_short.is_set()
                ):
                    break
                if since is not None and not said:  # a wait that says nothing looks like a hang
                    said, left = True, max(0.0, outage_wait_s - (now - max(asked, since)))
                    self.notify(
                        f"tracking: waiting up to {left:.0f} s "
                        f"(tracking.outage_wait_s) for {self.outage.store} to answer; Ctrl-C stops waiting "
                        "(what is unsent stays in the run's journal, for `sync`)"
                    )
                self._progress.wait(0.2)
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=JOIN_S)  # a request to a server that hangs is left to time out
        for kind, count in self.refused.items():
            if count > 1:
                self.notify(f"tracking: the store refused {count} {kind} entries in all")
        return self.journal.all_sent()

    def _run(self) -> None:
        while not self._stopping.is_set():
            pause = self.outage.retry_in() if self.outage.down else self.flush_every_s
            self._wake.wait(pause if pause > 0 else 1.0)
            self._wake.clear()
            try:
                self.send_pending()
            except Exception as e:  # the journal itself (unreadable, or its progress unwritable: a full
                # disk): said once, and tried again
                if not self._journal_failed:
                    self.notify(f"tracking: the journal {self.journal.path} fails ({e}); tried again")
                self._journal_failed = True
                self._stopping.wait(RETRY_LONGEST_S)
            with self._progress:
                self._progress.notify_all()

    def _send_group(self, group: list[Entry]) -> None:
        """Send a group; a refusal is narrowed to the entry refused, which is reported and passed over."""
        try:
            self._send(group)
        except Exception as e:
            if transient(e):
                raise
            if len(group) == 1:
                self._refuse(group[0], e)
                return
            for entry in group:
                self._send_group([entry])

    def _send(self, group: list[Entry]) -> None:
        first = group[0]
        if first.op == "artifact":
            path = Path(first.data["path"])
            if not path.exists():
                raise ArtifactGone(f"{path} no longer exists")
            if path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), first.data.get("artifact_path"))
            else:
                self.client.log_artifact(self.run_id, str(path), first.data.get("artifact_path"))
        elif first.op == "end":
            end_ms = first.data.get("end_time_ms")
            self.client.set_terminated(self.run_id, str(first.data["status"]), end_time=end_ms)
        else:
            self._log_batch(group)

    def _log_batch(self, group: list[Entry]) -> None:
        metrics: list[Metric] = []
        params: dict[str, str] = {}
        tags: dict[str, str] = {}
        for entry in group:
            if entry.op == "metrics":
                stamp, step = int(entry.data["time_ms"]), int(entry.data["step"])
                metrics += [Metric(k, float(v), stamp, step) for k, v in entry.data["metrics"].items()]
            elif entry.op == "params":
                params.update({k: str(v)[:MAX_PARAM_VALUE] for k, v in entry.data["params"].items()})
            else:
                tags.update({k: str(v) for k, v in entry.data["tags"].items()})
        param_list = [Param(k, v) for k, v in params.items()]
        tag_list = [RunTag(k, v) for k, v in tags.items()]
        while metrics or param_list or tag_list:
            p, param_list = param_list[:MAX_PARAMS_PER_BATCH], param_list[MAX_PARAMS_PER_BATCH:]
            t, tag_list = tag_list[:MAX_TAGS_PER_BATCH], tag_list[MAX_TAGS_PER_BATCH:]
            room = min(MAX_METRICS_PER_BATCH, MAX_ENTITIES_PER_BATCH - len(p) - len(t))
            m, metrics = metrics[:room], metrics[room:]
            self.client.log_batch(self.run_id, metrics=m, params=p, tags=t)

    def _refuse(self, entry: Entry, error: BaseException) -> None:
        self.refused[entry.op] = self.refused.get(entry.op, 0) + 1
        if self.refused[entry.op] == 1:
            self.notify(
                f"tracking: the store refused a {entry.op} entry ({short_reason(error)}); it is passed "
                "over (repeats are counted, not shown)"
            )


def batches(entries: list[Entry]) -> Iterator[list[Entry]]:
    """Consecutive metrics, params and tags entries grouped within MLflow's limits (a param key once
    a group, as MLflow refuses a changed param); an artifact or the run's end alone, in order."""
    group: list[Entry] = []
    sizes = {"metrics": 0, "params": 0, "tags": 0}
    param_keys: set[str] = set()
    for entry in entries:
        if entry.op in URGENT:
            if group:
                yield group
            yield [entry]
            group, sizes, param_keys = [], dict.fromkeys(sizes, 0), set()
            continue
        items: dict[str, Any] = entry.data[entry.op]
        grown = {**sizes, entry.op: sizes[entry.op] + len(items)}
        fits = (
            grown["metrics"] <= MAX_METRICS_PER_BATCH
            and grown["params"] <= MAX_PARAMS_PER_BATCH
            and grown["tags"] <= MAX_TAGS_PER_BATCH
            and sum(grown.values()) <= MAX_ENTITIES_PER_BATCH
            and not (entry.op == "params" and param_keys & set(items))
        )
        if group and not fits:
            yield group
            group, grown, param_keys = [], {**dict.fromkeys(sizes, 0), entry.op: len(items)}, set()
        group.append(entry)
        sizes = grown
        if entry.op == "params":
            param_keys |= set(items)
    if group:
        yield group
