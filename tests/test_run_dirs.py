"""A run directory is its run's alone: runs started at once get their own, a directory another live
run holds is refused, and resume= never continues another run's checkpoint."""

from __future__ import annotations

import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from framework.checkpoint import read_state
from framework.resume import local_checkpoint
from framework.run_dirs import RunDirInUse, RunDirLock, claim
from tests.conftest import run_cli, start_cli

TINY = [
    "total_steps=400",
    "eval.every_steps=0",
    "eval.at_start=false",
    "eval.episodes=1",
    "checkpoint.every_steps=200",
    "agent.learning_starts=100",
    "progress=off",
]


def test_claims_made_at_once_are_all_different(tmp_path: Path) -> None:
    base = str(tmp_path / "outputs" / "2026-01-01" / "10-31-13")
    got: list[str] = []
    barrier = threading.Barrier(16)

    def one() -> None:
        barrier.wait()
        got.append(claim(base))

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(set(got)) == 16
    assert base in got and f"{base}-15" in got
    assert all(Path(p).is_dir() for p in got)


def test_a_locked_run_directory_is_refused_and_free_again_once_released(tmp_path: Path) -> None:
    lock = RunDirLock(tmp_path / "run")
    with pytest.raises(RunDirInUse, match=r"in use by another run \(process \d+\)"):
        RunDirLock(tmp_path / "run")
    lock.release()
    RunDirLock(tmp_path / "run").release()


def test_eight_runs_started_at_once_each_get_their_own_directory(tmp_path: Path) -> None:
    """Eight seeds launched together from one directory (a script's `for s in ...; do ... &`): eight
    directories, each with its own config and checkpoints, each named in its own MLflow run."""
    processes = [start_cli(*TINY, f"seed={seed}", cwd=tmp_path) for seed in range(8)]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for p, out in zip(processes, outputs, strict=True):
        assert p.returncode == 0, out[-3000:]
    run_dirs = sorted(p for p in (tmp_path / "outputs").glob("*/*") if p.is_dir())
    assert len(run_dirs) == 8, run_dirs
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    assert len(runs) == 8
    by_dir = {Path(r.data.tags["framework.run_dir"]): r for r in runs}
    assert set(by_dir) == {d.resolve() for d in run_dirs}
    for run_dir in run_dirs:
        run = by_dir[run_dir.resolve()]
        seed = int(run.data.params["seed"])
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["seed"] == seed
        checkpoints = sorted((run_dir / "checkpoints").glob("step_*"))
        assert checkpoints, run_dir
        for checkpoint in checkpoints:
            state = read_state(checkpoint)
            assert state["run_id"] == run.info.run_id and state["seed"] == seed
            assert yaml.safe_load((checkpoint / "config.yaml").read_text())["seed"] == seed


def test_a_run_given_the_directory_of_a_live_run_is_refused_in_one_line(tmp_path: Path) -> None:
    first = start_cli("total_steps=1000000", "progress=log", "hydra.run.dir=outputs/same", cwd=tmp_path)
    try:
        assert first.stdout is not None
        deadline = time.monotonic() + 120
        for line in first.stdout:
            if "run started" in line:
                break
            assert time.monotonic() < deadline and first.poll() is None, line
        second = run_cli(*TINY, "seed=1", "hydra.run.dir=outputs/same", cwd=tmp_path)
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            f"Error: The run directory {(tmp_path / 'outputs/same').resolve()} is in use by another run "
            f"(process {first.pid}): give each run its own (leave hydra.run.dir unset, or set it to a "
            "directory of this run's own)"
        ], second.stderr
        assert first.poll() is None  # untouched, and its directory too
        assert (tmp_path / "outputs/same/.hydra").is_dir()
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(client.search_runs([client.get_experiment_by_name("framework").experiment_id])) == 1


def test_a_run_still_running_is_not_resumed_beside_itself(tmp_path: Path) -> None:
    """resume= of a live run (its directory or its id) would train it twice into one tracked run: it
    is refused before its checkpoint is read (which that run may be writing), nothing made."""
    first = start_cli(
        "total_steps=1000000", "eval.every_steps=0", "checkpoint.every_steps=200",
        "agent.learning_starts=100", "progress=log", "hydra.run.dir=outputs/live", cwd=tmp_path,
    )  # fmt: skip
    live = (tmp_path / "outputs/live").resolve()
    try:
        deadline = time.monotonic() + 120
        while not (live / "checkpoints/latest").is_file():
            assert time.monotonic() < deadline and first.poll() is None, "no checkpoint within 120 s"
            time.sleep(0.2)
        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
        (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
        for target in ("outputs/live", run.info.run_id):
            second = run_cli(f"resume={target}", "total_steps=2000000", cwd=tmp_path)
            assert second.returncode == 1, second.stdout[-2000:]
            assert " ".join(second.stderr.split()) == (
                f"Error: The run this command resumes goes on from {live}, which a live run holds (process "
                f"{first.pid}): the run itself, or another resume of it. A run goes on in one process at a "
                "time: let that one end (or stop it), then resume"
            ), second.stderr
        assert first.poll() is None
        assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["live"]  # no folder left
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130


def test_a_resume_holds_the_directory_it_goes_on_from_while_it_runs(tmp_path: Path) -> None:
    """Two resumes of one run started together both find it free: the one that holds its directory
    first goes on, the other is refused (then free again once the first has ended)."""
    from framework.errors import ConfigError
    from framework.resume import ResumePoint
    from framework.run_dirs import held

    source = tmp_path / "run"

    def point() -> ResumePoint:
        return ResumePoint(None, source / "checkpoints/step_1", None, 1, source=source)  # type: ignore[arg-type]

    refused = pytest.raises(ConfigError, match=f"goes on from {source.resolve()}, which a live run holds")
    with point().hold_source(), refused:
        point().hold_source()
    with point().hold_source():  # free again once the first had ended
        assert held(source)
    assert not held(source)
    # A live run that has not checkpointed yet is said to be live, not a directory without checkpoints.
    from omegaconf import OmegaConf

    from framework.resume import resume_point

    source.mkdir(parents=True, exist_ok=True)
    with point().hold_source(), refused:
        resume_point(OmegaConf.create({"resume": str(source)}), None, [], tmp_path / "new")  # type: ignore[arg-type]


def test_a_new_run_given_a_finished_runs_directory_is_refused_before_hydra_writes_there(
    tmp_path: Path,
) -> None:
    first = run_cli(*TINY, "seed=3", "hydra.run.dir=outputs/done", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    done = tmp_path / "outputs/done"
    before = {p: p.read_bytes() for p in done.rglob("*") if p.is_file()}
    second = run_cli(*TINY, "seed=4", "hydra.run.dir=outputs/done", cwd=tmp_path)
    assert second.returncode == 1
    (line,) = second.stderr.strip().splitlines()
    assert line.startswith(
        f"Error: The run directory {done.resolve()} holds the checkpoints of an earlier run (run "
    )
    assert f"its latest at step 400): continue that run with resume={done.resolve()}, or give" in line
    assert {p: p.read_bytes() for p in done.rglob("*") if p.is_file()} == before  # .hydra/ and the log too
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(client.search_runs([client.get_experiment_by_name("framework").experiment_id])) == 1
    # The command it names continues the run there.
    again = run_cli(f"resume={done.resolve()}", "total_steps=600", "hydra.run.dir=outputs/done", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_state(done / "checkpoints" / (done / "checkpoints/latest").read_text().strip())["step"] == 600


def test_resume_by_id_never_continues_another_runs_checkpoint(tmp_path: Path) -> None:
    """Run A, then run B's checkpoints copied over A's (what two runs given one directory did before
    a finished run's directory was refused, and what a copy by hand still does): resume=<A's id>
    finds B's checkpoint there and continues A from A's own artifacts instead."""
    first = run_cli(*TINY, "seed=3", "hydra.run.dir=outputs/shared", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_cli(*TINY, "seed=4", "total_steps=600", "hydra.run.dir=outputs/other", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    shutil.copytree(tmp_path / "outputs/other", tmp_path / "outputs/shared", dirs_exist_ok=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    (run_a,) = [r for r in runs if r.data.params["seed"] == "3"]
    found, why = local_checkpoint(run_a.info.run_id, run_a.data.tags["framework.run_dir"])
    assert found is None and "holds a checkpoint of another run" in why
    resumed = run_cli(f"resume={run_a.info.run_id}", "total_steps=500", "progress=log", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    out = resumed.said
    assert "holds a checkpoint of run" in out
    assert "dqn-s3 " in out and "resumed at step 400" in out, out


def test_a_run_or_sweep_directory_that_cannot_be_made_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    for given in ("hydra.run.dir=afile/x", "hydra.sweep.dir=afile/y"):
        r = run_cli(*(["-m", "seed=1,2"] if "sweep" in given else []), *TINY, given, cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
        assert " ".join(r.stderr.split()) == (
            f"Error: {given}: cannot make that directory (Not a directory): give one that can be made here"
        )


def test_a_run_directory_whose_run_went_on_elsewhere_is_refused_to_a_new_run(tmp_path: Path) -> None:
    """Its checkpoints went with the run (checkpoint.keep); its config, log and journal are still its."""
    import pytest

    from framework.checkpoint import WENT_ON_FILE, Checkpointer
    from framework.run_dirs import RunDirInUse, check_fresh

    later = tmp_path / "later"
    Checkpointer(later / "checkpoints", every_steps=0, keep=1, config_yaml="").save(
        30000, lambda folder: (folder / "w").write_text("x"), {"run_id": None}
    )
    first = tmp_path / "first"
    (first / "checkpoints").mkdir(parents=True)
    (first / "checkpoints" / WENT_ON_FILE).write_text(str(later))
    with pytest.raises(RunDirInUse, match=f"which went on in {later}: continue that run with resume={later}"):
        check_fresh(first)
