"""Integration with a real `mlflow server` on 127.0.0.1, read back through MlflowClient."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from tests.conftest import FAST, MlflowServer

pytestmark = pytest.mark.slow


def experiment_runs(server: MlflowServer, experiment: str) -> list:
    client = server.client()
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"experiment {experiment!r} was not created"
    return list(client.search_runs([exp.experiment_id]))


def test_run_logs_params_metrics_tags_and_artifacts(cli, mlflow_server: MlflowServer, tmp_path: Path) -> None:
    r = cli(*FAST, "agent=ppo", f"tracking.uri={mlflow_server.uri}", "tracking.experiment=single", "seed=3")
    assert r.returncode == 0, r.output[-3000:]
    (run,) = experiment_runs(mlflow_server, "single")
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "cartpole-ppo-s3"
    params = run.data.params
    assert params["env.name"] == "cartpole"
    assert params["agent.algo"] == "PPO"
    assert params["agent.hyperparams.n_steps"] == "32"
    assert params["seed"] == "3"
    assert params["total_steps"] == "1024"
    metrics = run.data.metrics
    for key in ("eval/return_mean", "train/loss", "perf/env_steps_per_s", "rollout/ep_rew_mean"):
        assert key in metrics, key
    assert 8 <= metrics["eval/return_mean"] <= 500
    history = mlflow_server.client().get_metric_history(run.info.run_id, "eval/return_mean")
    assert [m.step for m in history] == [512, 1024]
    tags = run.data.tags
    assert tags["plugin.env"] == "cartpole" and tags["plugin.agent"] == "sb3"
    assert (
        tags["versions.stable-baselines3"] and tags["versions.torch"] and tags["framework.version"] == "0.1.0"
    )
    artifacts = {a.path for a in mlflow_server.client().list_artifacts(run.info.run_id)}
    assert {"config.yaml", "model", "checkpoint"} <= artifacts
    model = {a.path for a in mlflow_server.client().list_artifacts(run.info.run_id, "model")}
    assert model == {"model/model.zip"}
    resolved = yaml.safe_load(
        Path(
            mlflow_server.client().download_artifacts(run.info.run_id, "config.yaml", str(tmp_path))
        ).read_text()
    )
    assert resolved["agent"]["hyperparams"]["n_steps"] == 32 and resolved["seed"] == 3


def test_multirun_jobs_are_child_runs_of_one_parent(cli, mlflow_server: MlflowServer) -> None:
    r = cli(
        "-m", *FAST, "agent=ppo", f"tracking.uri={mlflow_server.uri}", "tracking.experiment=sweep",
        "seed=1,2", "agent.hyperparams.n_epochs=1,2",
    )  # fmt: skip
    assert r.returncode == 0, r.output[-3000:]
    runs = experiment_runs(mlflow_server, "sweep")
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    children = [run for run in runs if "mlflow.parentRunId" in run.data.tags]
    assert len(parents) == 1 and len(children) == 4
    (parent,) = parents
    assert parent.info.status == "FINISHED"
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(c.info.status == "FINISHED" for c in children)
    combos = {(c.data.params["seed"], c.data.params["agent.hyperparams.n_epochs"]) for c in children}
    assert combos == set(itertools.product(["1", "2"], ["1", "2"]))
    assert all("eval/return_mean" in c.data.metrics for c in children)
    assert "seed=1,2" in parent.data.tags["framework.overrides"]


def test_tracking_none_creates_no_store(cli, tmp_path: Path) -> None:
    r = cli(*FAST, "tracking=none")
    assert r.returncode == 0, r.output[-3000:]
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "mlruns").exists()


def test_unreachable_tracking_server_fails_fast_naming_the_uri(cli) -> None:
    from tests.conftest import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    r = cli(*FAST, f"tracking.uri={uri}", "tracking.http_retries=0", "tracking.http_timeout_s=5", timeout=120)
    assert r.returncode == 1
    assert f"MLflow tracking URI {uri} cannot be used" in r.stderr
