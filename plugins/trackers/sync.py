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
    if not found:
        _say(f"Nothing to send: {args.run_dir} holds no tracking journal (tracking/*.jsonl).")
        return 0
    return max(_sync(path, args.uri) for path in found)


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
    from .mlflow_session import quiet_libraries

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
