"""What a number of the Gomocup protocol may be: ASCII digits 0-9, within the range its place allows.

Python's int() reads more than a manager ever writes ('1_0' as 10, '+7', the full-width '１０', the
Arabic-Indic '٣'). The brain reads only what the protocol writes and refuses anything else with an
ERROR naming the value and the valid form, so that a garbled command is never played as another move.
"""

from __future__ import annotations

import dataclasses

#: The most significant digits a protocol number may have: every range of the protocol is narrower,
#: and the brain never converts (nor echoes) a number thousands of digits long.
MAX_DIGITS = 18
#: The most characters of a refused value an ERROR line quotes.
QUOTE_CHARS = 40
#: The protocol's times are 32-bit milliseconds: a manager sends time_left 2147483647 for a match
#: without a time limit (about 24.8 days, the longest limit there is).
MAX_MS = 2**31 - 1
#: The largest memory limit read (1 TiB, more than a match's machine has): a larger one is garbled.
MAX_MEMORY_BYTES = 2**40


class ProtocolError(ValueError):
    """A command the brain cannot carry out: answered `ERROR <message>`."""


@dataclasses.dataclass(frozen=True)
class InfoRange:
    """The whole numbers an INFO key may take, and what they mean (said when a value is refused)."""

    low: int
    high: int
    meaning: str

    @property
    def form(self) -> str:
        return f"{self.meaning}, from {self.low} to {self.high}"


#: The INFO keys read as numbers. `evaluate` is x,y (checked, not used); `folder` and keys this
#: brain does not know are ignored, as the protocol allows, and nothing of them is kept.
INFO_RANGES: dict[str, InfoRange] = {
    "timeout_turn": InfoRange(0, MAX_MS, "milliseconds a move may take (0: play at once)"),
    "timeout_match": InfoRange(0, MAX_MS, "milliseconds the match may take (0: no limit)"),
    "time_left": InfoRange(-MAX_MS - 1, MAX_MS, "milliseconds left in the match (below 0 once overrun)"),
    "max_memory": InfoRange(0, MAX_MEMORY_BYTES, "bytes of memory (0: no limit)"),
    "game_type": InfoRange(0, 3, "0 a human opponent, 1 a brain, 2 a tournament, 3 a network tournament"),
    "rule": InfoRange(0, 15, "a sum of 1 exactly five, 2 continuous, 4 renju, 8 caro"),
}
#: INFO keys whose values are times in milliseconds.
TIME_KEYS = ("timeout_turn", "timeout_match", "time_left")


def quoted(text: str) -> str:
    """`text` as an ERROR line quotes it: in quotes, cut to QUOTE_CHARS."""
    return repr(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...")


def whole_number(text: str, what: str, form: str, *, signed: bool = False) -> int:
    """`text` (spaces and tabs around it aside) as a whole number written in the digits 0-9, with a
    leading '-' only where `signed`; else a ProtocolError naming `what`, the value and `form`."""
    text = text.strip(" \t")
    digits = text[1:] if signed and text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        if digits.startswith("-") and digits[1:].isascii() and digits[1:].isdigit():
            raise ProtocolError(f"{what} {quoted(text)} is below 0: {form}")
        raise ProtocolError(f"{what} {quoted(text)} is not a whole number in the digits 0-9: {form}")
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise ProtocolError(f"{what} {quoted(text)} is out of range: {form}")
    return int(text)


def number_pair(text: str, command: str, names: tuple[str, str], form: str) -> tuple[int, int]:
    """`a,b` as two whole numbers in the digits 0-9 (`names` name them in an ERROR)."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ProtocolError(f"{command} {quoted(text)}: expected {','.join(names)}: {form}")
    first, second = (
        whole_number(part, f"{command} {name}", form) for part, name in zip(parts, names, strict=True)
    )
    return first, second


@dataclasses.dataclass
class BoardBlock:
    """A BOARD command being read: its stones so far (at most one per cell), or why it is refused."""

    stones: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """(action, field) in the order given."""
    refused: str | None = None
    """The ERROR that answers the block at DONE; the lines until then are skipped."""
