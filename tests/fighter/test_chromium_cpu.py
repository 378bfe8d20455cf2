"""Which CPU a headless Chromium is pinned to (the processes themselves: test_browser.py)."""

from __future__ import annotations

import collections

import pytest

from framework_plugins.fighter import browser


@pytest.fixture
def four_cpus(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[int]:
    monkeypatch.setattr(browser.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    pinned: collections.Counter[int] = collections.Counter()
    monkeypatch.setattr(browser, "_PINNED", pinned)
    return pinned


def test_the_first_chromium_takes_the_highest_cpu_and_each_further_one_the_next_free(
    four_cpus: collections.Counter[int],
) -> None:
    assert browser.chromium_cpu() == 3
    four_cpus[3] += 1
    assert browser.chromium_cpu() == 2
    four_cpus.update([2, 1, 0])
    assert browser.chromium_cpu() == 3  # all taken once: shared again, from the top
    four_cpus[3] += 1
    four_cpus[2] -= 1  # one closed
    assert browser.chromium_cpu() == 2


def test_no_pinning_with_a_single_cpu_or_without_cpu_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser.os, "sched_getaffinity", lambda pid: {5})
    assert browser.chromium_cpu() is None
    monkeypatch.delattr(browser.os, "sched_getaffinity")
    assert browser.chromium_cpu() is None
