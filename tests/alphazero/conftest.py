"""Fixtures the AlphaZero command-line tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.alphazero.brain import Brain


@pytest.fixture
def brains() -> Iterator[list[Brain]]:
    started: list[Brain] = []
    yield started
    for brain in started:
        brain.close()
