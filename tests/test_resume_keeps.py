"""Resume keeps everything: after a SIGKILL, resume= continues the run's metric curves without a step
logged twice, keeps its own tags and records each resume beside them; a run stopped before its first
checkpoint says so rather than print a resume command that fails."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, start_cli

ARGS = ["checkpoint.every_steps=1500", "eval.every_steps=1000", "eval.episodes=1", "log_every_s=0.5"]


def _client(tmp_path: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")


def _kill_after_checkpoint_and_more_metrics(tmp_path: Path, run_dir: str, *args: str) -> None:
    """Start a run, and SIGKILL it once it has a checkpoint and has logged past it."""
    p = start_cli(
        *ARGS, "total_steps=1000000", "progress=log", f"hydra.run.dir={run_dir}", *args, cwd=tmp_path
    )
    latest = tmp_path / run_dir / "checkpoints" / "latest"
    assert p.stdout is not None
    deadline = time.monotonic() + 180
    for line in p.stdout:
        if latest.exists() and "step " in line:
            checkpointed = int(latest.read_text().removeprefix("step_"))
            found = line.split("step ", 1)[1].split("/", 1)[0]
            if found.isdigit() and int(found) > checkpointed + 500:
                break
        assert time.monotonic() < deadline, "no checkpoint and progress past it in 180 s"
    p.send_signal(signal.SIGSTOP)  # no further step, nor checkpoint, from here
    # The tracking process (not the one stopped) sends what was logged: wait for a point past the
    # checkpoint to be in the store.
    client = _client(tmp_path)
    while not _logged_past(client, checkpointed):
        assert time.monotonic() < deadline + 60, "no metric past the checkpoint reached the store"
        time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)


def _logged_past(client: MlflowClient, step: int) -> bool:
    experiment = client.get_experiment_by_name("framework")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    return any(
        m.step > step
        for run in runs
        for key in run.data.metrics
        for m in client.get_metric_history(run.info.run_id, key)
    )


def test_resume_after_sigkill_logs_no_step_twice_and_keeps_the_runs_own_tags(tmp_path: Path) -> None:
    _kill_after_checkpoint_and_more_metrics(tmp_path, "outputs/first", "seed=5")
    client = _client(tmp_path)
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    before = {
        key: max(m.step for m in client.get_metric_history(run.info.run_id, key)) for key in run.data.metrics
    }
    checkpointed = int((tmp_path / "outputs/first/checkpoints/latest").read_text().removeprefix("step_"))
    assert max(before.values()) > checkpointed, before  # the killed run logged past its checkpoint

    for number, run_dir in ((1, "outputs/second"), (2, "outputs/third")):
        total = checkpointed + 3000 * number
        r = run_cli(
            f"resume={run.info.run_id}", f"total_steps={total}", f"hydra.run.dir={run_dir}", cwd=tmp_path
        )
        assert r.returncode == 0, r.stderr[-3000:]
        checkpointed = total

    resumed = client.get_run(run.info.run_id)
    assert resumed.info.status == "FINISHED"
    for key in resumed.data.metrics:
        history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.timestamp, m.step))
        steps = [m.step for m in history]
        assert len(steps) == len(set(steps)), f"{key}: a step logged twice: {steps}"
        assert steps == sorted(steps), f"{key}: the curve steps backwards: {steps}"
    tags = resumed.data.tags
    assert tags["framework.run_dir"] == str((tmp_path / "outputs/first").resolve())
    assert tags["framework.overrides"].split() == [*ARGS, "total_steps=1000000", "progress=log", "seed=5"]
    assert tags["framework.resumes"] == "2"
    assert tags["framework.resume1.run_dir"] == str((tmp_path / "outputs/second").resolve())
    assert tags["framework.resume2.run_dir"] == str((tmp_path / "outputs/third").resolve())
    assert tags["framework.resume2.overrides"].startswith(f"resume={run.info.run_id}")
    assert tags["framework.resume2.from_step"] == tags["framework.resumed_from_step"]
    assert resumed.data.params["seed"] == "5"
    # The killed part's error stays beside it, and no filter on framework.error finds the finished run.
    assert "framework.error" not in tags, tags
    assert "ended without ending its run" in tags["framework.error_before_resume1"], tags


def test_a_run_stopped_as_its_training_starts_ends_at_once_and_says_what_it_has(tmp_path: Path) -> None:
    """SIGTERM as the run starts, during the evaluation of the untrained agent (a long one): that
    evaluation is given up, not played to its end. Landing before training starts, it stops the run
    at once, at step 0 with no checkpoint, which the summary says instead of a resume command that
    would fail; landing in training, after its first step, with a checkpoint that it names."""
    p = start_cli("eval.episodes=100000", "progress=log", "hydra.run.dir=o", cwd=tmp_path)
    assert p.stdout is not None
    for line in p.stdout:
        if "run started" in line:
            break
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    if "Run KILLED at step 0 of " in out:
        assert (
            "checkpoint        none: the run stopped before its first one, and starts over when run again"
            in out
        )
        assert "resume=" not in out
    else:
        assert "Run KILLED at step 1 of 50000." in out, out[-3000:]
        assert f"continue with     python -m framework resume={(tmp_path / 'o').resolve()}" in out
        assert (tmp_path / "o" / "checkpoints" / "step_0000000001").is_dir()


def test_the_summary_of_a_run_without_a_checkpoint_says_so_and_gives_no_resume(tmp_path: Path) -> None:
    from framework.endings import resume_rows
    from framework_plugins.trackers.null_tracker import NullTracker

    rows = resume_rows(tmp_path, None, NullTracker(None), "")
    assert rows == [
        ("checkpoint", "none: the run stopped before its first one, and starts over when run again")
    ]


def test_a_resumed_run_stopped_before_its_first_step_points_back_to_where_it_was_resumed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np
    from omegaconf import OmegaConf

    from framework.checkpoint import Checkpointer
    from framework.context import RunContext
    from framework.endings import last_checkpoint, resume_rows
    from framework.progress import ProgressDisplay
    from framework_plugins.trackers.null_tracker import NullTracker

    first = tmp_path / "first"
    saved = Checkpointer(first / "checkpoints", every_steps=0, keep=1, config_yaml="seed: 0\n")
    saved.save(2048, lambda folder: (folder / "weights").write_text("trained"), {"run_id": None})

    class NotLoadedYet:  # its learn failed before it loaded the checkpoint (its game page never came)
        def save(self, folder: Path) -> None:
            raise AttributeError("'NoneType' object has no attribute 'save'")

    run_dir = tmp_path / "second"
    ctx = RunContext(
        cfg=OmegaConf.create({"eval": {"every_steps": 0, "episodes": 1, "deterministic": True}}),
        env_plugin=None,
        seed=0,
        rng=np.random.default_rng(0),
        device="cpu",
        total_steps=4096,
        tracker=NullTracker(None),
        checkpointer=Checkpointer(
            run_dir / "checkpoints", every_steps=0, keep=1, config_yaml="", earlier=first / "checkpoints"
        ),
        progress=ProgressDisplay(4096, mode="off", start=2048),
        run_dir=run_dir,
        start_step=2048,
        resume_from=saved.latest(),
    )
    kept = last_checkpoint(ctx, NotLoadedYet())  # type: ignore[arg-type]
    assert kept == saved.latest() and not (run_dir / "checkpoints").exists()
    assert not [r for r in caplog.records if "could not save" in r.getMessage()]
    rows = dict(resume_rows(run_dir, kept, NullTracker(None), "", 4096))  # with this command's budget
    assert (
        rows["continue with"]
        == f"python -m framework resume={first.resolve()} total_steps=4096 tracking=none"
    )


def test_a_tracked_run_whose_last_part_saved_nothing_goes_on_from_where_that_part_began(
    tmp_path: Path,
) -> None:
    from framework.checkpoint import Checkpointer
    from framework.errors import ConfigError
    from framework.resume import _refuse_if_the_run_went_on

    first = Checkpointer(tmp_path / "first" / "checkpoints", every_steps=0, keep=1, config_yaml="")
    checkpoint = first.save(2048, lambda folder: (folder / "w").write_text("x"), {"run_id": "r1"})
    (tmp_path / "second").mkdir()  # the resumed part's directory: it stopped before its first save

    class Tags:
        def __init__(self, from_step: int) -> None:
            self.from_step = from_step

        def run_tags(self, run_id: str) -> dict[str, str]:
            return {
                "framework.resumes": "1",
                "framework.resume1.run_dir": str(tmp_path / "second"),
                "framework.resumed_from_step": str(self.from_step),
            }

    _refuse_if_the_run_went_on(Tags(2048), "r1", checkpoint, 2048, "first")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="went on in"):  # it went on from a later one: not this
        _refuse_if_the_run_went_on(Tags(3000), "r1", checkpoint, 2048, "first")  # type: ignore[arg-type]


def test_an_evaluation_a_stop_gave_up_is_made_as_the_run_goes_on(tmp_path: Path) -> None:
    import numpy as np
    from omegaconf import OmegaConf

    from framework.checkpoint import Checkpointer
    from framework.context import RunContext
    from framework.progress import ProgressDisplay
    from tests.dqn.conftest import RecordingTracker

    class Evaluated:
        Config = object

        def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]:
            return {"eval/return_mean": 7.0}

        def save(self, folder: Path) -> None:
            (folder / "w").write_text("x")

        def learn(self, ctx: RunContext) -> None: ...
        def act(self, obs: object, *, deterministic: bool = True) -> int: ...
        def load(self, folder: Path) -> None: ...

    cfg = OmegaConf.create(
        {"eval": {"every_steps": 512, "episodes": 1}, "objective": {"metric": "eval/return_mean"}}
    )

    def resumed_at(step: int, evaluated_at: int) -> RecordingTracker:
        first = Checkpointer(tmp_path / f"at{step}-{evaluated_at}", every_steps=0, keep=1, config_yaml="")
        saved = first.save(step, Evaluated().save, {"run_id": None, "last_eval_step": evaluated_at})
        tracker = RecordingTracker()
        ctx = RunContext(
            cfg=cfg, env_plugin=None, seed=0, rng=np.random.default_rng(0), device="cpu", total_steps=4096,
            tracker=tracker,  # type: ignore[arg-type]
            checkpointer=Checkpointer(tmp_path / "next", every_steps=0, keep=1, config_yaml=""),
            progress=ProgressDisplay(4096, mode="off", start=step), run_dir=tmp_path, start_step=step,
            resume_from=saved,
        )  # fmt: skip
        ctx.after_step(step + 4, Evaluated())  # type: ignore[arg-type]
        return tracker

    assert resumed_at(1024, 512).metrics["eval/return_mean"] == [(1024, 7.0)]  # stopped on it: made
    assert "eval/return_mean" not in resumed_at(1024, 1024).metrics  # made before the stop
    assert "eval/return_mean" not in resumed_at(1000, 512).metrics  # none due at its step


def test_a_resume_whose_env_keys_change_the_spaces_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """`resume=<id> env.game=Breakout` of a Pong run: a traceback as training started, and the finished
    run marked FAILED."""
    first = run_cli("total_steps=256", "eval.episodes=1", "tracking=none", cwd=tmp_path)
    assert first.returncode == 0, first.output[-3000:]
    run_dir = next((tmp_path / "outputs").glob("*/*"))
    again = run_cli(f"resume={run_dir}", "env.id=Acrobot-v1", "total_steps=512", cwd=tmp_path)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.output[-3000:]
    said = " ".join(again.stderr.split())
    assert f"resume='{run_dir}' with env.id=Acrobot-v1: the run trained on observations Box(" in said, said
    assert "actions Discrete(2), and this env gives Box(" in said and "and Discrete(3)" in said, said
    assert "run started" not in again.output


def test_resume_of_a_sweeps_directory_names_its_runs_to_resume(tmp_path: Path) -> None:
    sweep = run_cli("-m", "seed=1,2", "total_steps=256", "eval.episodes=1", "tracking=none", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.output[-3000:]
    sweep_dir = next((tmp_path / "multirun").glob("*/*"))
    (sweep_dir / "multirun.yaml").unlink()  # as a sweeper plugin's sweep leaves none (hydra/sweeper=optuna)
    again = run_cli(f"resume={sweep_dir}", "tracking=none", cwd=tmp_path)
    said = " ".join(again.stderr.split())
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.output[-3000:]
    assert f"resume='{sweep_dir}' is a sweep's directory: resume each of its runs" in said, said
    assert f"{sweep_dir / '0'}, {sweep_dir / '1'}" in said, said
