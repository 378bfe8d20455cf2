"""The play page's server for its tests: a 7x7 board, four in a row, the hand-made prior's search."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from framework_plugins.gomoku.page import PlayServer
from framework_plugins.gomoku.rules import Gomoku
from tests.gomoku.test_play_page import SearchOnlyPlayer


@pytest.fixture
def server() -> Iterator[PlayServer]:
    s = PlayServer(SearchOnlyPlayer(Gomoku(board_size=7, n_in_row=4)), "127.0.0.1", 0)
    s.start()
    yield s
    s.close()
