"""The host a page is served on: a config key's check (framework.values.ValueCheck)."""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework.values import CHECK


@dataclass(frozen=True)
class Host:
    """A host to serve on or connect to: an IP address (127.0.0.1, ::1) or a DNS host name."""

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a host; None when it is one."""
        value = str(value)
        with contextlib.suppress(ValueError):  # not an IP address: maybe a host name
            ipaddress.ip_address(value.removeprefix("[").removesuffix("]"))
            return None
        labels = value.removesuffix(".").split(".")
        if all(label.isdigit() for label in labels):
            return "is not an IP address (four numbers from 0 to 255: 127.0.0.1)"
        if not value or len(value) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
            return "is neither an IP address (127.0.0.1, ::1) nor a host name (letters, digits, - and .)"
        return None


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")

#: A field's metadata declaring that it holds a host: `field(default="127.0.0.1", metadata=HOST)`.
HOST: Mapping[str, Any] = {CHECK: Host()}
