"""A sweep whose tracking server is down as it ends: its parent's end is kept in the sweep's directory,
said with the one command that sends it (it stayed RUNNING for good, and a traceback ended the sweep),
and `sync SWEEP_DIR` sends the runs' journals, then ends the parent with its summary."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli, start_cli
from tests.test_tracker_outage import PROGRESS, RUN, Output, RestartableServer, running_server

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestartableServer]:
    yield from running_server(tmp_path)


def test_a_sweep_ending_while_its_server_is_down_is_ended_by_the_sync_it_prints(
    server: RestartableServer, tmp_path: Path
) -> None:
    shorter = [o for o in RUN if not o.startswith("total_steps=")] + ["total_steps=6000"]
    uri = f"tracking.uri={server.uri}"
    p = start_cli("-m", "seed=1", *shorter, uri, "tracking.outage_wait_s=1", cwd=tmp_path)
    out = Output(p)
    try:
        out.wait_for(PROGRESS.search, "a progress line")
        server.kill()
        code = out.finish()
    finally:
        if p.poll() is None:
            p.kill()
    text = out.text
    assert code == 0 and "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    assert all(len(line) <= 100 or "/" in line for line in text.splitlines()[-8:]), text[-3000:]
    said = " ".join(text.split())
    assert re.search(r"Sweep FINISHED: its parent run \w+ is not ended yet", said), text[-3000:]
    commands = [
        line.strip() for line in text.splitlines() if line.strip().startswith("python -m framework sync")
    ]
    sweep_dir = next((tmp_path / "multirun").glob("*/*"))
    assert f"python -m framework sync {sweep_dir}" in commands, text[-3000:]

    server.start()
    r = run_cli("sync", str(sweep_dir), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.output[-3000:]
    assert "Ended the sweep's parent run" in " ".join(r.stdout.split()), r.stdout
    client = server.client()
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    (parent,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    (child,) = [run for run in runs if run is not parent]
    assert parent.info.status == child.info.status == "FINISHED", (parent.info, child.info)
    assert "best/eval/return_mean" in parent.data.metrics, parent.data.metrics  # its summary made
    assert not list((sweep_dir / "tracking").glob("parent-*.json"))
    again = run_cli(*shlex.split(f"sync {sweep_dir}"), cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and "Nothing to send" in again.stdout, again.output
