"""Run lifecycle against the embedded store: KILLED + resume, FAILED with traceback, seeding."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from framework.provenance import RESUMES_TAG
from tests.conftest import FAST, run_cli, start_cli

pytestmark = pytest.mark.slow

#: FAST with DQN's train phases cut from 128 updates to 8: a phase of 128 took most of a FAST
#: run's CPU time, and no test here reads what the updates learn, only that they were made.
DQN_FAST = [*FAST, "agent.gradient_steps=8"]


def store(tmp_path: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")


def only_run(client: MlflowClient):
    exp = client.get_experiment_by_name("framework")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def test_sigint_ends_killed_with_checkpoint_and_resume_continues_the_step_count(tmp_path: Path) -> None:
    args = [
        "total_steps=400000",
        "agent.gradient_steps=8",
        "checkpoint.every_steps=2048",
        "eval.every_steps=0",
        "hydra.run.dir=outputs/first",
    ]
    p = start_cli(*args, cwd=tmp_path)
    checkpoints = tmp_path / "outputs/first/checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints / "latest").exists():
        assert p.poll() is None, p.stdout.read() if p.stdout else ""
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out[-3000:]

    run = only_run(store(tmp_path))
    assert run.info.status == "KILLED"
    killed_step = int((checkpoints / "latest").read_text().removeprefix("step_"))
    assert 2048 <= killed_step < 400000
    assert f"KILLED at step {killed_step}" in out
    assert {a.path for a in store(tmp_path).list_artifacts(run.info.run_id)} >= {"checkpoint", "config.yaml"}

    target = killed_step + 2048
    r = run_cli(
        f"resume={run.info.run_id}", f"total_steps={target}", "hydra.run.dir=outputs/second", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr[-3000:]
    client = store(tmp_path)
    resumed = only_run(client)  # the same run, not a new one
    assert resumed.info.run_id == run.info.run_id
    assert resumed.info.status == "FINISHED"
    losses = client.get_metric_history(run.info.run_id, "train/loss")
    steps = [m.step for m in losses]
    # Training went on after the resume; the default agent logs train/* every log interval, so
    # the last of them may come before the final step (the evaluation below reaches it).
    assert any(s > killed_step for s in steps) and any(s <= killed_step for s in steps)
    evals = client.get_metric_history(run.info.run_id, "eval/return_mean")
    assert evals and evals[-1].step >= target
    assert resumed.data.tags["framework.resumed_from_step"] == str(killed_step)


def test_resume_from_a_run_directory_refuses_another_env_seed_or_network_and_goes_on(
    cli, tmp_path: Path
) -> None:
    first = cli(*DQN_FAST, "tracking=none", "hydra.run.dir=outputs/a")
    assert first.returncode == 0, first.output[-3000:]
    r = cli(f"resume={tmp_path / 'outputs/a'}", "env=lunarlander", "tracking=none")
    assert r.returncode == 1
    said = "Cannot change env on resume: the run used the env plugin 'cartpole', this command names"
    assert f"{said} 'lunarlander'" in r.stderr
    # Nor its seed, which its name and params say, and were silently kept while the rest changed.
    r = cli(f"resume={tmp_path / 'outputs/a'}", "seed=3", "tracking=none", "total_steps=2048")
    assert r.returncode == 1 and "Traceback" not in r.output
    assert "Cannot change seed on resume: the run is seed 0's" in " ".join(r.stderr.split()), r.stderr
    r = cli(
        f"resume={tmp_path / 'outputs/a'}", "agent.hidden_sizes=[32]", "tracking=none", "total_steps=2048"
    )
    assert r.returncode == 1 and "Traceback" not in r.output
    said = " ".join(r.stderr.split())
    assert (
        "cannot be loaded with agent.hidden_sizes=[32]: Error(s) in loading state_dict for MLPQNetwork: "
        in said
    )
    assert "leave those out" in said
    assert len(r.stderr.strip().splitlines()) <= 5, r.stderr  # of torch's list, a line per tensor, the first
    # Refused, the run goes on from its directory as it was.
    again = cli(
        f"resume={tmp_path / 'outputs/a'}", "total_steps=2048", "tracking=none", "hydra.run.dir=outputs/b"
    )
    assert again.returncode == 0, again.output[-3000:]
    assert "FINISHED at step 2048" in again.output
    assert (tmp_path / "outputs/b/checkpoints/step_0000002048").is_dir()
    # A budget the run has passed is refused before anything starts; its own says it trains no more.
    past = cli(
        f"resume={tmp_path / 'outputs/b'}", "total_steps=1024", "tracking=none", "hydra.run.dir=outputs/c"
    )
    assert past.returncode == 1 and "Traceback" not in past.output, past.output[-3000:]
    assert " ".join(past.stderr.split()) == (
        f"Error: resume={tmp_path / 'outputs/b'}: the run is at step 2048, past total_steps=1024: give "
        "total_steps above 2048 to train it further"
    )
    assert not (tmp_path / "outputs/c").exists()
    done = cli(f"resume={tmp_path / 'outputs/b'}", "tracking=none", "hydra.run.dir=outputs/d")
    assert done.returncode == 0 and "FINISHED at step 2048 of 2048" in done.output, done.output[-3000:]
    assert "the run is at its total_steps=2048: it is evaluated and ends" in " ".join(done.output.split())


def test_resume_takes_keys_of_the_runs_own_plugins_that_the_default_plugins_lack(cli, tmp_path: Path) -> None:
    """The command composes the default env (cartpole), which has no `continuous`: the key is checked
    against, and goes to, the resumed run's own env (lunarlander)."""
    from omegaconf import OmegaConf

    lunar = ["env=lunarlander", "env.max_episode_steps=100", "eval.at_start=false", "tracking=none"]
    first = cli(*DQN_FAST, *lunar, "hydra.run.dir=outputs/a")
    assert first.returncode == 0, first.output[-3000:]
    resume = f"resume={tmp_path / 'outputs/a'}"
    again = cli(
        resume, "total_steps=1536", "env.continuous=false", "tracking=none", "hydra.run.dir=outputs/b"
    )
    assert again.returncode == 0, again.output[-3000:]
    assert "FINISHED at step 1536" in again.output
    saved = OmegaConf.load(tmp_path / "outputs/b/checkpoints/step_0000001536/config.yaml")
    assert (saved.env.name, saved.env.continuous, saved.env.max_episode_steps) == ("lunarlander", False, 100)
    typo = cli(f"resume={tmp_path / 'outputs/b'}", "total_steps=2048", "env.continous=false", "tracking=none")
    assert typo.returncode == 1 and "Traceback" not in typo.output
    assert "Unknown config key env.continous for env plugin 'lunarlander'. Did you mean env.continuous?" in (
        typo.stderr
    )


def test_exception_ends_failed_with_one_message_and_the_traceback(cli, tmp_path: Path) -> None:
    # Observations SB3's policies cannot read (Blackjack's Tuple): found as its model is made, once
    # the run has started.
    r = cli("env=gym", "env.id=Blackjack-v1", "agent=ppo", "total_steps=300", "eval.episodes=1")
    assert r.returncode == 1 and "Traceback" not in r.output
    assert r.stderr.startswith("Error: agent.algo=PPO cannot learn on this env's observations, Tuple(")
    assert "Run FAILED at step 0 of 300." in r.stderr and r.stderr.count("observation space is not") == 1
    run = only_run(store(tmp_path))
    assert run.info.status == "FAILED"
    assert "observation space is not supported" in run.data.tags["framework.error"]
    local = store(tmp_path).download_artifacts(run.info.run_id, "traceback.txt", str(tmp_path))
    text = Path(local).read_text()
    assert text.startswith("Traceback (most recent call last)") and "Tuple(Discrete(32)" in text


def test_identical_seeds_give_identical_metrics_and_different_seeds_different_ones(
    cli, tmp_path: Path
) -> None:
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        r = cli(*DQN_FAST, f"seed={seed}", f"tracking.run_name={name}")
        assert r.returncode == 0, r.output[-3000:]
        (line,) = [line for line in r.stdout.splitlines() if line.startswith("  run  ")]
        assert line.split()[1] == name, line  # the last lines say the name MLflow shows
    client = store(tmp_path)
    exp = client.get_experiment_by_name("framework")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    a, b = runs["a"], runs["b"]
    keys = {k for k in a.data.metrics if not k.startswith(("perf/", "time/"))}
    assert {"eval/return_mean", "train/loss", "rollout/ep_rew_mean"} <= keys
    assert keys == {k for k in b.data.metrics if not k.startswith(("perf/", "time/"))}
    for key in sorted(keys):
        ha = [(m.step, m.value) for m in client.get_metric_history(a.info.run_id, key)]
        hb = [(m.step, m.value) for m in client.get_metric_history(b.info.run_id, key)]
        assert ha == hb, key
    assert runs["c"].data.metrics["train/loss"] != a.data.metrics["train/loss"]
    # An unknown run id, in a store that holds runs: said so, with the newest of them.
    r = cli("resume=0123456789abcdef0123456789abcdef")
    assert r.returncode == 1
    assert r.stderr.startswith("Error: resume='0123456789abcdef0123456789abcdef' is neither a run directory")
    assert "no MLflow run '0123456789abcdef0123456789abcdef'" in r.stderr and "Newest runs" in r.stderr
    assert "is found with tracking.uri=THAT_STORE" in " ".join(r.stderr.split())  # tracked elsewhere
    assert "Traceback" not in r.output


def test_resume_by_run_id_fetches_the_checkpoint_artifact_when_the_run_dir_is_gone(
    cli, tmp_path: Path
) -> None:
    import shutil

    assert cli(*DQN_FAST, "hydra.run.dir=outputs/a").returncode == 0
    run = only_run(store(tmp_path))
    shutil.rmtree(tmp_path / "outputs/a")
    r = cli(f"resume={run.info.run_id}", "total_steps=2048", "hydra.run.dir=outputs/b")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 2048" in r.output
    resumed = only_run(store(tmp_path))
    assert resumed.data.tags["framework.resumed_from_step"] == "1024"
    # MLflow's progress bars of the download stay out of the output and the run's log.
    assert "Downloading artifacts" not in r.output + (tmp_path / "outputs/b/framework.log").read_text()


def test_a_killed_untracked_run_prints_a_resume_command_that_works(tmp_path: Path) -> None:
    p = start_cli(
        "tracking=none",
        "total_steps=400000",
        "agent.gradient_steps=8",
        "checkpoint.every_steps=512",
        "eval.every_steps=0",
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("outputs/*/*/checkpoints/latest")):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out[-3000:]
    command = (
        next(line for line in out.splitlines() if "continue with" in line).split("continue with")[1].split()
    )
    assert command[:3] == ["python", "-m", "framework"] and command[3].startswith("resume=/")
    killed = int(re.search(r"Run KILLED at step (\d+)", out).group(1))  # type: ignore[union-attr]
    r = run_cli(*command[3:], f"total_steps={killed + 1024}", cwd=tmp_path)  # the command as printed
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"Run FINISHED at step {killed + 1024} of {killed + 1024}." in r.stdout
    assert f"resumed at step {killed}" in r.stdout + r.stderr


def test_a_run_directory_resumed_tracks_where_its_run_did(cli, tmp_path: Path) -> None:
    """Its run's tracking=none, or a server's tracking.uri, gave way to this command's default store."""
    assert cli(*DQN_FAST, "tracking=none", "hydra.run.dir=outputs/a").returncode == 0
    r = cli(f"resume={tmp_path / 'outputs/a'}", "total_steps=1536")
    assert r.returncode == 0, r.output[-3000:]
    assert "Run FINISHED at step 1536 of 1536." in r.stdout
    assert not (tmp_path / "mlflow.db").exists()
    assert cli(*DQN_FAST, "tracking.uri=sqlite:///other.db", "hydra.run.dir=outputs/b").returncode == 0
    r = cli(f"resume={tmp_path / 'outputs/b'}", "total_steps=1536")
    assert r.returncode == 0, r.output[-3000:]
    assert not (tmp_path / "mlflow.db").exists()
    assert "total_steps=1536, the run had 1024 until now: a schedule over the run's steps" in r.output
    run = only_run(MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'other.db'}"))
    assert run.data.tags[RESUMES_TAG] == "1" and run.info.status == "FINISHED", run.data.tags
    # Its name follows the budget the resume gave it, as its framework.total_steps tag does.
    assert "steps=1536" in run.info.run_name and "steps=1024" not in run.info.run_name, run.info.run_name
    # The untracked run went on from a's step 1024 (kept: checkpoint.keep=2) to 1536 elsewhere: going on
    # from a's again would run that part twice, silently, as a second diverging run.
    went_on = Path((tmp_path / "outputs/a/checkpoints/went_on_in").read_text())
    again = cli(f"resume={tmp_path / 'outputs/a'}", "total_steps=2048")
    said = " ".join(again.stderr.split())
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.output[-3000:]
    assert f"the run went on in {went_on} after this checkpoint (step 1024), to step 1536" in said, said
    assert f"continue it from its latest with resume={went_on}" in said, said
    tracked = cli(f"resume={went_on}", "total_steps=2048", "tracking=mlflow")
    assert tracked.returncode == 0, tracked.output[-3000:]
    assert "Run FINISHED at step 2048 of 2048." in tracked.stdout


def test_resuming_an_older_directory_of_a_run_that_went_on_is_refused_with_its_latest(
    cli, tmp_path: Path
) -> None:
    """Going on again from an older part's checkpoint left the later part's points in the run's history
    beside the new ones (a requeue script that keeps the first printed command): refused, before
    anything starts, naming where the run goes on from."""
    assert cli(*DQN_FAST, "hydra.run.dir=outputs/a").returncode == 0
    run = only_run(store(tmp_path))
    b = cli(f"resume={run.info.run_id}", "total_steps=2048", "checkpoint.keep=3", "hydra.run.dir=outputs/b")
    assert b.returncode == 0, b.output[-3000:]
    r = cli(f"resume={tmp_path / 'outputs/a'}", "total_steps=3072", "hydra.run.dir=outputs/c")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    assert (
        f"run {run.info.run_id} went on in {tmp_path / 'outputs/b'} after this checkpoint (step 1024)"
        in " ".join(r.stderr.split())
    )
    assert f"resume={tmp_path / 'outputs/b'} (or resume={run.info.run_id})" in " ".join(r.stderr.split())
    assert not (tmp_path / "outputs/c").exists()
    history = store(tmp_path).get_metric_history(run.info.run_id, "eval/return_mean")
    assert max(m.step for m in history) == 2048 and len({m.step for m in history}) == len(history)
    # Its latest goes on.
    r = cli(
        f"resume={tmp_path / 'outputs/b'}", "total_steps=3072", "checkpoint.keep=2", "hydra.run.dir=outputs/c"
    )
    assert r.returncode == 0 and "resumed at step 2048" in r.output, r.output[-3000:]
    # A part and the one it went on from keep checkpoint.keep=2 checkpoints between them, the earlier
    # one's first to go; resuming that one is sent to where the run went on.
    found = sorted(p.parent.parent.name for p in tmp_path.glob("outputs/*/checkpoints/step_*"))
    assert found == ["a", "c", "c"], found
    r = cli(f"resume={tmp_path / 'outputs/b'}", "total_steps=4096", "hydra.run.dir=outputs/d")
    assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
    said = " ".join(r.stderr.split())
    assert f"the run went on in {tmp_path / 'outputs/c'}, which holds its checkpoints now" in said, said
    assert f"continue it with resume={tmp_path / 'outputs/c'}" in said


def test_a_sweeps_run_resumed_keeps_its_name_and_its_parent_says_to_resume_one_of_its_runs(
    cli, tmp_path: Path
) -> None:
    r = cli(*DQN_FAST, "seeds=2", "seed=20")  # a sweep: `-m seed=20,21`
    assert r.returncode == 0, r.output[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework").experiment_id
    children = client.search_runs([experiment], "tags.mlflow.parentRunId != ''")
    child = next(run for run in children if run.data.params["seed"] == "21")
    parent = client.get_run(child.data.tags["mlflow.parentRunId"])
    for run in (parent, child):  # MLflow's runs table shows who ran it, and with what
        assert run.data.tags["mlflow.source.name"] == "python -m framework" and run.data.tags["mlflow.user"]
        assert not [k for k, v in run.data.params.items() if "${" in v], run.data.params  # as resolved
    r = cli(f"resume={parent.info.run_id}")
    assert r.returncode == 1 and "Traceback" not in r.output
    said = " ".join(r.stderr.split())
    assert f"resume={parent.info.run_id} is a sweep's parent run, which holds no training of its own" in said
    assert f"python -m framework ui --run {parent.info.run_id}" in said
    again = cli(f"resume={child.info.run_id}")  # at its budget: evaluated, and ended
    assert again.returncode == 0, again.output[-3000:]
    assert client.get_run(child.info.run_id).info.run_name == child.info.run_name
    # Its sweep ended before: the parent's summary is made again with the child's new result.
    summaries = len(client.get_metric_history(parent.info.run_id, "sweep/children"))
    further = cli(f"resume={child.info.run_id}", "total_steps=1536")
    assert further.returncode == 0, further.output[-3000:]
    summarised = client.get_run(parent.info.run_id)
    assert summarised.info.status == parent.info.status
    assert len(client.get_metric_history(parent.info.run_id, "sweep/children")) == summaries + 1


def test_a_resume_may_change_the_search_its_checkpoint_holds_none_of_but_not_the_agent() -> None:
    from omegaconf import OmegaConf

    from framework.errors import ConfigError
    from framework.resume import _apply_resume_overrides

    def config(search: str, agent: str) -> Any:
        return OmegaConf.create({
            "seed": 0, "total_steps": 100, "resume": "x", "tracking": {"name": "none"},
            "agent": {"name": agent}, "search": {"name": search},
        })  # fmt: skip

    saved = config("ray_async", "alphazero")
    merged = _apply_resume_overrides(saved, config("sequential", "alphazero"), ["search=sequential"])
    assert merged.search.name == "sequential" and merged.agent.name == "alphazero"
    with pytest.raises(ConfigError, match="Cannot change agent on resume"):
        _apply_resume_overrides(saved, config("ray_async", "dqn"), ["agent=dqn"])
