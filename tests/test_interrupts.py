"""A stop asked of a run from another thread (its sweep stopping) is its first Ctrl-C, once."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from framework import interrupts


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
