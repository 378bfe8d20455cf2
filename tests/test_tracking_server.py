"""Integration with a real `mlflow server` on 127.0.0.1, read back through MlflowClient."""

from __future__ import annotations

import csv
import itertools
import json
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import FAST, MlflowServer, run_cli

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
    # A model-training experiment: the MLflow UI opens it on its runs, not on an empty GenAI traces page.
    kind = mlflow_server.client().get_experiment_by_name("single").tags["mlflow.experimentKind"]
    assert kind == "custom_model_development"
    assert run.info.run_name == "sb3-ppo-s3 steps=1024 cartpole"  # SB3's PPO, and what FAST changes
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
    assert [m.step for m in history] == [512, 1024]  # the training agent's evaluations only
    untrained = mlflow_server.client().get_metric_history(run.info.run_id, "eval_untrained/return_mean")
    assert [m.step for m in untrained] == [0]  # the untrained policy's, apart from the objective
    # The first metric the run logged: the untrained agent's evaluation, the objective's own first.
    with urllib.request.urlopen(f"{mlflow_server.uri}/api/2.0/mlflow/runs/get?run_id={run.info.run_id}") as r:
        logged = json.load(r)["run"]["data"]["metrics"]
    assert logged[0]["key"] == "eval_untrained/return_mean"
    tags = run.data.tags
    assert tags["plugin.env"] == "cartpole" and tags["plugin.agent"] == "sb3"
    assert (
        tags["versions.stable-baselines3"] and tags["versions.torch"] and tags["framework.version"] == "0.1.0"
    )
    artifacts = {a.path for a in mlflow_server.client().list_artifacts(run.info.run_id)}
    assert artifacts == {"config.yaml", "model", "checkpoint"}
    model = {a.path for a in mlflow_server.client().list_artifacts(run.info.run_id, "model")}
    assert model == {"model/model.zip"}
    # The model is stored once: the checkpoint artifact holds only the run's state beside it.
    state = {a.path for a in mlflow_server.client().list_artifacts(run.info.run_id, "checkpoint")}
    assert state == {"checkpoint/state.json"}
    resolved = yaml.safe_load(
        Path(
            mlflow_server.client().download_artifacts(run.info.run_id, "config.yaml", str(tmp_path))
        ).read_text()
    )
    assert resolved["agent"]["hyperparams"]["n_steps"] == 32 and resolved["seed"] == 3


def test_multirun_jobs_are_child_runs_of_one_parent_that_summarises_them(
    cli, mlflow_server: MlflowServer, tmp_path: Path
) -> None:
    # An experiment made before (by hand) gets the kind tag too.
    mlflow_server.client().create_experiment("sweep")
    started = time.time()
    r = cli(
        "-m", *FAST, "agent=ppo", f"tracking.uri={mlflow_server.uri}", "tracking.experiment=sweep",
        "seed=1,2", "agent.hyperparams.n_epochs=1,2",
    )  # fmt: skip
    wall = time.time() - started
    assert r.returncode == 0, r.output[-3000:]
    said = r.stdout[r.stdout.index("Sweep FINISHED: 4 runs (4 FINISHED).") :].splitlines()
    assert said[1].split()[0] == "best" and said[2].split()[0] == "summary"
    assert said[2].split()[1].startswith(f"{mlflow_server.uri}/#/experiments/")
    kind = mlflow_server.client().get_experiment_by_name("sweep").tags["mlflow.experimentKind"]
    assert kind == "custom_model_development"
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
    # A child's name leads with its own values, then what its siblings share, then the hash of its
    # config (the sweep's other overrides are in none of the names); the parent holds the swept values.
    names = {c.info.run_name.split(" cfg:")[0]: c for c in children}
    assert set(names) == {f"ne={e} s{s} sb3-ppo cartpole" for e in (1, 2) for s in (1, 2)}
    assert names["ne=2 s1 sb3-ppo cartpole"].data.params["agent.hyperparams.n_epochs"] == "2"
    assert all(" cfg:" in c.info.run_name for c in children)
    assert parent.info.run_name == "sweep sb3-ppo ne=1,2 seed=1,2 steps=1024 cartpole"
    assert (
        parent.data.params["sweep.seed"] == "1,2"
        and parent.data.params["sweep.agent.hyperparams.n_epochs"] == "1,2"
    )
    assert parent.data.params["agent.algo"] == "PPO" and "seed" not in parent.data.params
    # The parent summarises every child, plots the objective and links the best child.
    client = mlflow_server.client()
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {
        "sweep_summary.csv", "sweep_summary.html", "objective.png",
        "seeds_curves.png", "seeds_profile.png", "seeds_improvement.png",
    }  # fmt: skip
    table = Path(client.download_artifacts(parent.info.run_id, "sweep_summary.csv", str(tmp_path)))
    rows = [row for row in csv.DictReader(table.open()) if row["row"] == "run"]
    assert {row["run"] for row in rows} == {c.info.run_name for c in children}
    for row in rows:
        child = names[row["run"].split(" cfg:")[0]]
        assert row["run_id"] == child.info.run_id and row["status"] == "FINISHED"
        assert float(row["eval/return_mean"]) == pytest.approx(
            child.data.metrics["eval/return_mean"], rel=1e-5
        )
        assert float(row["duration_s"]) > 0
    best = max(children, key=lambda c: c.data.metrics["eval/return_mean"])
    assert parent.data.metrics["best/eval/return_mean"] == best.data.metrics["eval/return_mean"]
    assert parent.data.tags["framework.best_child"].split(" cfg:")[0] in names
    assert (
        f"runs/{parent.data.tags['framework.best_child_run_id']}" in parent.data.tags["mlflow.note.content"]
    )
    # Times are the real ones: one job after the other, each from its start in Hydra (when Hydra had
    # written the job's config), all within the parent's, which is the sweep's own.
    spans = sorted((c.info.start_time / 1000, c.info.end_time / 1000) for c in children)
    assert all(end > start for start, end in spans), spans
    for child in children:
        written = Path(child.data.tags["framework.run_dir"], ".hydra", "config.yaml").stat().st_mtime
        assert written - 0.01 <= child.info.start_time / 1000 < child.info.end_time / 1000
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans
    assert parent.info.start_time / 1000 <= spans[0][0] and spans[-1][1] <= parent.info.end_time / 1000
    # The parent's are the sweep's own, within the command's.
    assert started <= parent.info.start_time / 1000 and parent.info.end_time / 1000 <= started + wall


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
    assert f"The MLflow tracking server tracking.uri={uri} does not answer" in r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("sweeper", ["basic", "optuna"])
def test_a_sweep_to_an_unreachable_tracking_server_is_refused_whole_before_its_first_job(
    cli, tmp_path: Path, sweeper: str
) -> None:
    from tests.conftest import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    swept = ["seed=1,2"] if sweeper == "basic" else ["hydra.sweeper.n_trials=2", "seed=choice(1,2)"]
    r = cli("-m", f"hydra/sweeper={sweeper}", *FAST, f"tracking.uri={uri}", *swept, timeout=120)
    assert r.returncode == 1, r.output[-3000:]
    assert r.stderr.startswith(f"Error: The MLflow tracking server tracking.uri={uri} does not answer")
    assert r.stderr.count("Error:") == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert "Launching" not in r.output and "Warning" not in r.output, r.output[-3000:]  # no job ran
    assert not (tmp_path / "multirun").exists()


def test_a_runs_recorded_duration_is_its_real_one(tmp_path: Path) -> None:
    """Start and end times are taken where they happen, not when the tracking process gets to them."""
    # The test process's first command line would start its zygote inside the measured wall time.
    assert run_cli("--help", cwd=tmp_path).returncode == 0
    started = time.time()
    p = run_cli("agent=ppo", "total_steps=8192", "eval.episodes=5", cwd=tmp_path)
    ended = time.time()
    wall = ended - started
    assert p.returncode == 0, p.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    stamps = [
        m.timestamp for key in run.data.metrics for m in client.get_metric_history(run.info.run_id, key)
    ]
    # Within the process's life, around every point it logged: not when the tracking process got to
    # them (its own start and its flush at the end lie outside); the interpreter's start and exit,
    # slow on a loaded machine, lie outside too, hence no tight ratio to the process's wall time.
    assert started * 1000 <= run.info.start_time <= min(stamps), (started, run.info.start_time, min(stamps))
    assert max(stamps) <= run.info.end_time <= ended * 1000, (max(stamps), run.info.end_time, ended)
    recorded = (run.info.end_time - run.info.start_time) / 1000
    assert wall > 2.5, "a run long enough for the bounds to mean something"
    assert 0.5 * wall <= recorded <= wall, (recorded, wall)
