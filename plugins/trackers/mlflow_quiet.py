"""MLflow's own output kept out of a command's: its INFO lines, run addresses, progress bars and the
warnings it and its database raise that are MLflow's to fix."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings


def quiet_libraries() -> None:
    """MLflow's and its database's INFO lines, its run addresses and known-harmless warnings stay out of
    the run's output; so do the errors MLflow's SQL store logs with their traceback before raising
    them (the exception says it, once)."""
    # MLflow prints a run's address when a server's run ends; the run's summary gives it already.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    # Its progress bars for a checkpoint downloaded to resume or play a run: lines of tqdm in the log.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    for name in ("mlflow", "alembic", "sqlalchemy", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    # SQLAlchemy's deprecation notes about MLflow's own queries are MLflow's to fix, not the user's.
    warnings.filterwarnings("ignore", message=r".*SADeprecationWarning.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    with contextlib.suppress(ImportError):
        from sqlalchemy.exc import SADeprecationWarning

        warnings.filterwarnings("ignore", category=SADeprecationWarning)
