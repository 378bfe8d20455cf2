"""The sweep the tuning of search=ray_async runs: batch_size × max_wait_ms on 9x9 Gomoku, a child run per
pair under one parent, which maps perf/sims_per_s over the grid (a heat map) and tabulates it."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow

BATCH_SIZES, MAX_WAITS = ("8", "32"), ("1", "5")
#: A few moves of each job: the tuning figures are logged from the first self-play moves on and when
#: a run ends, so a sweep this short maps them too (no training phase is reached).
TINY = [
    "total_steps=48",
    "agent.parallel_games=8",
    "agent.min_replay=32",
    "agent.train_every=64",
    "agent.updates_per_phase=1",
    "agent.batch_size=16",
    "agent.gating=false",
    "search.num_simulations=4",
    "agent.eval_simulations=null",
    "threads=1",
    "search.inference_num_cpus=0.5",
    "agent.workers=0",  # self-play in each job's process, its leaves batched to the inference actor
    "env.eval_opponents=[random]",
    "objective.metric=eval/random/score",
    "eval.every_steps=0",
    "eval.at_start=false",
    "eval.episodes=2",
    "checkpoint.every_steps=0",
    "log_every_s=0.2",
    "progress=off",
]


def test_a_batch_size_by_max_wait_sweep_maps_the_simulation_rate_on_its_parent(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    r = cli(
        "-m",
        "experiment=gomoku_9x9",
        "search=ray_async",
        f"search.batch_size={','.join(BATCH_SIZES)}",
        f"search.max_wait_ms={','.join(MAX_WAITS)}",
        *TINY,
        f"ray.address={ray_session.address}",
        timeout=300,
    )
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 4 runs (4 FINISHED)." in r.stdout, r.output[-3000:]

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert parent.info.status == "FINISHED"
    children = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4 == len(runs) - 1
    assert {c.info.status for c in children} == {"FINISHED"}
    names = {c.info.run_name.split(" cfg:")[0] for c in children}
    assert names == {f"bs{b} mwm{w} alphazero-s0 gomoku_9x9" for b in BATCH_SIZES for w in MAX_WAITS}, names
    assert all(c.data.metrics.get("perf/sims_per_s", 0) > 0 for c in children)

    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"heatmap_perf_sims_per_s.png", "sweep_summary.csv"} <= artifacts, artifacts
    heatmap = Path(
        client.download_artifacts(parent.info.run_id, "heatmap_perf_sims_per_s.png", str(tmp_path))
    )
    assert heatmap.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    table = Path(client.download_artifacts(parent.info.run_id, "sweep_summary.csv", str(tmp_path)))
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert len(rows) == 4
    assert {(row["search.batch_size"], row["search.max_wait_ms"]) for row in rows} == {
        (b, w) for b in BATCH_SIZES for w in MAX_WAITS
    }
    assert all(float(row["perf/sims_per_s"]) > 0 for row in rows), rows
