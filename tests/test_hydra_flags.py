"""Hydra's own flags and options as Hydra documents them: printing a config, its logging options,
`hydra.job.chdir`, deleting a key."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.conftest import FAST


def test_printing_the_resolved_config_leaves_no_directory(cli, tmp_path: Path) -> None:
    """`--cfg hydra --resolve` claimed an outputs/ and a multirun/ directory per call."""
    for what in ("hydra", "all"):
        r = cli("--cfg", what, "--resolve")
        assert r.returncode == 0, r.output[-3000:]
        assert "run:" in r.stdout
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))


def test_hydras_logging_options_replace_the_runs_whole(cli, tmp_path: Path) -> None:
    """`hydra/job_logging=disabled`, which --hydra-help offers, was a traceback: our console handler's
    formatter merged over a config that has no console handler."""
    for option in ("disabled", "none", "stdout"):
        r = cli("total_steps=64", "tracking=none", "eval.episodes=1", f"hydra/job_logging={option}")
        assert r.returncode == 0, r.output[-3000:]
        assert "Run FINISHED at step 64 of 64." in r.stdout
        assert ("run started" in r.stdout) is (option != "disabled"), r.stdout  # none: Hydra's setup
    default = cli("total_steps=64", "tracking=none", "eval.episodes=1", "hydra.run.dir=outputs/plain")
    assert "][INFO] run started: env=cartpole" in default.stdout, default.stdout  # ours, as before
    assert "[framework][INFO] - run started" in (tmp_path / "outputs/plain/framework.log").read_text()


def test_a_job_that_hydra_moves_into_its_directory_tracks_to_the_launch_directorys_store(
    cli, tmp_path: Path
) -> None:
    """With hydra.job.chdir=true each job's ./mlflow.db was its own: the sweep's parent lost, its
    children's parentRunId naming a run in no store, the printed `ui` command finding none of them."""
    r = cli("-m", "seed=1,2", *FAST[:1], "eval.episodes=1", "hydra.job.chdir=true", timeout=600)
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 2 runs (2 FINISHED)." in r.stdout
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("mlflow.db")] == [Path("mlflow.db")]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert len(runs) == 3 and len(parents) == 1, [run.info.run_name for run in runs]
    assert {run.data.tags.get("mlflow.parentRunId") for run in runs} == {None, parents[0].info.run_id}
    # A single run that makes a new store: the store's artifacts (./mlruns) in the launch directory
    # too, not in that first run's directory, where every later run's model would have gone.
    solo = cli("total_steps=64", "eval.episodes=1", "hydra.job.chdir=true", "tracking.uri=sqlite:///solo.db")
    assert solo.returncode == 0, solo.output[-3000:]
    store = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'solo.db'}")
    location = store.get_experiment_by_name("framework").artifact_location
    assert location.removeprefix("file://") == str(tmp_path / "mlruns" / "1"), location


def test_deleting_a_key_every_run_reads_or_asking_hydra_to_rerun_is_one_message(cli, tmp_path: Path) -> None:
    r = cli("~seed", "total_steps=64", "tracking=none")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "Error: ~seed: a run needs seed, which cannot be left out (give it a value instead)" in r.stderr
    r = cli("--experimental-rerun", "outputs/x/.hydra/config.pickle")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "Error: --experimental-rerun is not supported: resume=RUN_DIR continues a run" in r.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))


def test_mlflows_own_variables_choose_the_store_and_experiment_unless_the_command_line_does(
    cli, tmp_path: Path
) -> None:
    """They were ignored: the run went to ./mlflow.db under `framework`, and `compare` found no runs."""
    env = {"MLFLOW_TRACKING_URI": "sqlite:///env.db", "MLFLOW_EXPERIMENT_NAME": "envexp"}
    assert cli("total_steps=64", "eval.episodes=1", env=env).returncode == 0
    assert cli("total_steps=64", "eval.episodes=1", "tracking.experiment=given", env=env).returncode == 0
    assert not (tmp_path / "mlflow.db").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'env.db'}")
    for name in ("envexp", "given"):
        experiment = client.get_experiment_by_name(name)
        assert experiment is not None and len(client.search_runs([experiment.experiment_id])) == 1, name
    compared = cli("compare", env=env)
    assert compared.returncode == 0 and "compare.html" in compared.stdout, compared.output[-3000:]
    # The store alone chosen: its experiments named, not "framework: neither a run id nor ...".
    other = cli("compare", env={"MLFLOW_TRACKING_URI": "sqlite:///env.db"})
    said = " ".join(other.stderr.split())
    assert other.returncode == 1 and "has no experiment framework (tracking.experiment, its default)" in said
    assert "its experiments: Default, envexp, given: name one (python -m framework compare NAME)" in said, (
        said
    )


def test_shell_completion_offers_config_groups_only_and_a_wrong_shell_is_one_line(cli) -> None:
    """The framework package was on the config search path: completion offered `contracts=`."""
    offered = cli("-sc", "query=bash", env={"COMP_LINE": "framework con"})
    assert offered.returncode == 0 and "contracts" not in offered.stdout, offered.output
    assert "env=" in cli("-sc", "query=bash", env={"COMP_LINE": "framework en"}).stdout
    quiet = cli("-sc", "query=bash", env={"COMP_LINE": "framework ui "})  # a command: no candidates
    assert quiet.stdout.strip() == "" and quiet.stderr == "", quiet.output  # and no error mid-line
    wrong = cli("-sc", "query=con")
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr, wrong.stderr
    assert (
        "Error: No completion plugin for 'con': -sc install=SHELL or query=SHELL, a SHELL of bash"
        in wrong.stderr
    )
