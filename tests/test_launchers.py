"""Sweeps through Hydra's launchers: local processes (joblib) here, Ray tasks in test_ray_launcher.py.

Each sweep must land as one parent run with a FINISHED child per job in the one ./mlflow.db of the
launching directory, with the jobs' run dirs in the sweep's multirun dir, as in-process sweeps do.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from framework.contracts.sweeper import PARENT_RUN_ENV
from framework_plugins.sweeps import parent as sweep
from framework_plugins.sweeps import ray_launcher as rl
from framework_plugins.sweeps.parent import SWEPT_KEYS_ENV
from tests.conftest import FAST, start_cli

#: Each job's log lines start with its process id, so that a test sees where each job ran.
PID_LOG_FORMAT = 'hydra.job_logging.formatters.simple.format="pid=%(process)d %(message)s"'


def assert_one_sweep_of_two(tmp_path: Path, launcher: str) -> dict[str, int]:
    """The parent and its two FINISHED children, in ./mlflow.db of the launch dir; the pid of each job."""
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None, f"{launcher}: nothing in {tmp_path / 'mlflow.db'}"
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, f"{launcher}: {[(r.info.run_name, r.info.status) for r in runs]}"
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    seen = [(r.info.run_name, r.info.status, r.data.tags.get("mlflow.parentRunId")) for r in runs]
    named = sorted((c.info.run_name.split(" cfg:")[0], c.info.status) for c in children)
    assert named == [("s1 dqn cartpole", "FINISHED"), ("s2 dqn cartpole", "FINISHED")], f"{launcher}: {seen}"
    # Named where Hydra starts each job (the sweeps plugin), for the config it runs: one config, two seeds.
    hashes = {c.info.run_name.partition(" cfg:")[2] for c in children}
    assert len(hashes) == 1 and re.fullmatch(r"[0-9a-f]{4}", hashes.pop()), f"{launcher}: {seen}"

    # The parent's summary lists both children.
    table = Path(
        client.download_artifacts(parent.info.run_id, "sweep_summary.csv", str(tmp_path))
    ).read_text()
    for child in children:
        assert f"{child.info.run_name},{child.info.run_id}," in table, table

    # Each job's run dir is in the sweep's multirun dir, under the launch dir.
    sweep_dir = (tmp_path / parent.data.tags["framework.sweep_dir"]).resolve()
    assert sweep_dir.is_relative_to(tmp_path / "multirun")
    pids = {}
    for child in children:
        run_dir = Path(child.data.tags["framework.run_dir"])
        assert run_dir.parent == sweep_dir and (run_dir / "config.yaml").is_file()
        found = re.search(r"^pid=(\d+) run started", (run_dir / "framework.log").read_text(), re.MULTILINE)
        assert found, (run_dir / "framework.log").read_text()
        pids[f"seed={child.data.params['seed']}"] = int(found.group(1))
    return pids


@pytest.mark.slow
def test_a_sweep_through_the_joblib_launcher_runs_its_jobs_in_processes_of_their_own(
    cli: Any, tmp_path: Path
) -> None:
    r = cli("-m", "hydra/launcher=joblib", "seed=1,2", *FAST, "progress=off", PID_LOG_FORMAT, timeout=90)
    assert r.returncode == 0, r.output[-3000:]
    assert "Sweep FINISHED: 2 runs (2 FINISHED)." in r.stdout
    pids = assert_one_sweep_of_two(tmp_path, "joblib")
    assert pids["seed=1"] != pids["seed=2"], pids


@pytest.mark.slow
def test_ctrl_c_to_a_joblib_sweep_ends_each_running_job_killed_with_its_checkpoint_and_starts_no_more(
    tmp_path: Path,
) -> None:
    """Ctrl-C in a terminal: SIGINT to the sweep's process group (its loky workers too). Loky tore its
    workers down at once, so a job ended without a last checkpoint or its line to go on with, one
    FAILED. Now the sweep waits for its jobs to end as a run does, and the third job does not start."""
    p = start_cli(
        "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=1,2,3", "total_steps=400000",
        "eval.every_steps=0", "checkpoint.every_steps=0", "progress=off",
        cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    wait_for_both_jobs(p, tmp_path)
    time.sleep(1)
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    assert "Stopping the sweep: each running job ends KILLED after its current step" in out, out[-3000:]
    assert "Sweep KILLED: 2 runs (2 KILLED)." in out, out[-3000:]
    assert "  jobs              3 in the sweep; 1 not started: a sweep of their values runs them" in out, out
    said = " ".join(out.split())  # the job not started, named (its directory is the started ones' way)
    assert "one by one: python -m framework seed=3 total_steps=400000" in said, out

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    runs = {r.info.run_name.split()[0]: r for r in client.search_runs([experiment.experiment_id])}
    statuses = {name: r.info.status for name, r in runs.items()}  # `sweep`, the parent; `s1`, seed=1's job
    assert statuses == {"sweep": "KILLED", "s1": "KILLED", "s2": "KILLED"}, statuses
    for name in ("s1", "s2"):
        run_dir = Path(runs[name].data.tags["framework.run_dir"])
        # Its last checkpoint, at the step it stopped at (none was due before), and its line to go on.
        latest = (run_dir / "checkpoints" / "latest").read_text().strip()
        assert latest.startswith("step_") and int(latest[5:]) > 0, latest
        assert f"continue with     python -m framework resume={run_dir}" in out, out[-3000:]
        assert f"checkpoint        {run_dir / 'checkpoints' / latest}" in out, out[-3000:]
    sweep_dir = Path(runs["s1"].data.tags["framework.run_dir"]).parent
    assert sorted(d.name for d in sweep_dir.iterdir() if d.is_dir()) == ["0", "1"]  # seed=3's never started
    assert not any(sweep_dir.glob(".sweep-stopping"))


def wait_for_both_jobs(p: Any, tmp_path: Path) -> None:
    """Until both jobs of the sweep `p` runs in `tmp_path` have started their runs."""
    deadline = time.monotonic() + 120
    while (
        len([f for f in tmp_path.glob("multirun/*/*/*/framework.log") if "run started" in f.read_text()]) < 2
    ):
        assert p.poll() is None, p.stdout.read() if p.stdout else ""
        assert time.monotonic() < deadline, "the jobs did not start within 120 s"
        time.sleep(0.2)


def test_a_joblib_sweep_killed_outright_takes_its_workers_with_it_and_its_jobs_end_killed(
    tmp_path: Path,
) -> None:
    """SIGKILL to the sweep's process alone (the OOM killer's, say): its loky workers see it gone,
    end their runs KILLED with a last checkpoint, and exit, within about 10 s."""
    from framework_plugins.sweeps.orphans import start_time

    p = start_cli(
        "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=1,2", "total_steps=400000",
        "eval.every_steps=0", "progress=log", "log_every_s=0.5", cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    logs: list[Path] = []
    while len(logs) < 2:  # both jobs training
        logs = [f for f in tmp_path.glob("multirun/*/*/*/framework.log") if "| eval/" in f.read_text()]
        assert p.poll() is None, p.stdout.read() if p.stdout else ""
        assert time.monotonic() < deadline, "the jobs did not start within 120 s"
        time.sleep(0.2)
    # What it started: its children, and its tracking process, which the tests' zygote forks for it.
    workers = {
        int(pid): start_time(int(pid))
        for pid in os.listdir("/proc")
        if pid.isdigit() and start_time(int(pid)) and _started_by(p.pid, int(pid), tmp_path.resolve())
    }
    assert len(workers) >= 2, workers
    p.kill()
    p.communicate(timeout=60)
    killed = time.monotonic()
    while any(start_time(pid) == started for pid, started in workers.items()):
        assert time.monotonic() - killed < 30, "loky workers outlived their sweep by 30 s"
        time.sleep(0.2)
    assert time.monotonic() - killed < 15  # 1 s to notice, a few to end the runs KILLED
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None
    deadline = time.monotonic() + 60  # each job's tracking process ends its run as told
    while True:
        runs = {
            r.info.run_name.split()[0]: r.info.status for r in client.search_runs([experiment.experiment_id])
        }
        if runs.get("s1") == runs.get("s2") == "KILLED" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert runs["s1"] == runs["s2"] == "KILLED", runs
    for log in logs:
        assert (log.parent / "checkpoints" / "latest").is_file()


def _started_by(command: int, pid: int, cwd: Path) -> bool:
    """Whether `pid` is a child of `command`, or a child of its parent (the zygote) in its directory."""
    try:
        stat = (Path(f"/proc/{n}/stat").read_text().rsplit(")", 1)[1].split() for n in (pid, command))
        parent, zygote = (int(fields[1]) for fields in stat)
        beside = pid != command and parent == zygote and Path(f"/proc/{pid}/cwd").resolve() == cwd
        return parent == command or beside
    except (OSError, ValueError):
        return False


def test_the_callback_a_launcher_pickles_hands_its_job_the_parent_run_and_the_launch_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    callback = sweep.SweepParentRun()
    callback._run_id = "parent"
    callback._tracker = object()  # type: ignore[assignment]  # a tracker cannot be pickled
    callback._job_env = {PARENT_RUN_ENV: "parent", SWEPT_KEYS_ENV: '["seed"]'}
    callback._launch_dir = str(tmp_path)
    data = pickle.dumps(callback)

    for name in (PARENT_RUN_ENV, SWEPT_KEYS_ENV):  # set, then removed: undone (removed) after the test,
        monkeypatch.setenv(name, "")  # as the copy sets them (a later test's run would take them)
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path.parent)
    copy = pickle.loads(data)
    assert copy._tracker is None and copy._run_id is None  # only the launching process ends the parent
    assert os.environ[PARENT_RUN_ENV] == "parent" and os.environ[SWEPT_KEYS_ENV] == '["seed"]'
    assert Path.cwd() == tmp_path


@pytest.mark.parametrize(
    ("launcher", "said"),
    [
        (
            {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": 0},
            "hydra.launcher.n_jobs=0: the jobs run at once, a whole number from 1",
        ),
        (
            {"_target_": rl.RAY_LAUNCHER, "ray": {"init": {"num_cpus": "abc"}, "remote": {}}},
            "hydra.launcher.ray.init.num_cpus=abc: give a number, 0 or more",
        ),
        (
            {
                "_target_": rl.RAY_LAUNCHER,
                "ray": {"init": {"num_cpus": 2}, "remote": {"num_cpus": 4}},
            },
            "hydra.launcher.ray.remote.num_cpus=4: each job would ask for more than the Ray the launcher "
            "starts has (2), and wait for ever",
        ),
        (  # Ray's driver retried for minutes, saying only its own GCS lines
            {
                "_target_": rl.RAY_LAUNCHER,
                "ray": {"init": {"address": "127.0.0.1:9"}, "remote": {}},
            },
            "hydra.launcher.ray.init.address=127.0.0.1:9: no Ray cluster answers there (",
        ),
    ],
    ids=["joblib_n_jobs", "ray_num_cpus", "ray_more_than_it_has", "ray_address_nobody_answers"],
)
def test_launcher_settings_its_library_would_fail_or_hang_on_are_refused_first(
    launcher: dict[str, Any], said: str
) -> None:

    from framework.errors import ConfigError
    from framework_plugins.sweeps.parent import check_launcher

    with pytest.raises(ConfigError) as refused:
        check_launcher(OmegaConf.create({"hydra": {"launcher": launcher}}))
    assert str(refused.value).startswith(said), refused.value
    fine = {
        "_target_": rl.RAY_LAUNCHER,
        "ray": {"init": {"num_cpus": 2}, "remote": {"num_cpus": 1}},
    }
    check_launcher(OmegaConf.create({"hydra": {"launcher": fine}}))


def test_a_grid_sweep_that_stops_at_a_failed_job_says_how_many_it_had(cli: Any, tmp_path: Path) -> None:
    """PPO fails on Blackjack's Tuple observations as it starts learning; Hydra's launcher runs no job
    after it: the sweep's last lines say so, not only "1 run"."""
    r = cli(
        "-m", "env=gym", "env.id=Blackjack-v1", "agent=ppo,a2c", "seed=0", "total_steps=300",
        "eval.episodes=1", timeout=300,
    )  # fmt: skip
    assert r.returncode == 1, r.output[-3000:]
    assert "Sweep FAILED: 1 run (1 FAILED)." in r.stdout, r.output[-3000:]
    assert (
        "  jobs              2 in the sweep; it stops at its first failed job, and those after it are not run"
        in r.stdout
    )
