"""A Gomocup brain's input: read in blocks, its lines the same as read a byte at a time (what it did
until a million-line BOARD took ~30 CPU-s), however the blocks fall; and the manager gone only once
every line read has been answered."""

from __future__ import annotations

import io
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_plugins.gomoku import brain_io
from framework_plugins.gomoku.brain_io import ReadAhead, input_lines


def byte_by_byte(data: bytes, max_line: int) -> list[str]:
    """The lines as the brain read them before: a line at a time from an unbuffered stream (a read per
    byte), an overlong one cut after `max_line` + 1 bytes and its rest skipped; without line ends."""
    stream, lines = io.BytesIO(data), []
    while line := stream.readline(max_line + 1):
        if len(line) > max_line and not line.endswith(b"\n"):
            rest = stream.readline(max_line)
            while rest and not rest.endswith(b"\n"):
                rest = stream.readline(max_line)
        lines.append(line.decode("utf-8", errors="replace").removesuffix("\n"))
    return lines


def read_in_blocks(data: bytes, max_line: int, block: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(brain_io, "READ_BYTES", block)
    ours, theirs = os.pipe()
    try:
        os.write(theirs, data)  # under a pipe's 64 KiB: written whole before it is read
        os.close(theirs)
        return [line for batch in input_lines(ours, max_line) for line in batch]
    finally:
        os.close(ours)


#: Input of few byte values, newlines and a non-UTF-8 byte among them, in runs that make long lines.
PIECES = st.sampled_from([b"\n", b"7,7,1", b"x" * 9, "é".encode(), b"\xff", b"\r\n", b""])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(PIECES, max_size=40), max_line=st.integers(1, 12), block=st.integers(1, 20))
def test_lines_read_in_blocks_are_those_read_a_byte_at_a_time(
    pieces: list[bytes], max_line: int, block: int
) -> None:
    data = b"".join(pieces)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert read_in_blocks(data, max_line, block, monkeypatch) == byte_by_byte(data, max_line)


def test_an_overlong_line_is_cut_and_its_rest_skipped_whatever_the_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = b"START 15\n" + b"x" * 10_000 + b"\nEND"
    for block in (3, 4096, 1 << 16):
        lines = read_in_blocks(data, 4096, block, monkeypatch)
        assert lines == ["START 15", "x" * 4097, "END"], (block, [len(line) for line in lines])


def test_the_manager_is_gone_once_every_line_read_is_answered() -> None:
    reader = ReadAhead([["BOARD", "7,7,1"], ["DONE"]])
    assert reader.ended.wait(10)
    lines = iter(reader)
    assert next(lines) == "BOARD" and not reader.gone()  # "7,7,1" and "DONE" are still to answer
    assert next(lines) == "7,7,1" and not reader.gone()
    assert next(lines) == "DONE" and reader.gone()
    assert list(lines) == []
