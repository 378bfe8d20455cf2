"""The Gomocup brain, a real `python -m framework gomocup` process playing the shipped 15x15 agent,
against input no manager should send: numbers in forms int() accepts but the protocol does not,
INFO values out of range, BOARD blocks of any length. Each is one ERROR line and the game goes on."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import popen_cli

pytestmark = pytest.mark.slow

MOVE = re.compile(r"^(\d+),(\d+)$")


class Brain:
    """`python -m framework gomocup gomoku_15x15 ...` in a subprocess, spoken to a line at a time."""

    def __init__(self, cwd: Path, *overrides: str) -> None:
        self.process = popen_cli(
            "gomocup", "gomoku_15x15", *overrides, cwd=cwd, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
            text=False,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.messages: list[str] = []
        self.errors: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.decode("ascii").rstrip("\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def send(self, *lines: str | bytes) -> None:
        assert self.process.stdin is not None
        for line in lines:
            self.process.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 120) -> str:
        """The next line that is not a MESSAGE."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"the brain exited: {b''.join(self.errors).decode(errors='replace')}"
            if line.startswith("MESSAGE"):
                self.messages.append(line)
                continue
            return line

    def ask(self, *lines: str | bytes) -> str:
        self.send(*lines)
        return self.answer()

    def move(self, *lines: str) -> tuple[int, int]:
        answer = self.ask(*lines)
        found = MOVE.match(answer)
        assert found, answer
        return int(found[1]), int(found[2])

    def resident_kb(self) -> int:
        """The process's resident memory now (Linux)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        assert found, status
        return int(found[1])

    def close(self) -> None:
        if self.process.poll() is None:
            self.send("END")
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def brain(tmp_path: Path) -> Iterator[Brain]:
    b = Brain(tmp_path, "search.num_simulations=8")
    yield b
    b.close()
    assert b.process.returncode == 0
    assert b"Traceback" not in b"".join(b.errors), b"".join(b.errors).decode(errors="replace")


def escaped(text: str) -> str:
    """`text` as the brain's ASCII answers write it."""
    return text.encode("ascii", "backslashreplace").decode()


#: Commands with a number int() reads but the protocol does not write, and that number.
NOT_ASCII_DIGITS = [
    ("TURN 1_0,1", "1_0"),  # int() reads 10
    ("TURN 10,1_1", "1_1"),
    ("TURN \uff11\uff10,1", "\uff11\uff10"),  # full-width digits: int() reads 10
    ("TURN \u0661\u0660,1", "\u0661\u0660"),  # Arabic-Indic digits: int() reads 10
    ("TURN +10,1", "+10"),
    ("PLAY 1_0,1", "1_0"),
    ("TAKEBACK \uff17,7", "\uff17"),
    ("START 1_5", "1_5"),
    ("START \uff11\uff15", "\uff11\uff15"),
    ("RECTSTART 15,1_5", "1_5"),
    ("INFO timeout_turn 1_000", "1_000"),
    ("INFO time_left \uff15\uff10\uff10", "\uff15\uff10\uff10"),
    ("INFO max_memory 1_000_000", "1_000_000"),
    ("INFO rule \u0661", "\u0661"),
    ("INFO game_type 1_0", "1_0"),
    ("INFO evaluate 1_0,1", "1_0"),
]


def test_a_number_not_in_ascii_digits_is_one_error_naming_it_and_the_game_goes_on(brain: Brain) -> None:
    assert brain.ask("START 15") == "OK"
    for command, value in NOT_ASCII_DIGITS:
        answer = brain.ask(command)
        assert answer.startswith("ERROR ") and f"'{escaped(value)}'" in answer, (command, answer)
        assert "digits 0-9" in answer, answer
        assert re.search(r"\(\w+ [\d,]+\)|from -?\d+ to \d+", answer), answer  # the valid form
        assert brain.ask("ABOUT").startswith('name="'), command  # the ERROR was the one line it said
    # Nothing was played nor changed: 10,1 is empty, and the game goes on from there.
    x, y = brain.move("TURN 10,1")
    assert (x, y) != (10, 1)
    assert brain.ask(f"TURN {x},{y}") == f"ERROR TURN {x},{y}: that cell is taken"


#: INFO values out of their range, each following a valid one.
OUT_OF_RANGE = [
    "INFO timeout_turn 1" + "0" * 400,  # was accepted, then an OverflowError at every move
    "INFO timeout_turn 2147483648",
    "INFO timeout_match 99999999999999999999",
    "INFO time_left -2147483649",
    "INFO max_memory 2000000000000",
    "INFO game_type 4",
    "INFO rule 16",
]


def test_an_info_value_out_of_range_is_one_error_and_the_value_in_force_stays(tmp_path: Path) -> None:
    brain = Brain(tmp_path, "search.num_simulations=1000000")  # only the time limit ends a search
    try:
        brain.send("INFO timeout_turn 300", "INFO timeout_match 1000000", "INFO time_left 1000000")
        brain.send("INFO max_memory 1000000000", "INFO game_type 1", "INFO rule 0")
        assert brain.ask("START 15") == "OK"
        for command in OUT_OF_RANGE:
            key = command.split()[1]
            answer = brain.ask(command)
            assert answer.startswith(f"ERROR INFO {key} ") and " is out of range: " in answer, answer
            stays = r"; (it stays \d+( ms)?|the rule stays freestyle)$"
            assert re.search(r"from -?\d+ to \d+" + stays, answer), answer
            assert len(answer) < 300, answer  # a 400-digit value is quoted cut short
            assert brain.ask("ABOUT").startswith('name="')
            # A move within the 300 ms in force (a million simulations would take minutes), in a game
            # of its own: one game of all these moves could end (five in a row) before the last.
            assert brain.ask("RESTART") == "OK"
            brain.move("TURN 0,14")
        simulations = [int(m.split()[4]) for m in brain.messages if m.startswith("MESSAGE value")]
        assert len(simulations) == len(OUT_OF_RANGE) and max(simulations) < 1_000_000, brain.messages
    finally:
        brain.close()
    assert b"Traceback" not in b"".join(brain.errors)


def test_a_board_block_longer_than_the_board_is_refused_at_done_and_kept_in_no_memory(brain: Brain) -> None:
    assert brain.ask("START 15") == "OK"
    brain.move("BEGIN")  # everything loaded and compiled: the memory the brain plays in
    before = brain.resident_kb()
    brain.send("BOARD")
    assert brain.process.stdin is not None
    chunk = b"7,7,1\n" * 10_000
    for _ in range(100):  # a million lines, 6 MB; kept as strings they would take some 60 MB
        brain.process.stdin.write(chunk)
    brain.process.stdin.flush()  # all but the pipe's few kB of it read by now
    grown_mb = (brain.resident_kb() - before) / 1024
    assert grown_mb < 20, f"the brain grew {grown_mb:.0f} MB reading the block"
    answer = brain.ask("DONE")
    assert (
        answer
        == "ERROR BOARD: more than 225 stones, the cells of the 15x15 board: one x,y,field line per stone"
    )
    # In step again at DONE: a position of one stone each, the brain to move.
    x, y = brain.move("BOARD", "7,7,2", "8,8,1", "3,3,2", "DONE")
    assert (x, y) not in {(7, 7), (8, 8), (3, 3)}


def test_a_bad_or_overlong_line_inside_board_refuses_the_block_at_done(brain: Brain) -> None:
    assert brain.ask("START 15") == "OK"
    answer = brain.ask("BOARD", "7,7,2", "x" * 10_000, "8,8,1", "DONE")
    assert answer == "ERROR BOARD: a line over 4096 characters long", answer
    answer = brain.ask("BOARD", "7,7,2", "1_0,1,1", "8,8,1", "3,3,2", "DONE")
    assert answer.startswith("ERROR BOARD x '1_0' is not a whole number in the digits 0-9"), answer
    assert brain.ask("ABOUT").startswith('name="')  # one answer per block, nothing read as a command
    assert brain.move("BOARD", "7,7,2", "DONE") != (7, 7)
