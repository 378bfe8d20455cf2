"""search=ray_async end to end through `python -m framework`: self-play in Ray workers with the tuning
figures in MLflow, a 2-node cluster that gets a worker on each node, and Ctrl-C leaving no Ray
process of the run's own behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.alphazero.test_cli import SHORT
from tests.conftest import start_cli

pytestmark = pytest.mark.slow

RAY_ASYNC = [
    *SHORT,
    "search=ray_async",
    "search.batch_size=8",
    "search.max_wait_ms=2",
    "search.inference_num_cpus=0.5",
]
PERF = {
    "perf/sims_per_s",
    "perf/games_per_s",
    "perf/batch_fill",
    "perf/queue_wait_ms",
    "perf/inflight_mean",
    "perf/inference_ms",
    "perf/search_sims_per_s",
    "perf/selfplay_workers",
}


def only_run(tmp_path: Path) -> tuple[MlflowClient, Any]:
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    return client, run


def test_self_play_in_ray_workers_trains_gates_evaluates_and_logs_the_tuning_figures(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    r = cli(*RAY_ASYNC, f"ray.address={ray_session.address}", "search.workers=2", "hydra.run.dir=outputs/run")
    assert r.returncode == 0, r.output[-3000:]
    assert "self-play: 2 Ray worker(s) on 1 node" in r.output
    _, run = only_run(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.params["search.name"] == "ray_async"
    assert set(run.data.metrics) >= PERF, sorted(set(run.data.metrics))
    metrics = run.data.metrics
    assert 0 < metrics["perf/batch_fill"] <= 1
    assert metrics["perf/selfplay_workers"] == 2
    assert {"gate/score", "eval/mcts50/score", "train/policy_loss"} <= set(metrics)


def _descendants(pid: int) -> set[int]:
    """The processes under `pid` (from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_until_self_play(tmp_path: Path) -> tuple[subprocess.Popen[str], list[str]]:
    args = [*RAY_ASYNC, "total_steps=1000000", "hydra.run.dir=outputs/run"]
    p = start_cli(*args, cwd=tmp_path)
    assert p.stdout is not None
    lines = []
    deadline = time.monotonic() + 180
    for line in p.stdout:
        lines.append(line)
        if "self-play: 1 Ray worker(s)" in line:
            break
        assert time.monotonic() < deadline, "no self-play worker started in 180 s"
    assert p.poll() is None, "".join(lines)[-3000:]
    time.sleep(3)
    return p, lines


def _wait_gone(processes: set[int], seconds: float) -> list[bytes]:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in processes if _alive(pid)]


def test_ctrl_c_ends_the_run_killed_and_stops_the_local_ray_it_started(tmp_path: Path) -> None:
    p, lines = _start_until_self_play(tmp_path)
    ray_processes = _descendants(p.pid)
    assert len(ray_processes) >= 3, ray_processes  # Ray's servers, the inference actor, the worker
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    out = "".join(lines) + out
    assert p.returncode == 130, out[-3000:]
    assert "KILLED at step" in out
    assert not _wait_gone(ray_processes, 30)
    _, run = only_run(tmp_path)
    assert run.info.status == "KILLED"


def test_a_run_killed_outright_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    """SIGKILL: the run cannot stop its Ray; its reaper (framework/ray_reaper.py) does."""
    from framework.ray_reaper import ray_descendants

    p, _ = _start_until_self_play(tmp_path)
    ray_processes = set(ray_descendants(p.pid))
    assert len(ray_processes) >= 4, ray_processes  # gcs, raylet, the actor and the worker at least
    p.kill()
    p.communicate(timeout=60)
    left = _wait_gone(ray_processes, 40)
    assert not left, left


def test_a_two_node_cluster_gets_a_self_play_worker_on_each_node(cli: Any, tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "token")
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 2})
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        r = cli(
            *RAY_ASYNC,
            f"ray.address={cluster.address}",
            "search.workers=2",
            "hydra.run.dir=outputs/run",
            env={"RAY_AUTH_MODE": "token"},
        )
        assert r.returncode == 0, r.output[-3000:]
        assert "self-play: 2 Ray worker(s) on 2 node(s)" in r.output
        _, run = only_run(tmp_path)
        assert run.info.status == "FINISHED"
    finally:
        cluster.shutdown()
