"""Lines for a terminal of 100 columns: what the CLI prints wraps at spaces to fit, while a path or an
address stays whole on its line, so that it can be copied (the one thing allowed past column 100)."""

from __future__ import annotations

import re
import shutil
import textwrap
from typing import TextIO

#: The widest line the CLI prints (a path or an address aside), whatever the terminal's width.
WIDTH = 100

#: A word that is a path or an address: `/abs/path`, `resume=/abs/path`, `~/x`, `./x`, `scheme://...`.
_ADDRESS = re.compile(r"(?:^|[=(:'\"`<\[])(?:/|~/|\.\.?/)|[a-z][a-z0-9+.-]*://", re.IGNORECASE)
#: A command that wrapping keeps on one line: quoted in backticks, or this program and its first word.
_COMMAND = re.compile(r"`[^`\n]{1,60}`|python -m framework(?: \S+)?")
#: What stands for a space that is no place to break a line (a character of Unicode's private use).
_GLUE = "\ue000"


def width() -> int:
    """The columns to fill: the terminal's (or COLUMNS), WIDTH where there is none, never more."""
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def is_address(word: str) -> bool:
    """Whether a word (no spaces) is a path or an address."""
    return _ADDRESS.search(word) is not None


def fits(line: str, columns: int = WIDTH) -> bool:
    """Whether `line` fits `columns`, its paths and addresses left out of the count: a line may be long
    only by what cannot be cut."""
    return len(line) - sum(len(w) for w in line.split() if is_address(w)) <= columns


def wrap(text: str, columns: int, *, indent: str = "", first: str = "") -> list[str]:
    """`text` in lines of at most `columns`, broken at spaces only (a path, an address or any other
    long word stays whole, alone on its line where it must; so does a short command, quoted in
    backticks or `python -m framework WORD`): `first` starts the first line, `indent` the others."""
    glued = _COMMAND.sub(lambda m: m.group().replace(" ", _GLUE), text)
    lines = textwrap.wrap(
        glued,
        columns,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(_GLUE, " ") for line in lines] or [first.rstrip()]


def refusal(message: str, stream: TextIO) -> str:
    """`Error: MESSAGE` as printed to `stream` (`for_stream`)."""
    return for_stream(f"Error: {message}", stream)


def for_stream(text: str, stream: TextIO) -> str:
    """A message as printed to `stream`: on a terminal, wrapped to its width (the lines after the
    first indented); elsewhere (a pipe, a log file) as it is, so that each message is a line to grep."""
    if not _is_terminal(stream):
        return text
    return "\n".join(
        line for paragraph in text.splitlines() for line in wrap(paragraph, width(), indent="  ")
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced stream without isatty, or a closed one
        return False
