"""Fixtures the AlphaZero command-line tests share: brains to close, a tiny trained 9x9 run to play."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.alphazero.brain import Brain
from tests.conftest import run_cli


@pytest.fixture
def brains() -> Iterator[list[Brain]]:
    started: list[Brain] = []
    yield started
    for brain in started:
        brain.close()


TINY = [
    "experiment=gomoku_9x9",
    "total_steps=64",
    "agent.blocks=1",
    "agent.channels=16",
    "agent.parallel_games=8",
    "agent.min_replay=32",
    "agent.train_every=32",
    "agent.updates_per_phase=2",
    "agent.batch_size=32",
    "agent.gating=false",
    "search.num_simulations=8",
    "agent.eval_simulations=null",
    "threads=1",
    "env.eval_opponents=[random]",
    "objective.metric=eval/random/score",
    "eval.at_start=false",
    "eval.episodes=2",
    "progress=off",
    "hydra.run.dir=outputs/run",
]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tiny trained 9x9 run: (the directory it ran in, its MLflow run id); one per test process, as the
    tests that play it leave it as they found it."""
    cwd = tmp_path_factory.mktemp("trained")
    r = run_cli(*TINY, cwd=cwd)
    assert r.returncode == 0, r.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    return cwd, run.info.run_id
