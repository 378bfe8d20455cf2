"""A run's tracking journal: every write of a tracked run, on disk before it is sent.

The tracking process appends each write (params, tags, metric points with their step and time,
artifacts as paths, the run's end) as one JSON line to `RUN_DIR/tracking/<run id>.jsonl`, and
sends the lines in order; `<run id>.sent` holds the byte offset of the first line the store has
not acknowledged. A store that cannot be reached (a tracking server that is down) costs nothing
but a longer journal: what is unsent is sent when it answers again, or by `python -m framework
sync RUN_DIR` after the run. The offset only moves past lines the store acknowledged, so nothing
is sent twice but a batch whose acknowledgement was lost (whose metric points, carrying their own
times, MLflow's SQL stores recognise and keep once).

While a process holds a journal open it holds an exclusive lock on it (flock), so that `sync`
never sends the lines that the run's own tracking process is sending.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

#: The folder of a run directory that holds its journals.
FOLDER = "tracking"
SUFFIX = ".jsonl"
SENT_SUFFIX = ".sent"
#: The first line of a journal: which run of which store its lines belong to.
FORMAT = 1
#: Entries read at a time when sending.
READ_AHEAD = 5000
#: What each kind of line holds, as its summary counts it.
_COUNTED = {"metrics": "metric point", "params": "param", "tags": "tag"}


class JournalBusy(RuntimeError):
    """Another process (the run's own tracking process) holds the journal open."""


@dataclass(frozen=True)
class RunRecord:
    """Where a journal's lines go: a run of an experiment in a tracking store."""

    uri: str
    experiment: str
    experiment_id: str
    run_id: str


@dataclass(frozen=True)
class Entry:
    """One journal line, and the offset just past it (what `mark_sent` takes once it is sent)."""

    op: str
    data: dict[str, Any]
    end: int


class Journal:
    """An append-only file of a run's writes and the offset of its first unsent line."""

    def __init__(self, path: Path, record: RunRecord, handle: IO[bytes]) -> None:
        self.path = path
        self.record = record
        self._handle = handle
        self._lock = threading.Lock()
        self._size = handle.seek(0, os.SEEK_END)
        self._sent = _read_offset(path.with_suffix(SENT_SUFFIX), default=_header_end(path))

    @classmethod
    def open(cls, folder: Path, record: RunRecord) -> Journal:
        """The run's journal in `folder`, created, or reopened to append (a resumed run's)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{record.run_id}{SUFFIX}"
        handle = path.open("ab")
        try:
            _lock(handle, path)
            if handle.seek(0, os.SEEK_END) == 0:
                handle.write(_line({"journal": FORMAT, **asdict(record)}))
                handle.flush()
            _end_torn_line(handle, path)
        except BaseException:
            handle.close()
            raise
        return cls(path, read_record(path), handle)

    @classmethod
    def reopen(cls, path: Path) -> Journal:
        """An existing journal, to send what it holds unsent (JournalBusy while its run is tracked)."""
        record = read_record(path)
        handle = path.open("ab")
        try:
            _lock(handle, path)
            _end_torn_line(handle, path)
        except BaseException:
            handle.close()
            raise
        return cls(path, record, handle)

    def append(self, op: str, **data: Any) -> None:
        """One line, written through to the operating system (it survives this process's death)."""
        line = _line({"op": op, **data})
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            self._size += len(line)

    def unsent(self, limit: int = READ_AHEAD) -> list[Entry]:
        """Up to `limit` whole lines from the first unsent one, in order."""
        return self.read(self._sent, limit)

    def read(self, start: int, limit: int = READ_AHEAD) -> list[Entry]:
        """Up to `limit` whole lines from the offset `start` (a line's start), in order."""
        entries: list[Entry] = []
        with self.path.open("rb") as f:
            f.seek(start)
            offset = start
            for raw in f:
                if not raw.endswith(b"\n") or len(entries) >= limit:  # a line still being written
                    break
                offset += len(raw)
                try:
                    data = json.loads(raw)
                except ValueError:  # the torn end of a line a killed machine did not finish
                    continue
                entries.append(Entry(str(data.pop("op")), data, offset))
        return entries

    def entries(self, *, unsent_only: bool) -> Iterator[Entry]:
        """Every line (after the header), or every unsent one, in order."""
        start = self._sent if unsent_only else _header_end(self.path)
        while batch := self.read(start):
            yield from batch
            start = batch[-1].end

    def mark_sent(self, offset: int) -> None:
        """Everything before `offset` was acknowledged by the store: never send it again."""
        # This process's own count first: where the file cannot be written (a full disk), what was
        # sent is still not sent again; only `sync` after a crash would repeat it.
        self._sent = offset
        sent = self.path.with_suffix(SENT_SUFFIX)
        partial = sent.with_name(f".{sent.name}.{os.getpid()}.partial")
        partial.write_text(str(offset))
        os.replace(partial, sent)  # whole or not at all: a crash leaves the previous offset

    def all_sent(self) -> bool:
        with self._lock:
            return self._sent >= self._size

    def describe_unsent(self) -> str:
        """'12 metric points, 1 artifact and the run's end (FINISHED)': what is still to send."""
        counts = dict.fromkeys(("metric point", "param", "tag", "artifact"), 0)
        status = ""
        for entry in self.entries(unsent_only=True):
            if entry.op == "end":
                status = str(entry.data["status"])
            elif entry.op == "artifact":
                counts["artifact"] += 1
            else:
                counts[_COUNTED[entry.op]] += len(entry.data[entry.op])
        parts = [f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counts.items() if n]
        if status:
            parts.append(f"the run's end ({status})")
        if len(parts) > 1:
            return f"{', '.join(parts[:-1])} and {parts[-1]}"
        return parts[0] if parts else "nothing"

    def ended(self) -> bool:
        """Whether the journal holds the run's end (its status): a run killed outright has none."""
        return any(entry.op == "end" for entry in self.entries(unsent_only=False))

    def close(self) -> None:
        """Onto the disk, then the lock released (and `sync` may send what is left)."""
        with contextlib.suppress(OSError):
            os.fsync(self._handle.fileno())
        with contextlib.suppress(OSError):
            self._handle.close()


def read_record(path: Path) -> RunRecord:
    """The run a journal belongs to, from its first line; ValueError if it is not a journal."""
    try:
        with path.open("rb") as f:
            first = json.loads(f.readline())
        return RunRecord(**{k: str(first[k]) for k in ("uri", "experiment", "experiment_id", "run_id")})
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a run's tracking journal ({e})") from None


def journals(where: Path) -> list[Path]:
    """The journals of a run directory (or its tracking folder, or one journal file)."""
    if where.is_file():
        return [where]
    folder = where if where.name == FOLDER and not (where / FOLDER).is_dir() else where / FOLDER
    return sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime)


def sync_notice(left: Mapping[str, str]) -> str:
    """What a run's end left unsent, where, and (its last line) the one command that sends it."""
    if left.get("reason"):
        what = f"{left['store']} does not answer ({left['reason']})"
    else:
        what = f"{left['store']} did not take everything in time (tracking.finish_timeout_s)"
    return (
        f"tracking: {what}: {left['unsent']} are kept in {left['journal']}. Once it answers, send "
        f"them with:\n    python -m framework sync {shlex.quote(left['run_dir'])}"
    )


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, separators=(", ", ": ")) + "\n").encode()


def _end_torn_line(handle: IO[bytes], path: Path) -> None:
    """A line cut short (its writer's machine died) is ended, so that the next one stays whole."""
    with path.open("rb") as f:
        if f.seek(0, os.SEEK_END) and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n":
            handle.write(b"\n")
            handle.flush()


def _header_end(path: Path) -> int:
    with path.open("rb") as f:
        return len(f.readline())


def _read_offset(path: Path, *, default: int) -> int:
    try:
        return max(int(path.read_text().strip()), default)
    except (OSError, ValueError):
        return default


def _lock(handle: IO[bytes], path: Path) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise JournalBusy(
            f"{path} is open in another process: the run's own tracking, which sends it itself. "
            "Run this once that run has ended."
        ) from None
