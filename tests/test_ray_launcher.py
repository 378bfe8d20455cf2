"""Sweeps through the Ray launcher (`hydra/launcher=ray`) joined to a running Ray at its address: its jobs
land as test_launchers.py's joblib jobs do, in Ray's workers; the project's defaults where the command
line left them; a refused or failed job said once; SIGTERM stops the sweep as Ctrl-C does. The Ray a
launcher starts itself: test_ray_launcher_own.py."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from framework_plugins.sweeps import ray_launcher as rl
from tests.conftest import FAST, start_cli
from tests.test_launchers import PID_LOG_FORMAT, assert_one_sweep_of_two, wait_for_both_jobs
from tests.test_refusals import assert_no_run


@pytest.mark.slow
def test_a_sweep_through_the_ray_launcher_joins_a_running_ray(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    # The session's Ray was started from the tests' working directory, and its workers inherit neither
    # that of this command nor its environment: the jobs must still find their parent run, the
    # launch dir's ./mlflow.db and its multirun dir. An explicit address needs the token explicitly.
    r = cli(
        "-m",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_session.address}",
        "seed=1,2",
        *FAST,
        "progress=off",
        PID_LOG_FORMAT,
        timeout=90,
        env={"RAY_AUTH_MODE": "token"},
    )
    assert r.returncode == 0, r.output[-3000:]
    assert "Connected to Ray cluster" in r.output and "Started a local Ray" not in r.output
    pids = assert_one_sweep_of_two(tmp_path, "ray")
    assert os.getpid() not in pids.values() and pids["seed=1"] != pids["seed=2"], pids


def ray_launcher_cfg(init: dict[str, Any], remote: dict[str, Any] | None = None) -> DictConfig:
    return OmegaConf.create(
        {
            "hydra": {
                "launcher": {
                    "_target_": rl.RAY_LAUNCHER,
                    "ray": {"init": init, "remote": remote or {}},
                }
            }
        }
    )


def test_the_ray_launcher_gets_the_project_defaults_where_the_command_line_left_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (rl.RAY_LOOPBACK_ENV, "RAY_ADDRESS", "RAY_DEDUP_LOGS", "RAY_COLOR_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    cfg = ray_launcher_cfg({"address": None, "include_dashboard": True}, {"num_gpus": 1})
    rl.ray_launcher_defaults(cfg)
    assert OmegaConf.to_container(cfg.hydra.launcher.ray) == {
        "init": {"address": None, "include_dashboard": True, "object_store_memory": None},
        "remote": {"num_gpus": 1, "max_retries": 0},
    }
    assert os.environ[rl.RAY_LOOPBACK_ENV] == "0"  # the Ray it starts binds 127.0.0.1
    # Each job's last lines whole (not folded with other jobs' alike), without colour in a file.
    assert os.environ["RAY_DEDUP_LOGS"] == "0" and os.environ["RAY_COLOR_PREFIX"] == "0"


@pytest.mark.parametrize(("address", "loopback"), [("10.0.0.5:6379", False), ("127.0.0.1:6379", True)])
def test_a_ray_launcher_that_joins_a_ray_binds_as_that_ray_does(
    monkeypatch: pytest.MonkeyPatch, address: str, loopback: bool
) -> None:
    # Ray 2.60 turns 127.0.0.1 into the machine's address unless the variable is set.
    for name in (rl.RAY_LOOPBACK_ENV, "RAY_DEDUP_LOGS", "RAY_COLOR_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    rl.ray_launcher_defaults(ray_launcher_cfg({"address": address}))
    assert (rl.RAY_LOOPBACK_ENV in os.environ) is loopback


def ray_sweep(cli: Any, ray_session: Any, *args: str) -> Any:
    """A sweep through the Ray launcher, its jobs in the test session's Ray."""
    return cli(
        "-m",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_session.address}",
        *args,
        timeout=180,
        env={"RAY_AUTH_MODE": "token"},
    )


@pytest.mark.slow
def test_a_job_refused_in_a_ray_worker_is_one_message(cli: Any, tmp_path: Path, ray_session: Any) -> None:
    # sys.exit(1) would end the Ray worker, which Ray reports with a WorkerCrashedError and its traceback.
    # A resumed job's settings are its run's, found as it starts: in the worker.
    r = ray_sweep(cli, ray_session, "resume=nowhere", "seed=1,2")
    assert r.returncode == 1, r.output[-3000:]
    assert "Traceback" not in r.output and "WorkerCrashedError" not in r.output, r.output[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 2, r.stderr  # Hydra's line naming the job, then the refusal
    assert errors[0].startswith("Error executing job with overrides: ['resume=nowhere', 'seed=")
    assert errors[1].startswith("Error: resume='nowhere' is neither a run directory nor a tracked run")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.slow
def test_a_value_every_job_would_refuse_stops_the_sweep_before_ray_gets_a_job(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    r = ray_sweep(cli, ray_session, "env=atari", "env.game=Pnog", "seed=1,2")
    assert r.returncode == 1, r.output[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and errors[0].startswith(
        "Error: job 0 of the sweep (seed=1): Unknown Atari game env.game='Pnog'. Closest: Pong."
    ), r.stderr
    assert "Traceback" not in r.output
    assert_no_run(tmp_path)  # no parent run, no sweep folder


@pytest.mark.slow
def test_a_job_that_fails_in_a_ray_worker_says_why_once_and_ends_failed(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    r = ray_sweep(
        cli, ray_session, "env=gym", "env.id=Blackjack-v1", "agent=ppo", "total_steps=300", "eval.episodes=1",
        "seed=1",
    )  # fmt: skip
    assert r.returncode == 1, r.output[-3000:]
    assert "Traceback" not in r.output and "WorkerCrashedError" not in r.output, r.output[-3000:]
    # Said in the worker (Ray relays its lines), once.
    assert r.output.count("agent.algo=PPO cannot learn on this env's observations") == 1, r.output[-3000:]
    assert "Run FAILED at step 0 of 300." in r.output
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.status for r in parents] == ["FAILED"] and len(runs) == 2
    (child,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert child.info.status == "FAILED"


def test_a_failed_job_in_a_ray_worker_reaches_the_sweeps_process_whole() -> None:
    from framework.errors import JobFailed

    for message in ("Unknown Atari game", None):
        copy = pickle.loads(pickle.dumps(JobFailed(message)))
        assert isinstance(copy, JobFailed) and copy.message == message


def test_sigterm_to_a_ray_launched_sweep_stops_it_as_ctrl_c_does(tmp_path: Path, ray_session: Any) -> None:
    """Ray's driver took SIGTERM over: the sweep's process aborted (exit 134, "*** SIGTERM received")
    and every job ended FAILED. A scheduler's SIGTERM now stops it as Ctrl-C does."""
    p = start_cli(
        "-m", "hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_session.address}",
        "seed=1,2", "total_steps=400000", "eval.every_steps=0", "checkpoint.every_steps=0", "progress=off",
        cwd=tmp_path, env={"RAY_AUTH_MODE": "token"},
    )  # fmt: skip
    wait_for_both_jobs(p, tmp_path)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    assert "SIGTERM received" not in out and "Sweep stopped: its runs end KILLED." in out, out[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    deadline = time.monotonic() + 60
    while True:
        statuses = {
            r.info.run_name.split()[0]: r.info.status for r in client.search_runs([experiment.experiment_id])
        }
        if "RUNNING" not in statuses.values() or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(statuses) == {"sweep", "s1", "s2"} and set(statuses.values()) == {"KILLED"}, statuses
    # Each job ended at its own pace, with a last checkpoint (none was due before), before Ray went.
    for log in tmp_path.glob("multirun/*/*/*/framework.log"):
        assert "Run KILLED at step" in log.read_text(), log.read_text()[-2000:]
        assert (log.parent / "checkpoints" / "latest").is_file()
