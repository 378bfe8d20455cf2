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
