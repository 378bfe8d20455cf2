"""A new SQLite tracking store as a copy of an empty one.

MLflow builds a new store's schema by running every one of its migrations, seconds of CPU for each
new `mlflow.db` (each new working directory, each test). The empty schema of an MLflow version is
built once, kept in the user's cache directory, and copied: the copy is the file MLflow would have
built, with no experiment in it yet (MLflow adds its Default experiment, with this store's own
artifact location, when it first opens the copy).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: Where the empty schemas are kept (default: $XDG_CACHE_HOME/framework, or ~/.cache/framework).
CACHE_ENV = "FRAMEWORK_CACHE_DIR"
#: The longest wait for another process's first opening of a store (a migration takes seconds).
OPEN_TIMEOUT_S = 120.0
_THREADS = threading.Lock()

log = logging.getLogger("framework.tracking")


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "framework"


def place(path: Path) -> bool:
    """Put an empty store at `path` unless something is there already (another process's new store
    included: the copy is linked into place, never over a file). False when no copy could be made,
    for whatever reason: MLflow then builds the store itself."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        template = _template()
        shutil.copyfile(template, partial)
        with contextlib.suppress(FileExistsError):
            os.link(partial, path)
        return True
    except Exception as e:  # a cache or file system that does not allow it: MLflow's own way
        log.debug("no store template for %s: %s", path, e)
        return False
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


@contextlib.contextmanager
def first_opening(path: Path) -> Iterator[None]:
    """Held while a process creates the store at `path` and opens it the first time (when MLflow
    completes a store's schema), so that no two of this project's processes, nor two threads, build
    one store at once. The lock is on the store's folder (flock: nothing is left behind); where
    there is no flock, or after OPEN_TIMEOUT_S, the opening goes ahead unguarded."""
    with _THREADS:
        try:
            import fcntl
        except ImportError:  # Windows
            yield
            return
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            deadline = time.monotonic() + OPEN_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        log.warning("%s: another process has opened it for %.0f s", path, OPEN_TIMEOUT_S)
                        break
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # releases the lock


def _template() -> Path:
    """The empty schema of this MLflow version, built (once) if the cache lacks it."""
    import mlflow
    import sqlalchemy
    from mlflow.store.db.utils import _all_tables_exist, _get_latest_schema_revision, _initialize_tables

    folder = cache_dir()
    target = folder / f"mlflow-{mlflow.__version__}-{_get_latest_schema_revision()}.db"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{target.name}.{os.getpid()}.partial"
    try:
        engine = sqlalchemy.create_engine(f"sqlite:///{partial}")
        try:
            _initialize_tables(engine)
            if not _all_tables_exist(engine):
                raise RuntimeError("the schema MLflow built lacks tables")
        finally:
            engine.dispose()
        os.replace(partial, target)  # whole, or not at all (two processes building it: the last wins)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return target
