"""The Gomocup (piskvork) protocol, command by command, with a search of the rules alone (no network)."""

from __future__ import annotations

import io
import re
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_plugins.gomoku.gomocup import GomocupBrain
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.mcts.config import SequentialConfig
from framework_plugins.mcts.engines import local_search, uniform_evaluator
from framework_plugins.mcts.puct import PuctSearch
from tests.conftest import LOADED_S

MOVE = re.compile(r"^(\d+),(\d+)$")


class Session:
    """A brain fed one command at a time; `send` returns its answer lines, MESSAGE lines apart."""

    def __init__(
        self, game: Gomoku, sims: int = 64, *, reuse_tree: bool = True, root: str = "puct", warm: bool = False
    ) -> None:
        self.reuse_tree, self.root = reuse_tree, root
        self.out = io.StringIO()
        self.engines: list[PuctSearch] = []
        self.brain = GomocupBrain(
            game, self._engine, num_simulations=sims, about={"name": "test", "version": "1"}, out=self.out
        )
        if warm:  # as `python -m framework gomocup` does before its first command
            self.brain.warm_up()
        self.messages: list[str] = []

    def _engine(self, game: Gomoku) -> PuctSearch:
        engine = local_search(
            SequentialConfig(num_simulations=8, reuse_tree=self.reuse_tree, root=self.root),
            game=game,
            evaluator_factory=uniform_evaluator(game),
            seed=0,
        )
        self.engines.append(engine)
        return engine

    def send(self, *lines: str) -> list[str]:
        start = self.out.tell()
        self.brain.serve(lines)
        self.out.seek(start)
        said = self.out.read().splitlines()
        self.messages += [line for line in said if line.startswith("MESSAGE")]
        return [line for line in said if not line.startswith("MESSAGE")]

    def move(self, *lines: str) -> tuple[int, int]:
        (answer,) = self.send(*lines)
        found = MOVE.match(answer)
        assert found, answer
        return int(found[1]), int(found[2])


GAME = Gomoku(9, 5)


def test_start_answers_ok_for_the_trained_size_and_an_error_line_for_any_other() -> None:
    session = Session(GAME)
    (answer,) = session.send("START 15")
    assert answer.startswith("ERROR ") and "9x9" in answer and "15x15" in answer
    assert session.send("RECTSTART 9,7")[0].startswith("ERROR ")
    assert session.send("START 9") == ["OK"]
    assert session.send("RECTSTART 9,9") == ["OK"]


def test_commands_before_start_are_errors_and_unknown_commands_are_unknown() -> None:
    session = Session(GAME)
    assert session.send("BEGIN")[0] == "ERROR no game: START n first"
    assert session.send("TURN 1,1")[0].startswith("ERROR ")
    assert session.send("SWAP2BOARD") == ["UNKNOWN SWAP2BOARD"]
    assert session.send("", "   ") == []


def test_about_names_the_brain() -> None:
    (answer,) = Session(GAME).send("ABOUT")
    assert answer == 'name="test", version="1"'


def test_begin_and_turn_answer_legal_moves_that_the_brain_also_plays() -> None:
    session = Session(GAME)
    session.send("START 9")
    x, y = session.move("BEGIN")
    state = session.brain.state
    assert state is not None and state.moves == [GAME.from_xy(x, y)]
    x2, y2 = session.move("TURN 4,4" if (x, y) != (4, 4) else "TURN 3,3")
    assert len(state.moves) == 3 and state.moves[-1] == GAME.from_xy(x2, y2)
    assert session.send("BEGIN")[0].startswith("ERROR BEGIN on a board that has stones")


def test_turn_on_a_taken_or_off_board_cell_is_an_error_and_changes_nothing() -> None:
    session = Session(GAME)
    session.send("START 9")
    x, y = session.move("BEGIN")
    before = list(session.brain.state.moves)  # type: ignore[union-attr]
    assert "taken" in session.send(f"TURN {x},{y}")[0]
    assert "off the 9x9 board" in session.send("TURN 9,0")[0]
    assert "expected x,y" in session.send("TURN 3")[0]
    assert "is not a whole number in the digits 0-9" in session.send("TURN a,b")[0]
    assert session.send("INFO timeout_turn -5")[0].startswith("ERROR INFO timeout_turn '-5' is below 0")
    assert session.brain.state.moves == before  # type: ignore[union-attr]


def test_the_brain_completes_its_own_four_and_blocks_the_opponents() -> None:
    session = Session(GAME, sims=200)
    session.send("START 9")
    # The brain's four in a row on row 0, open at (4,0): it wins there.
    win = session.send(
        "BOARD", "0,0,1", "0,8,2", "1,0,1", "1,8,2", "2,0,1", "2,8,2", "3,0,1", "3,8,2", "DONE"
    )
    assert win == ["4,0"]
    # The opponent's four on column 8 (x=8, y=0..3), the brain's stones scattered: it must block (8,4).
    session.send("RESTART")
    block = session.send("BOARD", "8,0,2", "0,4,1", "8,1,2", "2,6,1", "8,2,2", "4,2,1", "8,3,2", "DONE")
    assert block == ["8,4"]


def test_board_sets_the_colours_by_stone_counts_and_refuses_impossible_positions() -> None:
    session = Session(GAME)
    session.send("START 9")
    session.move("BOARD", "4,4,2", "3,3,1", "5,5,2", "DONE")  # the brain is white, to move with 1 stone
    state = session.brain.state
    assert state is not None and state.to_play == -1 + 2 * (len(state.moves) % 2 == 0)
    assert state.board[GAME.from_xy(4, 4)] == 1 and state.board[GAME.from_xy(3, 3)] == -1
    assert session.move("BOARD", "DONE")  # an empty board: the brain opens
    assert "own stones" in session.send("BOARD", "1,1,1", "2,2,1", "DONE")[0]
    assert "given twice" in session.send("BOARD", "1,1,2", "1,1,1", "DONE")[0]
    assert "field '3'" in session.send("BOARD", "1,1,3", "DONE")[0]
    five = [f"{x},0,2" for x in range(5)] + [f"{x},5,1" for x in range(4)]
    assert "game is over" in session.send("BOARD", *five, "DONE")[0]


def test_takeback_removes_a_stone_and_play_places_the_managers_move() -> None:
    session = Session(GAME)
    session.send("START 9")
    x, y = session.move("BEGIN")
    assert session.send(f"TAKEBACK {x},{y}") == ["OK"]
    assert session.brain.state.moves == []  # type: ignore[union-attr]
    assert "no stone" in session.send("TAKEBACK 0,0")[0]
    assert session.send("PLAY 2,3") == ["2,3"]
    assert session.brain.state.moves == [GAME.from_xy(2, 3)]  # type: ignore[union-attr]


def test_a_turn_given_when_the_brain_is_to_move_is_refused_not_played_for_it() -> None:
    """After its own stone was taken back, TURN played the opponent's stone as its own: it then
    completed the opponent's four with "a winning move"."""
    session = Session(GAME)
    session.send("START 9")
    x, y = session.move("BEGIN")
    assert session.send(f"TAKEBACK {x},{y}") == ["OK"]
    (answer,) = session.send("TURN 5,5")
    assert answer == (
        "ERROR TURN 5,5: it is this brain's move, not its opponent's (BOARD gives a position for it to "
        "move in)"
    )
    assert session.brain.state.moves == []  # type: ignore[union-attr]
    session.send("RESTART")
    session.move("TURN 5,5")  # a new game: the opponent may move first


def test_a_timed_moves_message_counts_every_search_it_ran() -> None:
    """The first timed search, sized before a rate was known, searched again in its own tree: the
    message gave the second's own simulations, 0 where the first had reached the target."""
    session = Session(GAME, sims=64)
    session.send("START 9", "INFO timeout_turn 5000")
    session.move("BEGIN")
    simulations = int(session.messages[-1].split("simulations ")[1].split()[0])
    assert 0 < simulations <= 64, session.messages


def test_restart_clears_the_board_and_end_stops_reading() -> None:
    session = Session(GAME)
    session.send("START 9")
    session.move("BEGIN")
    assert session.send("RESTART") == ["OK"]
    assert session.brain.state.moves == []  # type: ignore[union-attr]
    assert session.send("END", "ABOUT") == []  # nothing after END is read


def test_info_rule_one_plays_exactly_five_and_zero_freestyle() -> None:
    session = Session(GAME)
    session.send("INFO rule 1", "START 9")
    assert session.brain.game.rule == "exact" and session.engines[-1].game.rule == "exact"
    assert session.engines[0].cfg is not None and len(session.engines) == 2
    session.send("INFO rule 0")
    assert session.brain.game.rule == "freestyle"
    session.send("INFO rule 4")
    assert any("renju" in m for m in session.messages)


def test_a_turn_limit_bounds_the_search_and_a_limit_of_zero_plays_at_once() -> None:
    session = Session(Gomoku(15, 5), sims=1_000_000)
    session.send("INFO timeout_turn 400", "START 15")
    started = time.perf_counter()
    session.move("BEGIN")
    assert time.perf_counter() - started < 0.4 + LOADED_S  # a million simulations take minutes
    session.send("INFO timeout_turn 0")
    started = time.perf_counter()
    session.move("TURN 7,7" if session.brain.state.moves[0] != GAME.from_xy(7, 7) else "TURN 6,6")  # type: ignore[union-attr]
    assert time.perf_counter() - started < 0.2 + LOADED_S
    sims = [int(m.split()[4]) for m in session.messages if m.startswith("MESSAGE value")]
    assert sims[0] > sims[1] > 0


@pytest.mark.parametrize(
    "bad", ["abc", "-5", "1e9", "nan", "inf", "", "12.5", "٣", "1_0", "２", "+5", "2147483648"]
)
def test_a_turn_limit_not_a_number_in_range_is_an_error_and_the_limit_in_force_stays(bad: str) -> None:
    session = Session(Gomoku(15, 5), sims=1_000_000)
    session.send("INFO timeout_turn 300", "START 15")
    (answer,) = session.send(f"INFO timeout_turn {bad}")
    assert answer.startswith("ERROR INFO timeout_turn ") and "from 0 to 2147483647" in answer, answer
    assert answer.endswith("; it stays 300 ms"), answer
    started = time.perf_counter()
    session.move("BEGIN")
    assert time.perf_counter() - started < 0.3 + LOADED_S


@pytest.mark.parametrize("bad", ["abc", "1e9", "", "12.5", "٣", "--5", "2147483648", "-2147483649"])
def test_a_refused_time_left_sets_none(bad: str) -> None:
    fresh = Session(Gomoku(15, 5), sims=50)
    (answer,) = fresh.send(f"INFO time_left {bad}")
    assert answer.startswith("ERROR INFO time_left ") and answer.endswith("; none is set"), answer
    assert fresh.send("START 15") == ["OK"]
    assert "time_left" not in fresh.brain.info


def test_a_time_left_below_zero_is_the_protocols_overrun_match_and_the_brain_plays_at_once() -> None:
    session = Session(Gomoku(15, 5), sims=1_000_000)
    assert session.send("INFO timeout_match 100000", "INFO time_left -5", "START 15") == ["OK"]
    session.move("BEGIN")
    (said,) = [m for m in session.messages if m.startswith("MESSAGE value")]
    assert int(said.split()[4]) < 10_000, said  # not the million asked: the time was up


def test_a_match_time_limit_shares_the_time_left() -> None:
    session = Session(Gomoku(15, 5), sims=1_000_000)
    session.send("INFO timeout_turn 30000", "INFO timeout_match 100000", "INFO time_left 6000", "START 15")
    started = time.perf_counter()
    session.move("BEGIN")
    assert time.perf_counter() - started < 6.0 / 20 + 0.1 + LOADED_S


def test_a_whole_game_against_a_random_player_has_only_legal_answers() -> None:
    session = Session(Gomoku(7, 4), sims=32)
    session.send("START 7")
    game = Gomoku(7, 4)
    rng = np.random.default_rng(0)
    state = GameState(game)
    x, y = session.move("BEGIN")
    while True:
        assert state.legal[game.from_xy(x, y)]
        state.play(game.from_xy(x, y))
        if state.done:
            break
        mine = int(rng.choice(np.flatnonzero(state.legal)))
        state.play(mine)
        if state.done:
            break
        x, y = session.move("TURN {},{}".format(*game.to_xy(mine)))
    assert session.brain.state is not None and session.brain.state.moves == state.moves
    assert state.winner == 1  # the searching side beats a random one


def test_end_inside_board_ends_the_brain() -> None:
    session = Session(GAME)
    session.send("START 9")
    assert session.send("BOARD", "1,1,1", "END", "ABOUT") == []
    assert session.brain.state is not None and session.brain.state.moves == []


def test_takeback_of_any_stone_but_the_last_is_refused_and_changes_nothing() -> None:
    session = Session(GAME)
    session.send("START 9")
    session.send("PLAY 1,1", "PLAY 2,2", "PLAY 3,3")
    moves = list(session.brain.state.moves)  # type: ignore[union-attr]
    (answer,) = session.send("TAKEBACK 1,1")
    assert answer == "ERROR TAKEBACK 1,1: only the last stone (3,3) can be taken back"
    assert session.brain.state.moves == moves  # type: ignore[union-attr]
    assert session.send("TAKEBACK 3,3") == ["OK"]
    assert session.brain.state.moves == moves[:-1]  # type: ignore[union-attr]


def test_a_line_over_the_limit_is_an_error_and_the_brain_goes_on() -> None:
    session = Session(GAME)
    (answer,) = session.send("X" * 5000)
    assert answer == "ERROR a line over 4096 characters long"
    assert session.send("START 9") == ["OK"]


@pytest.mark.parametrize("limit_ms", [100, 1000])
@pytest.mark.parametrize(("reuse_tree", "root"), [(True, "puct"), (False, "puct"), (False, "gumbel")])
def test_a_turn_limit_holds_to_ten_percent_with_any_search(
    limit_ms: int, reuse_tree: bool, root: str
) -> None:
    session = Session(Gomoku(15, 5), sims=10_000_000, reuse_tree=reuse_tree, root=root, warm=True)
    session.send(f"INFO timeout_turn {limit_ms}", "START 15")
    session.move("BEGIN")  # compiled kernels
    times = []
    for _ in range(3):
        state = session.brain.state
        assert state is not None
        x, y = state.game.to_xy(int(np.flatnonzero(state.legal)[-1]))  # an empty cell
        started = time.perf_counter()
        session.move(f"TURN {x},{y}")
        times.append(time.perf_counter() - started)
    # Within 10 % on a quiet machine (benchmarks/gomocup_turns.py); a loaded one answers later.
    for seconds in times:
        assert 0.5 * limit_ms <= 1000 * seconds <= 1.1 * limit_ms + 1000 * LOADED_S, times


def test_the_first_timed_move_uses_its_time_not_only_the_tree_sized_before_any_rate_was_known() -> None:
    """Its tree sized before the brain had measured a rate (2,048 simulations), the first move of a
    3 s turn took 0.08 s; it searches again, sized by the rate it measured, in the time left."""
    session = Session(Gomoku(15, 5), sims=10_000_000, warm=True)
    session.send("INFO timeout_turn 1000", "START 15")
    started = time.perf_counter()
    session.move("BEGIN")
    seconds = time.perf_counter() - started
    assert 0.5 <= seconds <= 1.1 + LOADED_S, seconds
    simulations = int(re.search(r"simulations (\d+)", session.messages[-1])[1])  # type: ignore[index]
    assert simulations > 2048, session.messages


def test_a_move_searched_on_a_busy_machine_does_not_cut_the_next_ones_search_short() -> None:
    # A tournament machine is sometimes busy: a search slowed then must not size the next, quiet
    # one's tree so small that it ends long before its time is up.
    session = Session(Gomoku(15, 5), sims=10_000_000, reuse_tree=False, warm=True)
    session.send("INFO timeout_turn 1000", "START 15")
    session.move("BEGIN")  # compiled kernels

    def turn() -> float:
        state = session.brain.state
        assert state is not None
        x, y = state.game.to_xy(int(np.flatnonzero(state.legal)[-1]))
        started = time.perf_counter()
        session.move(f"TURN {x},{y}")
        return time.perf_counter() - started

    busy = threading.Event()

    def spin() -> None:  # holds the interpreter most of the time, as other work would hold the CPU
        while not busy.is_set():
            sum(range(1000))

    spinners = [threading.Thread(target=spin) for _ in range(3)]
    for spinner in spinners:
        spinner.start()
    try:
        turn()
    finally:
        busy.set()
        for spinner in spinners:
            spinner.join()
    assert 0.5 <= turn() <= 1.1


COMMANDS = ["START 9", "RESTART", "BEGIN", "TURN 4,4", "BOARD", "DONE", "1,1,1", "2,2,2", "TAKEBACK 4,4",
            "PLAY 3,3", "INFO timeout_turn 50", "INFO rule 1", "ABOUT", "RECTSTART 9,9"]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(COMMANDS),
            st.builds(lambda c, x, y: f"{c} {x},{y}", st.sampled_from(["TURN", "PLAY", "TAKEBACK"]),
                      st.integers(-3, 12), st.integers(-3, 12)),
            st.text(max_size=30),
            st.binary(max_size=30).map(lambda b: b.decode("utf-8", errors="replace")),
        ),
        max_size=25,
    )
)  # fmt: skip
def test_no_sequence_of_lines_makes_the_brain_raise(lines: list[str]) -> None:
    session = Session(GAME, sims=4)
    session.send(*lines)
    assert all(line.isprintable() for line in session.out.getvalue().splitlines())  # no control characters
    state = session.brain.state
    if state is not None:
        assert len(state.moves) == len(set(state.moves))
