"""Chaos: self-play workers and inference actors killed at random points of a real run
(`python -m framework ... search=ray_async`), several times, both kinds.

The run must finish; the restarts it counts must equal the kills; no pending visit may have gone
below zero; and no batch may have been answered with weights older than the version its search
began with (the manager fails the run if one is: a restarted inference actor must fetch the
current weights before it answers)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.alphazero.test_cli import SHORT

pytestmark = pytest.mark.slow

KINDS = {"worker": "framework-selfplay-", "inference": "framework-inference-"}


def live_actors(prefix: str) -> list[tuple[str, str]]:
    import ray

    return [
        (a["name"], a["namespace"])
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(prefix) and not a["name"].endswith("-weights")
    ]


def kill_one(kind: str, rng: random.Random) -> bool:
    """SIGKILL one live actor of `kind`, once it answers (so that each kill is one incarnation)."""
    import ray

    found = live_actors(KINDS[kind])
    if not found:
        return False
    name, namespace = rng.choice(found)
    try:
        pid = ray.get(ray.get_actor(name, namespace=namespace).where.remote(), timeout=20)["pid"]
    except Exception:  # restarting, or the run just ended
        return False
    os.kill(pid, signal.SIGKILL)
    return True


def test_a_run_whose_workers_and_inference_actors_are_killed_at_random_finishes_counting_each(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    rng = random.Random(7)
    kills = {"worker": 0, "inference": 0}
    plan = ["worker", "inference", "worker", "inference"]
    stop = threading.Event()

    log = tmp_path / "outputs/run/framework.log"

    def playing() -> bool:
        """Whether self-play has made its first moves (the kills fall during the run, not its start)."""
        try:
            return "self-play: 2 Ray worker(s)" in log.read_text()
        except OSError:
            return False

    def chaos() -> None:
        while not playing():
            if stop.wait(0.5):
                return
        deadline = time.monotonic() + 240
        while plan and not stop.is_set() and time.monotonic() < deadline:
            if stop.wait(rng.uniform(2.5, 5.0)):
                return
            if kill_one(plan[0], rng):
                kills[plan.pop(0)] += 1

    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    try:
        r = cli(
            *SHORT,
            "total_steps=4000",
            "agent.gating=false",  # every training phase publishes a new version
            "eval.every_steps=0",
            "checkpoint.every_steps=0",
            f"ray.address={ray_session.address}",
            "search=ray_async",
            "search.workers=2",
            "search.batch_size=8",
            "search.inference_num_cpus=0.5",
            "search.max_restarts=4",
            "hydra.run.dir=outputs/run",
            timeout=540,
        )
    finally:
        stop.set()
        thread.join(30)
    assert r.returncode == 0, r.output[-4000:]
    assert kills == {"worker": 2, "inference": 2}, f"the run ended before every kill: {kills}"
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    assert metrics["perf/worker_restarts"] == kills["worker"]
    assert metrics["perf/inference_restarts"] == kills["inference"]
    assert metrics["perf/pending_clamped"] == 0
    versions = client.get_metric_history(run.info.run_id, "selfplay/weights_version")
    assert max(m.value for m in versions) >= 3  # new weights were published while actors died
