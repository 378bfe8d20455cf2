"""What every request of the play page goes through: the size and shape of a request's body and the
security headers of every answer (its token is kept out of log lines by token_logs.py)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

#: Enough for any request of the API; anything larger is refused unread.
MAX_BODY_BYTES = 1024
JSON = "application/json"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'",
    "Referrer-Policy": "no-referrer",  # the page's address holds the token
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def api_error(status: type[web.HTTPError], message: str) -> web.HTTPError:
    """An HTTP error whose JSON body {"error": message} the page shows as it is."""
    return status(text=json.dumps({"error": message}), content_type=JSON)


def no_such_call(request: web.Request, error: web.HTTPException) -> web.HTTPException:
    """A request under /api/ for a path or method the API lacks (404, 405) answered in JSON, naming
    the calls it has; any other error as it is."""
    if not request.path.startswith("/api/") or error.status not in (404, 405) or error.content_type == JSON:
        return error
    paths = {route: route.resource.canonical for route in request.app.router.routes() if route.resource}
    api = [f"{r.method} {p}" for r, p in paths.items() if p.startswith("/api/") and r.method != "HEAD"]
    calls = ", ".join(sorted(api))
    text = json.dumps({"error": f"{request.method} {request.path}: no such call; the API's: {calls}"})
    if isinstance(error, web.HTTPMethodNotAllowed):
        return web.HTTPMethodNotAllowed(request.method, error.allowed_methods, text=text, content_type=JSON)
    return web.HTTPNotFound(text=text, content_type=JSON)


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


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
