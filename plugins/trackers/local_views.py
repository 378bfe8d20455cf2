"""A local MLflow store as `ui` and `compare` share it: the tracking a command line names, the `ui`
server a call started on the store (its record, whether it answers), and the page `compare` last
wrote for an experiment."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .store_template import cache_dir

SQLITE = "sqlite:///"


def tracking(overrides: list[str]) -> tuple[str, str]:
    """The tracking URI and experiment of the config these overrides compose (the run's defaults)."""
    from omegaconf import OmegaConf

    from framework.app import compose
    from framework.errors import ConfigError

    wrong = [o for o in overrides if not o.lstrip("+").startswith(("tracking.", "tracking="))]
    if wrong:
        raise ValueError(f"{' '.join(wrong)}: `ui` takes tracking.uri=... and tracking.experiment=... only")
    try:
        cfg = compose(overrides)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # Hydra's refusal of an override: one line
        raise ValueError(str(e).splitlines()[0]) from None
    uri = OmegaConf.select(cfg, "tracking.uri", default=None)
    if uri is None:
        raise ValueError("tracking is off in this config (tracking=none): give tracking=mlflow")
    from .mlflow_tracker import absolute_uri

    return absolute_uri(str(uri)), str(OmegaConf.select(cfg, "tracking.experiment", default="framework"))


def running(uri: str) -> dict[str, Any] | None:
    """The server a `ui` call started on this store, if it still runs and answers."""
    try:
        found = json.loads(record_path(uri).read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.get("uri") == uri and answers(str(found["address"])) else None


def answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"{address}/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def record_path(uri: str) -> Path:
    return cache_dir() / f"ui-{key(uri)}.json"


def key(uri: str) -> str:
    return hashlib.sha1(uri.encode()).hexdigest()[:12]


def remember_page(uri: str, experiment: str, page: Path) -> None:
    """The latest page for this store and experiment, which `ui` names."""
    with_key = hashlib.sha1(f"{uri}\n{experiment}".encode()).hexdigest()[:12]
    record = cache_dir() / f"compare-{with_key}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"page": str(page.resolve()), "uri": uri, "experiment": experiment}))


def latest_page(uri: str, experiment: str) -> Path | None:
    """The page `compare` last wrote for this store and experiment, if it is still there."""
    with_key = hashlib.sha1(f"{uri}\n{experiment}".encode()).hexdigest()[:12]
    try:
        page = Path(json.loads((cache_dir() / f"compare-{with_key}.json").read_text())["page"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return page if page.is_file() else None
