"""The ports a page cannot be served on for a browser to open it."""

from __future__ import annotations

#: Ports browsers refuse to load a page from (ERR_UNSAFE_PORT: Chromium's net/base/port_util.cc,
#: Firefox's alike): a page served there never loads, so it is refused before anything starts.
BROWSER_BLOCKED_PORTS = frozenset({
    1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103,
    104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513,
    514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719,
    1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679,
    6697, 10080,
})  # fmt: skip


def browser_blocked(option: str, port: int) -> str | None:
    """Why a page on `port` cannot be opened in a browser, naming `option`; None where it can."""
    if port not in BROWSER_BLOCKED_PORTS:
        return None
    return (
        f"{option} {port}: browsers refuse to load a page from port {port} (ERR_UNSAFE_PORT); give "
        "another port, or 0 for any free one"
    )
