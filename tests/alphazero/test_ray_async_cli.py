"""search=ray_async end to end through `python -m framework`: self-play in Ray workers, one on each
node of a 2-node cluster, with the tuning figures in MLflow, and a run's local Ray leaving neither a
process nor a session directory behind, whether the run ends, is stopped or is killed."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from framework_plugins.ray_runtime import reaper as ray_reaper
from framework_plugins.ray_runtime import runtime as ray_runtime
from tests.alphazero.test_cli import SHORT
from tests.conftest import CliResult, start_cli

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


#: A run that starts a local Ray, plays a few moves in the run's process and ends.
BRIEF = [
    "experiment=gomoku_6x6",
    "total_steps=32",
    "agent.parallel_games=8",
    "agent.min_replay=100000",
    "search.num_simulations=8",
    "env.eval_opponents=[random]",
    "objective.metric=eval/random/score",
    "eval.every_steps=0",
    "eval.at_start=false",
    "eval.episodes=1",
    "checkpoint.every_steps=0",
    "search=ray_async",
    "search.inference_num_cpus=0.5",
    "agent.workers=0",
    "hydra.run.dir=outputs/run",
]


@pytest.fixture
def ray_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Ray's temp directory for the runs this test starts, so that only their sessions are in it;
    short, as Ray's socket paths in it must fit in 107 bytes."""
    base = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(base))
    yield base / "ray"
    shutil.rmtree(base, ignore_errors=True)


def sessions_left(ray_dir: Path) -> list[str]:
    assert ray_dir.is_dir(), "the run started no local Ray"
    return sorted(p.name for p in ray_dir.iterdir() if p.name.startswith("session"))


def test_a_run_leaves_no_session_directory_of_its_local_ray(cli: Any, ray_tmp: Path) -> None:
    r: CliResult = cli(*BRIEF)
    assert r.returncode == 0, r.output[-3000:]
    assert "Run FINISHED at step" in r.stdout
    assert sessions_left(ray_tmp) == []


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


#: A progress line's step.
STEP = re.compile(r"\bstep (\d+)/")


def _start_until_self_play(tmp_path: Path) -> tuple[subprocess.Popen[str], list[str]]:
    # 1 worker and 3 inference actors of 0.5 CPU: 2.5 CPUs, shared on a 2-CPU machine.
    args = [*RAY_ASYNC, "total_steps=1000000", "ray.num_cpus=4", "hydra.run.dir=outputs/run"]
    p = start_cli(*args, cwd=tmp_path)
    assert p.stdout is not None
    lines = []
    deadline = time.monotonic() + 180
    steps: list[int] | None = None  # the run's steps its progress lines say once the worker started
    for line in p.stdout:
        lines.append(line)
        if steps is None and "self-play: 1 Ray worker(s)" in line:
            steps = []
        if steps is not None:
            steps += [int(m.group(1)) for m in STEP.finditer(line)]
            if len(set(steps)) > 1:  # moves have come in since: self-play plays
                break
        assert time.monotonic() < deadline, "no self-play worker played in 180 s"
    assert p.poll() is None, "".join(lines)[-3000:]
    return p, lines


def _wait_gone(processes: set[int], seconds: float) -> list[bytes]:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in processes if _alive(pid)]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_ctrl_c_or_sigterm_ends_the_run_killed_and_stops_the_local_ray_it_started(
    tmp_path: Path, ray_tmp: Path, stop: signal.Signals
) -> None:
    """SIGTERM (a scheduler's, `docker stop`'s) is Ctrl-C even though ray.init replaced the run's
    handler with its own: KILLED, a last checkpoint, the resume command, no Ray left."""
    p, lines = _start_until_self_play(tmp_path)
    assert len(sessions_left(ray_tmp)) == 2  # the session, and session_latest
    ray_processes = _descendants(p.pid)
    assert len(ray_processes) >= 3, ray_processes  # Ray's servers, the inference actor, the worker
    sent = time.monotonic()
    p.send_signal(stop)
    out, _ = p.communicate(timeout=120)
    took = time.monotonic() - sent
    out = "".join(lines) + out
    assert p.returncode == 130, out[-3000:]
    assert "KILLED at step" in out
    assert "SIGTERM received" not in out and "Traceback" not in out, out[-3000:]
    assert f"python -m framework resume={(tmp_path / 'outputs' / 'run').resolve()}" in out
    assert (tmp_path / "outputs" / "run" / "checkpoints" / "latest").is_file()
    if stop == signal.SIGTERM:
        assert took < 30, f"SIGTERM took {took:.1f} s to end the run"  # about 3 s here
    assert not _wait_gone(ray_processes, 30)
    assert sessions_left(ray_tmp) == []
    _, run = only_run(tmp_path)
    assert run.info.status == "KILLED"


@pytest.mark.parametrize("pause_s", [0.3, 1.5], ids=["while_stopping", "while_ending"])
def test_a_second_sigterm_aborts_at_once_and_leaves_no_ray_behind(
    tmp_path: Path, ray_tmp: Path, pause_s: float
) -> None:
    """A scheduler that sends SIGTERM twice (or a user pressing Ctrl-C twice) is not kept waiting:
    the run's end is cut short, said in a line, and its local Ray still goes (its reaper ends it).
    Once the run has ended, a signal during its local Ray's shutdown (a C library's reset the
    handler there) ends the process by the signal itself: at once all the same."""
    p, lines = _start_until_self_play(tmp_path)
    ray_processes = _descendants(p.pid)
    p.send_signal(signal.SIGTERM)
    time.sleep(pause_s)
    second = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    took = time.monotonic() - second
    out = "".join(lines) + out
    assert p.returncode in (130, -signal.SIGTERM), out[-3000:]
    assert took < 10, f"the second SIGTERM took {took:.1f} s to end the process"
    assert "Traceback" not in out and "SIGTERM received" not in out, out[-3000:]
    assert "Aborted while the run was ending" in out or "KILLED at step" in out, out[-3000:]
    assert not _wait_gone(ray_processes, 30)
    deadline = time.monotonic() + 20
    while sessions_left(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sessions_left(ray_tmp) == []


def test_a_run_killed_outright_leaves_no_ray_process_or_session_directory_behind(
    tmp_path: Path, ray_tmp: Path
) -> None:
    """SIGKILL: the run cannot stop its Ray; its reaper (plugins/ray_runtime/reaper.py) does."""
    from framework_plugins.ray_runtime.reaper import ray_descendants

    p, _ = _start_until_self_play(tmp_path)
    ray_processes = set(ray_descendants(p.pid))
    assert len(ray_processes) >= 4, ray_processes  # gcs, raylet, the actor and the worker at least
    assert len(sessions_left(ray_tmp)) == 2
    p.kill()
    p.communicate(timeout=60)
    left = _wait_gone(ray_processes, 40)
    assert not left, left
    deadline = time.monotonic() + 20  # the reaper removes the directory once the processes are gone
    while sessions_left(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sessions_left(ray_tmp) == []


def test_self_play_in_ray_workers_one_on_each_node_trains_gates_evaluates_and_logs_the_tuning_figures(
    cli: Any, tmp_path: Path
) -> None:
    """A cluster the run joins, of two nodes: a worker on each (one node's line: test_chaos.py)."""
    from ray.cluster_utils import Cluster  # RAY_AUTH_MODE=token: tests/conftest.py

    cluster = Cluster(
        initialize_head=True,
        connect=False,
        # No dashboard: nothing here needs one, it takes CPU, and the forkserver of its module
        # processes leaves a temp folder (pymp-*) behind when the cluster ends.
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "_system_config": dict(ray_runtime.SYSTEM_CONFIG),
        },
    )
    session = cluster.head_node.get_session_dir_path()
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        r = cli(
            *RAY_ASYNC,
            f"ray.address={cluster.address}",
            "agent.workers=2",
            "hydra.run.dir=outputs/run",
            env={"RAY_AUTH_MODE": "token"},
        )
    finally:
        cluster.shutdown()
        ray_reaper.remove_session(session)  # its logs and sockets in /tmp/ray, as a run's own Ray does
    assert r.returncode == 0, r.output[-3000:]
    assert "self-play: 2 Ray worker(s) on 2 node(s)" in r.output
    _, run = only_run(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.params["search.name"] == "ray_async"
    assert set(run.data.metrics) >= PERF, sorted(set(run.data.metrics))
    metrics = run.data.metrics
    assert 0 < metrics["perf/batch_fill"] <= 1
    assert metrics["perf/selfplay_workers"] == 2
    assert {"gate/score", "eval/mcts50/score", "train/policy_loss"} <= set(metrics)
