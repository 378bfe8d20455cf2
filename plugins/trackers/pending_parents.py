"""A sweep's parent run whose end its tracking store did not take (the server was down as the sweep
ended): kept in the sweep's directory (`tracking/parent-<run id>.json`) for `sync SWEEP_DIR`, which
sends its children's journals first, then ends the parent and makes its summary (table, plots, best)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .journal import FOLDER, journals

PREFIX = "parent-"


def keep(
    sweep_dir: str, uri: str, run_id: str, status: str, summary: Mapping[str, Any], end_time: float | None
) -> Path:
    """Keep the parent's end for `sync`; the file it is kept in."""
    folder = Path(sweep_dir).resolve() / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PREFIX}{run_id}.json"
    record = {"uri": uri, "run_id": run_id, "status": status, "summary": dict(summary), "end_time": end_time}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record))
    os.replace(temporary, path)
    return path


def pending(where: Path) -> list[Path]:
    """The parents' ends kept in a sweep directory (or in the sweep directory of one of its jobs)."""
    found: list[Path] = []
    for folder in (where, where.parent):
        found += sorted((folder / FOLDER).glob(f"{PREFIX}*.json"))
    return found


def children_journals(path: Path) -> list[Path]:
    """The journals of the jobs of the sweep whose parent's end is kept at `path`."""
    sweep_dir = path.parent.parent
    return [j for job in sorted(sweep_dir.iterdir()) if job.is_dir() for j in journals(job)]


def end(path: Path, uri: str | None) -> str:
    """End the parent kept at `path` (in its own store, or `uri`), summarised; the file goes. What to say."""
    from mlflow.tracking import MlflowClient

    from .summary_page import address_of
    from .sweep_parents import SweepParents

    record = json.loads(path.read_text())
    target = uri or str(record["uri"])
    client = MlflowClient(tracking_uri=target)
    run = client.get_run(str(record["run_id"]))
    parents = SweepParents(
        lambda: client, lambda: str(run.info.experiment_id), 0.0, address=address_of(target)
    )
    found = parents.end(str(record["run_id"]), str(record["status"]), record["summary"], record["end_time"])
    path.unlink()
    best = f"; best {found['best']}" if "best" in found else ""
    runs = f"{found['runs']} run{'' if found['runs'] == 1 else 's'}"
    return f"Ended the sweep's parent run {run.info.run_name} ({record['status']}): {runs}{best}."
