"""A user's mistakes: one message that names the bad value and what would be valid, no traceback."""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Iterable


class ConfigError(ValueError):
    """A config value, key or command-line target that cannot be used; raised before anything starts (plugins
    raise it from constructors). The command line prints its message alone (HYDRA_FULL_ERROR=1: traceback)."""


class ExplainedError(RuntimeError):
    """A run stopped from outside the program (a server gone), its message explaining all: no traceback."""


class RunFailed(RuntimeError):
    """A run that raised after it started: it ended FAILED with a last checkpoint; the cause is chained.
    `summary`: the run's last lines (status, metric, where its results are)."""

    def __init__(self, summary: str) -> None:
        super().__init__(summary)
        self.summary = summary


#: A key's other common names (SB3's, CleanRL's, papers'), which share too few letters to be found close.
SYNONYMS = {
    "lr": ("learning_rate",),
    "learning_rate": ("lr",),
    "discount": ("gamma",),
    "discount_factor": ("gamma",),
    "grad_clip": ("max_grad_norm",),
    "replay_size": ("buffer_size",),
    "net_arch": ("hidden_sizes",),
    "hidden_sizes": ("net_arch",),
}


def closest(value: str, choices: Iterable[str], *, n: int = 1, always: bool = False) -> list[str]:
    """The `n` choices most like `value` (case aside), its other names first (`lr`: `learning_rate`);
    with `always`, the nearest even if none is close."""
    options = list(choices)
    by_lower = {o.lower(): o for o in options}
    named = [s for s in SYNONYMS.get(value.lower(), ()) if s in by_lower]
    found = named + [
        f for f in difflib.get_close_matches(value.lower(), list(by_lower), n=n) if f not in named
    ]
    found = found[:n]
    if not found and always and options:
        found = difflib.get_close_matches(value.lower(), list(by_lower), n=n, cutoff=0.0)
    return [by_lower[f] for f in found]


def did_you_mean(value: str, choices: Iterable[str], *, prefix: str = "", always: bool = False) -> str:
    """' Did you mean PREFIX<closest>?' or '' when nothing is close."""
    found = closest(value, choices, always=always)
    return f" Did you mean {prefix}{found[0]}?" if found else ""


def check_choice(key: str, value: object, choices: Iterable[str]) -> None:
    """A ConfigError naming `key=value`, the closest choice and all of them, unless `value` is one."""
    options = list(choices)
    if value in options:
        return
    hint = did_you_mean(str(value), options)
    raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(options)}.{hint}")


def check_at_least(section: str, cfg: object, minimum: int, *keys: str) -> None:
    """A ConfigError naming `section.key=value` for the first field of `cfg` in `keys` below `minimum`."""
    for key in keys:
        value = getattr(cfg, key)
        if value < minimum:
            raise ConfigError(f"{section}.{key}={value} must be >= {minimum}")


#: OmegaConf's refusals of a value for an integer, a number's and a bool's key.
_NOT_INT = re.compile(r"Value '(?P<value>[^']*)' of type '(?P<type>\w+)' could not be converted to Integer")
_NOT_FLOAT = re.compile(r"Value '(?P<value>[^']*)' of type '\w+' could not be converted to Float")
_NOT_BOOL = re.compile(r"Value '(?P<value>[^']*)' is not a valid bool")


def wrong_type(key: str, reason: str) -> str | None:
    """The message for a value of the wrong type (OmegaConf's `reason`): what the key takes, as it is
    written (`1e6` for an integer: the integer to write); None for another refusal."""
    found = _NOT_FLOAT.search(reason) or _NOT_BOOL.search(reason) or _NOT_INT.search(reason)
    if found is None:
        return None
    # As the command line wrote it (`1e3`, which OmegaConf saw as 1000.0), where it wrote it.
    given = next((a.partition("=")[2] for a in sys.argv[1:] if a.lstrip("+~").partition("=")[0] == key), "")
    shown = f"{key}={given or found['value']}"
    if found.re is _NOT_FLOAT:
        return f"{shown} must be a number (like {key}=0.5 or {key}=1e-3)"
    if found.re is _NOT_BOOL:
        return f"{shown} must be true or false"
    try:
        value = float(found["value"])
    except ValueError:
        return f"{shown} must be an integer (a whole number, like {key}=1000)"
    if math.isfinite(value) and value.is_integer():
        return f"{shown} must be an integer: write {key}={int(value)}"
    return f"{shown} must be an integer"


#: Moved keys' new full names by old (`search.workers`: `agent.workers`), from the schemas' `MOVED` tables.
MOVED: dict[str, str] = {}


def moved_message(key: str, place: str) -> str:
    """A key given where it no longer lives: its new place (a saved run's config is moved for it)."""
    return (
        f"{key} is {place} now: give {place}=VALUE instead "
        f"(a run saved with {key} resumes and plays with it as {place})"
    )


class JobFailed(Exception):
    """A job failed in a launcher's worker: raised, as sys.exit(1) would crash the worker and lose other jobs'
    results; as the job's FAILED return, a grid sweep exits 1 with `message` (None: said already)."""

    def __init__(self, message: str | None) -> None:
        super().__init__(message)
        self.message = message
