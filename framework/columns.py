"""Lines for a 100-column terminal, wrapped at spaces, a path kept whole to copy."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
from typing import Any, TextIO

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
    """Whether `line` fits `columns`, not counting its paths and addresses (what cannot be cut)."""
    return len(line) - sum(len(w) for w in line.split() if is_address(w)) <= columns


def wrap(text: str, columns: int, *, indent: str = "", first: str = "") -> list[str]:
    """`text` in lines of at most `columns`, broken at spaces only; `first` begins line 1, `indent` the rest.
    A path or address stays whole (`fits`), any other long word gets a line, a short command isn't split."""
    glued = _COMMAND.sub(lambda m: m.group().replace(" ", _GLUE), text.expandtabs())
    body = glued.lstrip(" ")
    line = first + glued[: len(glued) - len(body)]  # a paragraph's own indentation kept
    used, empty, lines = len(line), True, []
    for gap, word in re.findall(r"( *)(\S+)", body):
        # A path or an address too long for any line counts nothing, so the prose goes on after it.
        cost = 0 if is_address(word) and len(indent) + len(word) > columns else len(word)
        if not empty and used + len(gap) + cost > columns:
            lines.append(line)
            line, used = indent + word, len(indent) + cost
        else:
            line, used = line + ("" if empty else gap) + word, used + (0 if empty else len(gap)) + cost
        empty = False
    lines.append(line.rstrip() if empty else line)
    return [item.replace(_GLUE, " ") for item in lines]


def refusal(message: str, stream: TextIO) -> str:
    """`Error: MESSAGE` for `stream` (`for_stream`); its first line names what was refused, for grep."""
    return for_stream(f"Error: {message}", stream)


def refuse(message: str) -> None:
    """Print `Error: MESSAGE` on stderr, wrapped to fit (`refusal`)."""
    print(refusal(message, sys.stderr), file=sys.stderr)


def for_stream(text: str, stream: TextIO) -> str:
    """`text` wrapped (`wrap`) to the terminal, or to WIDTH for a pipe or file (read later at 100 columns)."""
    columns = width() if _is_terminal(stream) else WIDTH
    return "\n".join(
        line for paragraph in text.splitlines() for line in wrap(paragraph, columns, indent="  ")
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced stream without isatty, or a closed one
        return False


#: A job line's `++hydra.job.env_set.X='{...}'`: a sweeper's plumbing (Optuna's storage), left to the log.
_ENV_SET = re.compile(r" ?\+{0,2}hydra\.job\.env_set\.\w+=(?:'(?:[^'\\]|\\.)*'|\S+)")


class LogFormatter(logging.Formatter):
    """Console log lines (`hydra.job_logging`): records wider than WIDTH wrapped, tracebacks as they are."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = _ENV_SET.sub("", super().formatMessage(record))
        return "\n".join(
            line
            for paragraph in message.splitlines()
            for line in ([paragraph] if fits(paragraph) else wrap(paragraph, WIDTH, indent="  "))
        )


class ReaderMayGo:
    """A stream (stdout, stderr) whose reader may go (`| head`): once it has, what is written goes to
    /dev/null, rather than a BrokenPipeError failing whatever printed (a log line, a finished run's end)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
