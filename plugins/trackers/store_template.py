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
from pathlib import Path

#: Where the empty schemas are kept (default: $XDG_CACHE_HOME/framework, or ~/.cache/framework).
CACHE_ENV = "FRAMEWORK_CACHE_DIR"

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
