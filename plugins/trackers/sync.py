"""`python -m framework sync RUN_DIR`: send what a run's tracking store did not take while the run
ran (its server was down), from the run's journal (RUN_DIR/tracking/<run id>.jsonl), in order.

Only the entries after the journal's sent offset go: sending twice is harmless (nothing already
taken is sent again), and the run ends with the status it ended with. A journal without an end (its
run and tracking were killed outright) ends its run FAILED. While the run's own tracking still has
the journal open, `sync` leaves it alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

from framework.columns import for_stream, refuse
from framework.commands import Parser

from . import pending_parents
from .journal import Journal, JournalBusy, journals, read_record
from .store_checks import server_unreachable, store_name

#: How long the tracking server has to answer the check made before sending.
CHECK_TIMEOUT_S = 10.0
#: The error tag of a run whose journal has no end: its processes were killed outright.
NO_END = "sync: the run's journal has no end (its run and tracking were killed outright)"


def main(argv: list[str]) -> int:
    """Send what a run's tracking server did not take (it was down) from the run's journal: sync RUN_DIR."""
    parser = Parser(
        prog="python -m framework sync",
        description="Send what a run logged while its tracking store did not answer, from its journal",
    )
    parser.add_argument(
        "run_dir", type=Path, help="the run's directory (or its tracking/ folder, or a journal)"
    )
    parser.add_argument(
        "--uri", help="send to this tracking URI instead of the journal's own (a server that moved)"
    )
    args = parser.parse_args(argv)
    if not args.run_dir.exists():
        refuse(f"{args.run_dir} does not exist: give the run's directory (its `run dir` line)")
        return 1
    found = journals(args.run_dir)
    parents = pending_parents.pending(args.run_dir)
    for parent in parents:  # a sweep's directory: its runs' journals go first
        if parent.parent.parent == args.run_dir:
            found += [j for j in pending_parents.children_journals(parent) if j not in found]
    if not found and not parents:
        _say(f"Nothing to send: {args.run_dir} holds no tracking journal (tracking/*.jsonl).")
        return 0
    code = max((_sync(path, args.uri) for path in found), default=0)
    for parent in parents:
        code = max(code, _end_parent(parent, args.uri))
    return code


def _end_parent(path: Path, uri: str | None) -> int:
    """End a sweep's parent whose end its store did not take, once every run of the sweep is sent."""
    sweep_dir = path.parent.parent
    for journal in pending_parents.children_journals(path):
        try:
            held = Journal.reopen(journal)
        except (ValueError, JournalBusy, OSError):
            held = None
        try:
            if held is None or not held.all_sent():
                _say(
                    "The sweep's parent run ends once its runs are sent: "
                    f"python -m framework sync {sweep_dir}"
                )
                return 1
        finally:
            if held is not None:
                held.close()
    try:
        _say(pending_parents.end(path, uri))
    except Exception as e:
        from .journal_sender import short_reason

        refuse(
            f"the sweep's parent run was not ended ({short_reason(e)}): run this again once its store answers"
        )
        return 1
    return 0


def _sync(path: Path, uri: str | None) -> int:
    """Send one journal; its exit status."""
    try:
        record = read_record(path)
        journal = Journal.reopen(path)
    except (ValueError, JournalBusy, OSError) as e:
        refuse(str(e))
        return 1
    try:
        if journal.all_sent():
            _say(f"Nothing to send: run {record.run_id} has everything its journal {path} holds.")
            return 0
        target = uri or record.uri
        reason = server_unreachable(target, timeout_s=CHECK_TIMEOUT_S)
        if reason is not None:
            refuse(
                f"{store_name(target)} does not answer ({reason}): nothing was sent. Run this again "
                "once it answers (or send to another server: --uri URI)."
            )
            return 1
        if not journal.ended():
            journal.append("tags", tags={"framework.error": NO_END})
            journal.append("end", status="FAILED", end_time_ms=None)
        return _send(journal, target)
    finally:
        journal.close()


def _send(journal: Journal, uri: str) -> int:
    from mlflow.tracking import MlflowClient  # imported only when there is something to send

    from .journal_sender import JournalSender, short_reason
    from .mlflow_quiet import quiet_libraries

    quiet_libraries()
    record = journal.record
    what = journal.describe_unsent()
    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(record.run_id)
    except Exception as e:
        held = " RESOURCE_DOES_NOT_EXIST" not in f" {getattr(e, 'error_code', '')}"
        refuse(
            f"run {record.run_id} cannot be read at {uri}: {short_reason(e)}"
            if held
            else f"{uri} does not hold run {record.run_id}: it serves another store than the one the run "
            "was tracked in (a server started anew on an empty one?); start it on the run's own store "
            "(mlflow server --backend-store-uri THAT_STORE), then sync again"
        )
        return 1
    sender = JournalSender(
        journal, client, notify=lambda line: print(line, file=sys.stderr), say_outages=False
    )
    if not sender.send_pending():
        refuse(
            f"{uri} stopped answering ({sender.outage.reason}); what it has not taken stays in "
            f"{journal.path}: run this again once it answers."
        )
        return 1
    status = client.get_run(record.run_id).info.status
    _say(f"Sent {what} to run {record.run_id} ({run.info.run_name}) at {uri}: it is {status}.")
    return 0


def _say(text: str) -> None:
    """A line of the command's, in lines of 100 columns (a path or an address kept whole)."""
    print(for_stream(text, sys.stdout))
