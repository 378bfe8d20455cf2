"""Checkpoints on disk and the progress display."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from framework.checkpoint import Checkpointer, find_latest, read_state
from framework.progress import ProgressDisplay


def save_agent(path: Path) -> None:
    (path / "weights.bin").write_bytes(b"w")


def test_checkpoints_keep_the_newest_and_point_latest_at_the_last(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path / "checkpoints", every_steps=100, keep=2, config_yaml="seed: 1\n")
    for step in (100, 200, 300):
        ck.save(step, save_agent, {"run_id": "abc"})
    kept = sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*"))
    assert kept == ["step_0000000200", "step_0000000300"]
    latest = find_latest(tmp_path)
    assert latest is not None and latest.name == "step_0000000300"
    assert read_state(latest) == {"run_id": "abc", "step": 300}
    assert (latest / "agent" / "weights.bin").read_bytes() == b"w"
    assert (latest / "config.yaml").read_text() == "seed: 1\n"


def test_a_resumed_runs_checkpoints_and_those_it_went_on_from_count_together(tmp_path: Path) -> None:
    """Each resume wrote `keep` checkpoints into a new directory and left the earlier ones: a run
    requeued on a small disk filled it a part at a time. No more than `keep` are ever on disk."""
    first = Checkpointer(tmp_path / "a" / "checkpoints", every_steps=100, keep=2, config_yaml="")
    for step in (100, 200, 300):
        first.save(step, save_agent, {})
    seen: list[int] = []

    def counting(path: Path) -> None:  # how many are on disk as each is written
        seen.append(len(list(tmp_path.glob("*/checkpoints/step_*"))))
        save_agent(path)

    resumed = Checkpointer(
        tmp_path / "b" / "checkpoints", every_steps=100, keep=2, config_yaml="", earlier=first.root
    )
    resumed.save(400, counting, {})
    assert sorted(p.name for p in tmp_path.glob("*/checkpoints/step_*")) == [
        "step_0000000300",
        "step_0000000400",
    ]
    resumed.save(500, counting, {})
    assert [p.parent.parent.name for p in tmp_path.glob("*/checkpoints/step_*")] == ["b", "b"]
    assert seen == [1, 1]  # room made before each write: the newest alone stays meanwhile
    assert find_latest(tmp_path / "b").name == "step_0000000500"  # type: ignore[union-attr]


def test_a_failed_save_leaves_the_previous_checkpoint_latest(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path, every_steps=100, keep=2, config_yaml="")
    ck.save(100, save_agent, {})

    def broken(path: Path) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        ck.save(200, broken, {})
    latest = find_latest(tmp_path)
    assert latest is not None and json.loads((latest / "state.json").read_text())["step"] == 100


@pytest.mark.parametrize(
    ("previous", "step", "due"), [(0, 99, False), (99, 100, True), (100, 150, False), (150, 216, True)]
)
def test_checkpoint_is_due_when_a_multiple_is_crossed(previous: int, step: int, due: bool) -> None:
    assert Checkpointer(Path("."), every_steps=100, keep=1, config_yaml="").due(step, previous) is due


def test_log_mode_prints_steps_per_second_and_eval_return(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="framework")
    progress = ProgressDisplay(1000, mode="log", log_every_s=0.0)
    progress.set_eval({"eval/return_mean": 123.4})
    assert progress.update(500)
    assert "step 500/1000 (50%)" in caplog.text and "eval/return_mean 123.4" in caplog.text
    assert "steps/s" in caplog.text
    progress.set_eval({"eval/return_mean": 0.25})  # a score: not "0.2", as the run's last lines say 0.25
    assert progress.update(600)
    assert "eval/return_mean 0.25" in caplog.text


def test_an_evaluations_line_is_the_intervals_line(caplog: pytest.LogCaptureFixture) -> None:
    """An evaluation that took longer than the interval says its line; the step after it does not
    say another (`step 30000/50000` then `step 30001/50000`, once)."""
    caplog.set_level("INFO", logger="framework")
    progress = ProgressDisplay(50_000, mode="log", log_every_s=10.0)
    progress.update(30_000)
    progress._last_log -= 15.0  # the evaluation at step 30000 took 15 s
    progress.set_eval({"eval/return_mean": 500.0})
    assert not progress.update(30_001)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["step 30000/50000"], caplog.text


@pytest.mark.slow
def test_a_terminal_gets_a_progress_bar_that_log_lines_do_not_overwrite(tmp_path: Path) -> None:
    """On a TTY the run shows a rich bar with steps/s and the latest eval return; log lines print
    above it on rows of their own, and the run's last lines say where its results are."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "framework", "total_steps=2048", "eval.every_steps=1024", "eval.episodes=1",
         "tracking=none"],
        cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait(timeout=120) == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert "━" in screen  # rich's bar
    assert "steps/s" in screen
    assert re.search(r"eval/return_mean \d+(\.\d+)? ", screen), "the latest eval return is shown"
    assert "2048/2048" in screen and "100%" in screen
    assert re.search(r"\d:\d\d:\d\d(\x1b\[[0-9;]*m)* elapsed", screen), "the time spent is shown"
    rows = [row for line in screen.splitlines() for row in line.split("\r")]
    started = [row for row in rows if "run started:" in row]
    assert started and not any("━" in row or "steps/s" in row for row in started), started
    tail = screen[screen.rindex("Run FINISHED") :]
    assert "━" not in tail, "nothing of the bar is drawn after the run's last lines"
    assert "run dir" in tail and "view it" in tail
    # The last lines are in the run's log file too (on a terminal, log lines reach it alone).
    (log_file,) = tmp_path.glob("outputs/*/*/framework.log")
    assert "Run FINISHED at step 2048 of 2048." in log_file.read_text()


def test_a_checkpoint_half_written_by_a_killed_run_is_removed_by_the_next_save(tmp_path: Path) -> None:
    """kill -9 mid-save left `.tmp_step_*` for ever (with a large replay, large), in the run's own
    directory and in the one a resumed run goes on from."""
    earlier, root = tmp_path / "first" / "checkpoints", tmp_path / "second" / "checkpoints"
    for folder in (earlier, root):
        (folder / ".tmp_step_0000002016" / "agent").mkdir(parents=True)
        (folder / ".tmp_step_0000002016" / "agent" / "replay.bin").write_bytes(b"x" * 1024)
    saver = Checkpointer(root, every_steps=1, keep=2, config_yaml="{}", earlier=earlier)
    saver.save(3000, lambda path: (path / "model").write_text("m"), {})
    assert not list(tmp_path.rglob(".tmp_step_*")), sorted(map(str, tmp_path.rglob("*")))
    assert (root / "step_0000003000" / "agent" / "model").read_text() == "m"
