"""What every request and log line of the play page goes through: the size and shape of a request's
body, the security headers of every answer, and the page's token kept out of aiohttp's log lines."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

#: Enough for any request of the API; anything larger is refused unread.
MAX_BODY_BYTES = 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'",
    "Referrer-Policy": "no-referrer",  # the page's address holds the token
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def api_error(status: type[web.HTTPError], message: str) -> web.HTTPError:
    """An HTTP error whose JSON body {"error": message} the page shows as it is."""
    return status(text=json.dumps({"error": message}), content_type="application/json")


async def read_body(request: web.Request, *, allowed: set[str]) -> dict[str, Any]:
    """The request's JSON object, holding only `allowed` keys."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as e:
        raise web.HTTPRequestEntityTooLarge(
            MAX_BODY_BYTES,
            request.content_length or 0,
            text=json.dumps({"error": f"the request body is larger than the {MAX_BODY_BYTES} bytes allowed"}),
            content_type="application/json",
        ) from e
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise api_error(web.HTTPBadRequest, "the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise api_error(web.HTTPBadRequest, "the request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        valid = ", ".join(sorted(allowed)) or "none"
        raise api_error(web.HTTPBadRequest, f"unknown field(s) {', '.join(unknown)}; valid: {valid}")
    return body


#: The loggers of aiohttp's server side: what they say (a bad request's first line, say) may quote a
#: request's address, and so its token.
AIOHTTP_LOGGERS = ("aiohttp.access", "aiohttp.internal", "aiohttp.server", "aiohttp.web", "aiohttp.websocket")


#: The longest account of a client's malformed request or lost connection a log line gives.
MAX_CLIENT_ERROR_CHARS = 200


class _Redact(logging.Filter):
    """Rewrites a record with the token (and any traceback, which may quote it) replaced. A client's
    fault (a request that is not HTTP, a connection lost mid-request) is one line, not a traceback."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info:
            error = record.exc_info[1]
            if isinstance(error, HttpProcessingError | ConnectionResetError):
                said = " ".join(f"{type(error).__name__}: {error}".split())
                text += ": " + said[:MAX_CLIENT_ERROR_CHARS]
            else:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, None
        record.msg, record.args = text.replace(self.token, "<token>"), ()
        return True


def redact_in_logs(token: str) -> None:
    """Keep `token` out of every line aiohttp's server logs."""
    for name in AIOHTTP_LOGGERS:
        logging.getLogger(name).addFilter(_Redact(token))


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
