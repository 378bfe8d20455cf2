"""A stopped sweep's jobs that a launcher's worker began but never ran leave no directory behind, and
are named among the jobs not started (a worker ended as it set one up left its Hydra files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from framework_plugins.sweeps.parent import SweepParentRun


def job_dir(sweep_dir: Path, number: int, seed: int, *, ran: bool) -> Path:
    """Job `number`'s directory as Hydra sets it up (seed=`seed`), with its run's files where it ran."""
    folder = sweep_dir / str(number)
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create([f"seed={seed}"]), folder / ".hydra" / "overrides.yaml")
    if ran:
        (folder / "config.yaml").write_text("seed: 1\n")
        (folder / "framework.log").write_text("run started\n")
    return folder


def test_a_killed_sweep_forgets_the_directories_of_jobs_that_never_ran_and_names_their_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sweep_dir = tmp_path / "multirun" / "day" / "time"
    ran = [job_dir(sweep_dir, 0, 1, ran=True), job_dir(sweep_dir, 1, 2, ran=True)]
    job_dir(sweep_dir, 2, 3, ran=False)  # set up as the sweep stopped: Hydra's files only
    (sweep_dir / "3").mkdir()  # made, and its worker ended before Hydra wrote in it
    (sweep_dir / "multirun.yaml").write_text("hydra: {}\n")
    parent = SweepParentRun()
    parent._sweep_dir, parent._elsewhere = str(sweep_dir), True
    parent._job_list = [[f"seed={seed}"] for seed in (1, 2, 3, 4)]

    parent._forget_jobs_not_started()

    assert sorted(p for p in sweep_dir.iterdir() if p.is_dir()) == ran
    assert (sweep_dir / "multirun.yaml").is_file()
    said = parent._commands_not_started()
    assert said.split("\n")[0] == "; one by one:"
    assert [line.strip() for line in said.split("\n")[1:]] == [
        "python -m framework seed=3",
        "python -m framework seed=4",
    ]
