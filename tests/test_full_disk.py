"""A disk that fills at a checkpoint: the run ends FAILED in one message naming the path, the earlier
checkpoints intact, MLflow told; once there is room, resume= goes on. On a real, small tmpfs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from framework.checkpoint import find_latest, read_state
from tests.conftest import run_cli

#: Two of this run's checkpoints (1.1 MB each) and its small files fit; a third, which it keeps, does not.
SMALL = "2600k"
RUN = [
    "total_steps=1000",
    "eval.every_steps=0",
    "eval.at_start=false",
    "eval.episodes=1",
    "checkpoint.every_steps=200",
    "checkpoint.keep=3",
    "agent.learning_starts=100",
    "progress=log",
]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of SMALL bytes at tmp_path/small (mounting needs root, which the CI machine is)."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.fail("this test mounts a small tmpfs, which needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_at_a_checkpoint_fails_the_run_in_one_message_and_resume_goes_on(
    tmp_path: Path, small_disk: Path
) -> None:
    run_dir = small_disk / "run"
    r = run_cli(*RUN, f"hydra.run.dir={run_dir}", cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-5000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: The checkpoint of step 600 could not be written to {run_dir}/checkpoints: No space left "
        f"on device (the last one, {run_dir}/checkpoints/step_0000000400, is intact); make room there, "
        "then resume"
    ], r.stderr
    assert "Run FAILED at step 600 of 1000." in r.stderr
    assert f"continue with     python -m framework resume={run_dir}" in r.stderr
    assert len(out.splitlines()) < 30, out

    # The earlier checkpoints are whole; no half-written one is left taking the space.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "latest",
        "step_0000000200",
        "step_0000000400",
    ]
    latest = find_latest(run_dir)
    assert latest is not None and read_state(latest)["step"] == 400

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert run.info.status == "FAILED"
    assert "No space left on device" in run.data.tags["framework.error"]

    subprocess.run(["mount", "-o", "remount,size=20m", str(small_disk)], check=True)
    again = run_cli(f"resume={run_dir}", "progress=log", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resumed at step 400" in again.stdout + again.stderr
    assert "Run FINISHED at step 1000 of 1000." in again.stdout
    (resumed,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert resumed.info.run_id == run.info.run_id and resumed.info.status == "FINISHED"
