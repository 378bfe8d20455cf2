"""A stop asked of a run from another thread (its sweep stopping) is its first Ctrl-C, once; an interrupt
that leaves a string exec still ends the process with 130."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from framework import interrupts
from tests.conftest import FAST
from tests.test_lifecycle import only_run, store


@pytest.fixture(autouse=True)
def fresh_stop_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interrupts, "STOP_ASKED", threading.Event())


def test_a_stop_asked_from_another_thread_is_the_runs_first_ctrl_c(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stop, stopped = threading.Event(), []
    with interrupts.stop_on_sigint(stop, "stopping", on_stop=lambda: stopped.append(1)):
        asker = threading.Thread(target=interrupts.ask_to_stop)
        asker.start()
        asker.join()
        assert stop.is_set() and stopped == [1]
        interrupts.ask_to_stop()  # asked again (the watch, the terminal's Ctrl-C): still one stop
        assert stopped == [1] and capsys.readouterr().err.count("stopping") == 1
        # A Ctrl-C after it is the second one: the run stops at once.
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # its handler runs before the next line
    assert not interrupts._first_stops  # the run is over: nothing left to stop


def test_a_run_that_starts_after_the_stop_was_asked_stops_at_once() -> None:
    interrupts.ask_to_stop()  # no run yet: asked of the next
    stop, stopped = threading.Event(), []
    with interrupts.stop_on_sigint(stop, "stopping", on_stop=lambda: stopped.append(1)):
        assert stop.is_set() and stopped == [1]


def test_sigterm_while_training_ends_the_step_under_way_then_stops_where_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM raised where the run was (in the middle of a PPO update, whose half-updated weights the
    checkpoint then held); now the step under way ends first, unless it outlasts SIGTERM_GRACE_S."""
    monkeypatch.setattr(interrupts, "SIGTERM_GRACE_S", 0.5)
    stop = threading.Event()
    with interrupts.sigterm_as_interrupt(stop), interrupts.stop_on_sigint(stop, "stopping"):
        os.kill(os.getpid(), signal.SIGTERM)  # no interrupt: the step goes on
        assert stop.is_set() and "stopping" in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):  # a step that outlasts the grace is cut short
            threading.Event().wait(30)
    stop = threading.Event()
    with interrupts.sigterm_as_interrupt(stop), interrupts.stop_on_sigint(stop, "stopping"):
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(1.0)  # its training over within the grace: nothing cuts the ending short


def test_sigterm_outside_training_or_after_a_ctrl_c_stops_the_run_at_once() -> None:
    stop = threading.Event()
    with interrupts.sigterm_as_interrupt(stop), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)  # preparing, evaluating at the end: no step to end
    stop = threading.Event()
    with interrupts.sigterm_as_interrupt(stop), interrupts.stop_on_sigint(stop, "stopping"):
        interrupts.ask_to_stop()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_ctrl_c_whose_interrupt_was_lost_stops_the_run_that_starts_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that landed as Hydra wrote a sweep job's config.yaml was lost, and the job trained on:
    the Ctrl-C is remembered, and the run's own handling, once it begins, stops the run."""
    monkeypatch.setattr(interrupts, "CTRL_C", threading.Event())
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    lost = []
    try:
        interrupts.remember_ctrl_c()
        try:
            os.kill(os.getpid(), signal.SIGINT)  # delivered before kill returns, taken at once
        except KeyboardInterrupt:  # lost, as by code that catches what it should not
            lost.append(1)
        assert lost == [1] and interrupts.CTRL_C.is_set()
        stop = threading.Event()
        with interrupts.stop_on_sigint(stop, "stopping"):
            assert stop.is_set()
        # Where Ctrl-C is ignored (a background job), it stays ignored.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        interrupts.remember_ctrl_c()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


# `python -m` this module: the default experiment, its agent's training or the run's preparation
# ended by a KeyboardInterrupt that leaves a string exec (as a signal landing while dataclasses
# build their methods during an import does).
INTERRUPTED_IN_STRING_EXEC = """
import sys

import framework.run
from framework.__main__ import main


def interrupted(*args, **kwargs):
    exec("raise KeyboardInterrupt", {})


where = sys.argv.pop(1)
if where == "learn":  # imported here only: the others stop before the run would import torch
    from framework_plugins.dqn.agent import DQNAgent

    DQNAgent.learn = interrupted
elif where == "sweep":  # a sweep stopped before its parent run is opened (its study made, say)
    from framework_plugins.sweeps.parent import SweepParentRun

    SweepParentRun.on_multirun_start = interrupted
    sys.argv[1:1] = ["-m", "seed=1,2"]
else:
    framework.run._seed_everything = interrupted
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["learn", "prepare", "sweep"])
def test_an_interrupt_that_leaves_a_string_exec_still_exits_130(tmp_path: Path, where: str) -> None:
    """CPython marks such an interrupt unhandled even once caught, and under `python -m` would end the
    process by SIGINT (-2) instead of 130: a SIGTERM sent while torch imported did that."""
    (tmp_path / "interrupted_run.py").write_text(INTERRUPTED_IN_STRING_EXEC)
    r = subprocess.run(
        [sys.executable, "-m", "interrupted_run", where, *FAST],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 130, r.stdout[-2000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    if where == "learn":
        assert "Run KILLED at step 0" in r.stdout
        assert only_run(store(tmp_path)).info.status == "KILLED"
    else:  # before the run existed: one line, nothing tracked
        said = (
            "Sweep stopped before its first run started"
            if where == "sweep"
            else "Stopped before the run started"
        )
        assert r.stderr.strip().splitlines()[-1] == f"{said}: nothing was tracked."
        if (tmp_path / "mlflow.db").exists():
            client = store(tmp_path)
            assert not client.search_runs([e.experiment_id for e in client.search_experiments()])
        # Nor a run directory holding only Hydra's files and an empty log.
        assert not (tmp_path / "outputs").exists(), sorted(map(str, (tmp_path / "outputs").rglob("*")))
        assert not (tmp_path / "multirun").exists(), sorted(map(str, (tmp_path / "multirun").rglob("*")))


@pytest.mark.slow
def test_a_second_sigterm_as_a_stopped_runs_process_ends_still_exits_130(tmp_path: Path) -> None:
    """The interpreter's teardown (a second and more with torch and MLflow imported) ran with SIGTERM at
    its default: a second SIGTERM there (a scheduler's and its wrapper's, each sent once) ended the
    process 143 (-15 here). One is sent whenever the ending process would not take it. In a new
    interpreter, as a user's: the tests' zygote always ended its children without that teardown."""
    run = subprocess.Popen(
        [sys.executable, "-m", "framework", "total_steps=1000000", "tracking=none", "progress=log"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    said: list[str] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            said.append(line)
            if "run started" in line:
                run.send_signal(signal.SIGTERM)
            if "continue with" in line:  # its end said: the process is ending
                # A second SIGTERM whenever the process, still there, would not take it.
                deadline = time.monotonic() + 120
                while run.poll() is None and time.monotonic() < deadline:
                    if not _takes_sigterm(run.pid):
                        with contextlib.suppress(ProcessLookupError):
                            run.send_signal(signal.SIGTERM)
                    threading.Event().wait(0.005)
        assert run.wait(timeout=120) == 130, "".join(said)[-3000:]
    finally:
        run.kill()
        run.wait()
    assert any(line.startswith("Run KILLED at step") for line in said), "".join(said)[-3000:]


def _takes_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler of SIGTERM (True where it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        caught = next(line for line in status if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return True
    return bool(int(caught.split()[1], 16) & 1 << (signal.SIGTERM - 1))
