"""What the tracker checks of its tracking URI before anything starts (no MLflow import: the training
process stays light): a server answers; a SQLite store, its folder and its artifact folder can be
written. Each refusal is one line naming the URI or path and what to do."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from framework.errors import ConfigError

log = logging.getLogger("framework.tracking")

SQLITE_PREFIX = "sqlite:///"
#: Where MLflow puts the artifacts of an experiment it creates in a SQLite store: ./mlruns/<id> of
#: the working directory (MLflow's DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH).
DEFAULT_ARTIFACT_ROOT = "mlruns"
ELSEWHERE = (
    "or track elsewhere: tracking.uri=sqlite:///PATH/mlflow.db in a writable folder, or tracking=none."
)


class TrackingUnavailable(ConfigError):
    """The tracking URI cannot be used: nothing was started."""


#: The schemes MLflow tracks to (a SQLAlchemy one may name its driver: postgresql+psycopg2); not a
#: folder (a path, file:), whose store MLflow 3 keeps in maintenance mode and will not open.
SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")


def check_reachable(uri: str, *, timeout_s: float, patience_s: float = 0.0) -> None:
    """Refuse, before anything starts, a tracking URI that cannot work: a scheme MLflow does not
    track to, a server that does not answer (after `patience_s` of asking again), or a SQLite store in
    a folder that does not exist."""
    parsed = urllib.parse.urlparse(uri)
    scheme = parsed.scheme.split("+", 1)[0]
    typo = re.match(r"(https?|sqlite):?/*(.*)", uri)
    if typo and not uri.startswith(f"{typo[1]}://{'/' if typo[1] == 'sqlite' else ''}"):  # http//host
        raise TrackingUnavailable(
            f"tracking.uri={uri} is not a URI: did you mean {typo[1]}://{'/' if typo[1] == 'sqlite' else ''}"
            f"{typo[2]}?"
        )
    if len(scheme) <= 1 or scheme == "file":  # "" or "C": a path
        raise TrackingUnavailable(
            f"tracking.uri={uri}: MLflow no longer tracks to a folder (its file store is in maintenance "
            "mode); give a database, tracking.uri=sqlite:///PATH.db (the default: sqlite:///mlflow.db), "
            "or a server's http(s):// address (`mlflow migrate-filestore` moves a folder's runs into one)"
        )
    if scheme not in SCHEMES:
        raise TrackingUnavailable(
            f"tracking.uri={uri}: MLflow does not track to {parsed.scheme}: URIs; give a "
            f"{', '.join(s + ':' for s in SCHEMES)} URI (the default: tracking.uri=sqlite:///mlflow.db), "
            "or tracking=none"
        )
    began = time.monotonic()
    reason = server_unreachable(uri, timeout_s=timeout_s)
    timed_out = time.monotonic() - began >= 0.9 * timeout_s
    if reason is not None and patience_s > 0:
        reason = _wait_for_server(uri, reason, timeout_s=timeout_s, patience_s=patience_s)
    if reason is not None and parsed.scheme == "https" and "WRONG_VERSION_NUMBER" in reason:
        plain = "http" + uri[len("https") :]
        raise TrackingUnavailable(
            f"The MLflow tracking server tracking.uri={uri} answers, but not in TLS ({reason}): it serves "
            f"plain http: tracking.uri={plain}"
        )
    if reason is not None:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        start = f"`mlflow server --host {parsed.hostname} --port {port}`"
        if port < 1024:  # a port only root may serve on
            start = f"`mlflow server --host {parsed.hostname} --port 5000` and tracking.uri=" + (
                f"{parsed.scheme}://{parsed.hostname}:5000"
            )
        within = f" within {timeout_s:g} s (tracking.check_timeout_s)" if timed_out else ""
        if patience_s:
            within = f" in the {patience_s:g} s this job waited for it (tracking.outage_wait_s)"
        raise TrackingUnavailable(
            f"The MLflow tracking server tracking.uri={uri} does not answer ({reason}){within}. Start "
            f"it ({start}), point tracking.uri at a server that runs, or track "
            "locally: tracking.uri=sqlite:///mlflow.db (viewed with `python -m framework ui`) or "
            "tracking=none."
        )
    if parsed.scheme == "sqlite":
        folder = Path(uri[len(SQLITE_PREFIX) :]).parent
        if not folder.is_dir():
            raise TrackingUnavailable(
                f"tracking.uri={uri}: the folder {folder} does not exist. Create it, or use the default "
                f"local store (tracking.uri=sqlite:///mlflow.db) or tracking=none."
            )


def _wait_for_server(uri: str, reason: str, *, timeout_s: float, patience_s: float) -> str | None:
    """Ask a server that does not answer again until it does (None) or `patience_s` has passed (why
    not): a sweep's job, whose sweep the server answered, waits out a restart."""
    log.warning(
        "The MLflow tracking server %s does not answer (%s); it answered for this sweep: waiting up to "
        "%g s (tracking.outage_wait_s) for it", uri, reason, patience_s,
    )  # fmt: skip
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        left = max(0.1, min(timeout_s, deadline - time.monotonic()))
        found = server_unreachable(uri, timeout_s=left)
        if found is None:
            log.warning("The MLflow tracking server %s answers again: the job starts", uri)
            return None
        reason = found
    return reason


def server_unreachable(uri: str, *, timeout_s: float) -> str | None:
    """Why a tracking server does not answer ('Connection refused'); None when it answers or the URI
    is not a server's."""
    if urllib.parse.urlparse(uri).scheme not in ("http", "https"):
        return None
    probe = f"{uri.rstrip('/')}/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        with urllib.request.urlopen(probe, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:  # it answered: an MLflow server that wants auth, say
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        return str(getattr(e, "reason", e))


def limit_http_waits(timeout_s: int, retries: int) -> None:
    """Bound MLflow's requests to a server, unless the environment sets them: its own defaults (7
    retries, 120 s timeouts) stall a run or a command for minutes on a server gone."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(timeout_s))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(retries))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


def check_writable(uri: str, experiment: str) -> None:
    """Refuse a SQLite store that cannot be written: the store itself, its folder (SQLite writes its
    rollback journal beside the store), or the experiment's local artifact folder. The checks write
    for real (a file made and removed; the store opened for writing), so they hold for root too,
    whom file modes do not stop but read-only mounts and immutable files do."""
    if not uri.startswith(SQLITE_PREFIX):
        return
    store = Path(uri[len(SQLITE_PREFIX) :])
    problem = cannot_create_in(store.parent)
    if problem:
        raise TrackingUnavailable(
            f"tracking.uri={uri}: the store's folder {store.parent} is read-only ({problem}), and SQLite "
            f"writes beside the store. Make the folder writable, {ELSEWHERE}"
        )
    problem = cannot_write(store) if store.exists() else None
    if problem:
        raise TrackingUnavailable(
            f"tracking.uri={uri}: the store {store} is read-only ({problem}). Make it writable, {ELSEWHERE}"
        )
    artifacts = artifact_folder(store, experiment)
    problem = cannot_create_in(_nearest_existing(artifacts)) if artifacts is not None else None
    if problem:
        raise TrackingUnavailable(
            f"tracking.uri={uri}: the artifact folder {artifacts} of experiment {experiment!r} is read-only "
            f"({problem}), and the run's model, config and checkpoint go there. Make it writable, {ELSEWHERE}"
        )


def artifact_folder(store: Path, experiment: str) -> Path | None:
    """The local folder the experiment's artifacts go to (None when they go elsewhere: a server, a
    bucket): the experiment's own, read from the store without writing it, or MLflow's default for
    an experiment it will create."""
    location = None
    if store.exists():
        with contextlib.suppress(sqlite3.Error):
            db = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                row = db.execute(
                    "SELECT artifact_location FROM experiments WHERE name = ? AND lifecycle_stage = 'active'",
                    (experiment,),
                ).fetchone()
            finally:
                db.close()
            location = str(row[0]) if row and row[0] else None
    if location is None:
        return Path.cwd() / DEFAULT_ARTIFACT_ROOT
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme == "file":
        return Path(urllib.parse.unquote(parsed.path))
    return Path(location) if not parsed.scheme or len(parsed.scheme) == 1 else None  # C:\... on Windows


def cannot_create_in(folder: Path) -> str | None:
    """Why no file can be made in `folder` (None if one can): tried, then removed."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".framework-write-check-")
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None


def cannot_write(path: Path) -> str | None:
    """Why `path` cannot be opened for writing (None if it can); it is not changed."""
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as e:
        return e.strerror or str(e)
    return None


def first_reason(text: str) -> str:
    """One line of an error's many: a database's own complaint when there is one (MLflow's SQL errors
    carry the statement and its parameters on the lines after), else the first line."""
    found = re.search(r"\((?:sqlite3|psycopg2|pymysql)\.\w+\) ([^\n]+)", text)
    if found:
        return found.group(1).strip()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else text


def store_name(uri: str) -> str:
    """'the tracking server http://…' or 'the tracking store /path/mlflow.db', for notices."""
    if uri.startswith(("http://", "https://")):
        return f"the tracking server {uri}"
    return f"the tracking store {uri.removeprefix(SQLITE_PREFIX)}"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path
