"""Requests that carry a page's token where aiohttp's messages quote it, sent as raw bytes, and a
search of log text for any trace of the token."""

from __future__ import annotations

import contextlib
import socket
import urllib.parse

#: How much of a request line aiohttp's "line too long" message quotes (its C parser).
QUOTED_CHARS = 100
#: The length of a piece of the token that must appear nowhere.
PIECE = 8


def percent_encoded(token: str, *, every: int = 1, lower: bool = False) -> str:
    """`token` with every `every`-th character percent-encoded (%41 for A)."""
    form = "%{:02x}" if lower else "%{:02X}"
    return "".join(form.format(ord(c)) if i % every == 0 else c for i, c in enumerate(token))


def hostile_requests(path: str, token: str) -> list[bytes]:
    """Requests to `path` (which has no query) that aiohttp refuses with a message quoting the request
    line or a header, each with the token in it: whole, cut short, percent-encoded, split."""
    requests = []
    # A request line over aiohttp's 8190 bytes: its message quotes the first 100 characters, so a
    # token placed across that boundary is cut (the tester saw 20 of its 22 characters).
    for shown in (1, 6, 10, 20, len(token) - 1):
        pad = "a" * (QUOTED_CHARS - len(path) - len("?x=&token=") - shown)
        target = f"{path}?x={pad}&token={token}&y={'b' * 9000}"
        requests.append(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n")
    for form in (
        percent_encoded(token),
        percent_encoded(token, lower=True),
        percent_encoded(token, every=2),
        token,
    ):
        requests += [
            f"GET {path}?token={form}\x01 HTTP/1.1\r\nHost: x\r\n\r\n",  # a control character in the URL
            f"GET http://[::1{path}?token={form} HTTP/1.1\r\nHost: x\r\n\r\n",  # an address that is not one
            f"G\x01T {path}?token={form} HTTP/1.1\r\nHost: x\r\n\r\n",  # not a method
            f"GET {path}?token={form} HTTP/9.9\r\nHost: x\r\n\r\n",
            f"GET {path}?token={form} HTTP/1.1\r\nBad Header\r\n\r\n",
            f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Token {form}\r\n\r\n",  # a header without a colon
            f"GET {path} HTTP/1.1\r\nHost: x\r\nReferer: /?token={form}{'c' * 9000}\r\n\r\n",
            f"POST {path}?token={form} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        ]
    requests.append(f"GET {path}?token={token[:11]}\x00{token[11:]} HTTP/1.1\r\nHost: x\r\n\r\n")
    return [r.encode("latin-1") for r in requests]


def exchange(port: int, data: bytes, *, half_close: bool = True) -> bytes:
    """What the server on 127.0.0.1:`port` answers `data` on a new connection, read to its end;
    `half_close`: say the request is all there is (a refused request is answered at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(data)
        if half_close:
            conn.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(65536):
                answer += chunk
    return answer


def token_traces(text: str, token: str) -> list[str]:
    """Every PIECE-character piece of `token` found in `text`, as written or percent-decoded."""
    readings = (text, urllib.parse.unquote(text))
    pieces = {token[i : i + PIECE] for i in range(len(token) - PIECE + 1)}
    return sorted(piece for piece in pieces if any(piece in reading for reading in readings))
