"""Whether `ray.address` is a Ray cluster, asked before the run starts and within a few seconds.

A Ray head's GCS, and the Ray client server behind `ray://`, are gRPC servers: they answer the
HTTP/2 connection preface with a SETTINGS frame, before any authentication (Ray's token is checked
per call, later). An HTTP/1 server, an SSH daemon or a database answers otherwise, or not at all:
that difference is what is checked, so that a wrong port is refused now rather than after
`ray.init_timeout_s` of a started run. Nothing here imports Ray.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from framework.errors import ConfigError

#: The client connection preface (RFC 9113, 3.4) and an empty SETTINGS frame, as a gRPC client sends.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_FRAME = 4
PROBE_TIMEOUT_S = 3.0
FIX = "start one (ray start --head) or leave ray.address unset for a local Ray of the run's own"


def check_address(address: str, timeout_s: float = PROBE_TIMEOUT_S, *, key: str = "ray.address") -> str:
    """The host:port that `address` names (`auto` resolved as Ray resolves it); a ConfigError in one
    line, naming the setting `key`, unless a Ray cluster answers there."""
    target, source = address, ""
    if address == "auto":
        target, source = resolve_auto()
        source = f" ({target}, from {source})"
    host, port = split(target, address, key)
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        answer = _listening(host, port, timeout_s)  # a TLS server needs the cluster's certificates
    else:
        answer = probe(host, port, timeout_s)
    if answer is not None:
        fix = FIX.replace("ray.address", key)
        raise ConfigError(f"{key}={address}{source}: no Ray cluster answers there ({answer}); {fix}")
    return target


def split(target: str, address: str, key: str = "ray.address") -> tuple[str, int]:
    """(host, port) of `host:port` or `ray://host:port`; a ConfigError naming `address` otherwise."""
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(f"{key}={address} is not an address: give host:port (or ray://host:port, auto)")
    return host, int(port)


def resolve_auto() -> tuple[str, str]:
    """What `ray.address=auto` joins, and where that was found: RAY_ADDRESS, else the cluster
    `ray start` recorded in Ray's temp directory. A ConfigError when neither names one."""
    env = os.environ.get("RAY_ADDRESS", "")
    if env:
        return env, "RAY_ADDRESS"
    recorded = ray_temp_dir() / "ray_current_cluster"
    try:
        found = recorded.read_text().strip()
    except OSError:
        found = ""
    if found:
        return found, str(recorded)
    raise ConfigError(
        f"ray.address=auto: no Ray cluster to join here (RAY_ADDRESS is unset, and {recorded} names "
        "none); start one (ray start --head), give its host:port, or leave ray.address unset for a "
        "local Ray of the run's own"
    )


def ray_temp_dir() -> Path:
    """Ray's temp directory, as Ray 2.x chooses it: $RAY_TMPDIR, $TMPDIR (Linux), /tmp; then ray/."""
    base = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None
    )
    return Path(base or "/tmp") / "ray"


def probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when a gRPC server answers at host:port; else what happened there, in a few words."""
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as e:
        return e.strerror or type(e).__name__
    data = b""
    with sock:
        try:
            sock.sendall(HTTP2_PREFACE)
            while len(data) < 9:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            if not data:
                return f"something accepts connections there, and said nothing in {timeout_s:g} s"
        except OSError as e:
            if not data:
                return f"something accepts connections there, then {e.strerror or type(e).__name__}"
    # A frame header: 24-bit length, type, flags, stream 0 (RFC 9113, 4.1); the server's first frame.
    if len(data) >= 9 and data[3] == SETTINGS_FRAME and data[5:9] == bytes(4):
        return None
    if not data:
        return "something accepts connections there, and closed this one without a word"
    return f"something else answers there: {_printable(data)!r}"


def _listening(host: str, port: int, timeout_s: float) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def _printable(data: bytes) -> str:
    """The start of an answer, as text: its first line, at most 60 characters."""
    text = data.decode("latin-1").strip().splitlines()[0] if data.strip() else ""
    text = "".join(c if c.isprintable() else "." for c in text)
    return text[:60] + ("..." if len(text) > 60 else "")
