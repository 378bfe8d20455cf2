"""A page server's per-run token kept out of every log line, in every form a request can carry it.

How a request reaches a log line: aiohttp's server logs a request it cannot parse with the parser's
message, which quotes the request line (a line too long cut at 100 characters: part of the token;
a percent-encoded token as it came); a handler's exception logs a traceback whose messages may quote
the request; asyncio logs a failed task with its repr; the access log writes every request line (our
servers turn it off). So:

- aiohttp's request log of a server goes to a logger of the server's own (handed to
  `web.AppRunner(logger=...)`), guarded like the rest: a malformed request or a lost connection is
  one line naming the error's type and status, and what the client sent is never written;
- every line of that logger, of aiohttp's and asyncio's loggers and of the server's own has each
  guarded token replaced by PLACEHOLDER in every form: whole, or any run of MIN_RUN or more of its
  consecutive characters, each written as itself or percent-encoded (%41 for A).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Collection

from aiohttp.http_exceptions import HttpProcessingError

PLACEHOLDER = "<token>"
#: The shortest run of a token's characters replaced: shorter runs occur in ordinary text, and five
#: characters of a 22-character token leave 2^100 or more guesses.
MIN_RUN = 6
#: Loggers whose lines may quote a request: aiohttp's server side, and asyncio's (a failed task's repr).
QUOTING_LOGGERS = (
    "aiohttp.access",
    "aiohttp.internal",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.websocket",
    "asyncio",
)
#: Errors that are the client's doing (a request that is not HTTP, a connection lost mid-request):
#: one line each, never the traceback or the message (which quote what the client sent).
CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    HttpProcessingError,
    ConnectionError,
    asyncio.CancelledError,
)
_HEX = frozenset("0123456789abcdefABCDEF")
#: A record's own attributes; any other string attribute came as `extra=` (the access log's request line).
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def redact(text: str, tokens: Collection[str]) -> str:
    """`text` with every run of MIN_RUN or more consecutive characters of a token (each as itself or
    percent-encoded) replaced by PLACEHOLDER."""
    tokens = [token for token in tokens if len(token) >= MIN_RUN]
    if not tokens or not text:
        return text
    if "%" not in text and not any(
        token[i : i + MIN_RUN] in text for token in tokens for i in range(len(token) - MIN_RUN + 1)
    ):
        return text  # the common case, at the speed of `in`
    units = _characters(text)
    starts: dict[str, list[tuple[str, int]]] = {}
    for token in tokens:
        for i, char in enumerate(token):
            starts.setdefault(char, []).append((token, i))
    pieces, copied, i = [], 0, 0
    while i < len(units):
        run = _longest_run(units, i, starts)
        if run >= MIN_RUN:
            pieces += [text[copied : units[i][0]], PLACEHOLDER]
            copied = units[i + run - 1][1]
            i += run
        else:
            i += 1
    pieces.append(text[copied:])
    return "".join(pieces)


def _characters(text: str) -> list[tuple[int, int, str]]:
    """(start, end, character) of each character of `text`, a %XX escape read as the one it encodes."""
    units, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) and text[i + 1] in _HEX and text[i + 2] in _HEX:
            units.append((i, i + 3, chr(int(text[i + 1 : i + 3], 16))))
            i += 3
        else:
            units.append((i, i + 1, text[i]))
            i += 1
    return units


def _longest_run(units: list[tuple[int, int, str]], at: int, starts: dict[str, list[tuple[str, int]]]) -> int:
    """How many characters from `at` on run along a token (0: the one at `at` is in none)."""
    best = 0
    for token, offset in starts.get(units[at][2], ()):
        length = 0
        while (
            at + length < len(units)
            and offset + length < len(token)
            and units[at + length][2] == token[offset + length]
        ):
            length += 1
        best = max(best, length)
    return best


class TokenRedactor(logging.Filter):
    """Rewrites each record with the guarded tokens redacted from its message, its traceback (put
    into the message, never left for a handler to format) and its extra fields; a client's error
    is one line naming its type."""

    def __init__(self) -> None:
        super().__init__()
        self._tokens: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def guard(self, token: str) -> None:
        with self._lock:
            self._tokens = self._tokens | {token}

    def release(self, token: str) -> None:
        with self._lock:
            self._tokens = self._tokens - {token}

    def filter(self, record: logging.LogRecord) -> bool:
        tokens = self._tokens
        if not tokens:
            return True  # no server is up: the record is left as it came
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            if isinstance(error, CLIENT_ERRORS):
                status = f", status {error.code}" if isinstance(error, HttpProcessingError) else ""
                text += f": {type(error).__name__}{status} (what the client sent is not logged)"
            else:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
        record.exc_info, record.exc_text = None, None
        record.msg, record.args = redact(text, tokens), ()
        if record.stack_info:
            record.stack_info = redact(record.stack_info, tokens)
        for name, value in list(vars(record).items()):
            if name not in _RECORD_FIELDS and isinstance(value, str):
                setattr(record, name, redact(value, tokens))
        return True


_REDACTOR = TokenRedactor()


def guard_token(token: str, *loggers: logging.Logger) -> None:
    """Redact `token` from every line of QUOTING_LOGGERS and `loggers` until `release_token`."""
    for logger in [*map(logging.getLogger, QUOTING_LOGGERS), *loggers]:
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)
    _REDACTOR.guard(token)


def release_token(token: str) -> None:
    """Stop redacting `token` (its server is closed: nothing logs its requests any more)."""
    _REDACTOR.release(token)
