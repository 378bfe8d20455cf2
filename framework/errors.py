"""A user's mistakes: one message that names the bad value and what would be valid, no traceback."""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Iterable, Sequence


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


def closest(value: str, choices: Iterable[str], *, n: int = 1, always: bool = False) -> list[str]:
    """The `n` choices most like `value` (case aside); with `always`, the nearest even if none is close."""
    options = list(choices)
    by_lower = {o.lower(): o for o in options}
    found = difflib.get_close_matches(value.lower(), list(by_lower), n=n)
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
    if found := _NOT_FLOAT.search(reason):
        return f"{key}={found['value']} must be a number (like {key}=0.5 or {key}=1e-3)"
    if found := _NOT_BOOL.search(reason):
        return f"{key}={found['value']} must be true or false"
    found = _NOT_INT.search(reason)
    if found is None:
        return None
    try:
        value = float(found["value"])
    except ValueError:
        return f"{key}={found['value']} must be an integer (a whole number, like {key}=1000)"
    if math.isfinite(value) and value.is_integer():
        return f"{key}={found['value']} must be an integer: write {key}={int(value)}"
    return f"{key}={found['value']} must be an integer"


#: Hydra's launchers the `launchers` extra installs, by their option, and the package of each.
LAUNCHERS = {"joblib": "hydra-joblib-launcher", "ray": "hydra-ray-launcher"}


#: Moved keys' new full names by old (`search.workers`: `agent.workers`), from the schemas' `MOVED` tables.
MOVED: dict[str, str] = {}


def hydra_message(error: BaseException, commands: Sequence[str] = ()) -> str | None:
    """What to print for Hydra's own refusals (composition, overrides); None for anything else.
    `commands`: the command line's sub-commands, offered where a word is neither one nor an override."""
    from hydra.errors import CompactHydraException, MissingConfigException, OverrideParseException
    from omegaconf import DictConfig
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    if isinstance(error, ValueError) and str(error).startswith("Config group override must be"):
        given = [a for a in sys.argv[1:] if re.fullmatch(r"\+*[\w/]+=null", a)] or ["GROUP=null"]
        return (
            f"{' '.join(given)}: a config group takes one of its options (python -m framework --help "
            "lists the groups); ~GROUP leaves out an optional one (~tuned)"
        )
    if isinstance(error, ValueError) and str(error).startswith("No completion plugin for"):
        shells = ", ".join(line.strip() for line in str(error).splitlines()[1:] if line.strip())
        return f"{str(error).split(' found')[0]}: -sc install=SHELL or query=SHELL, a SHELL of {shells}"
    if isinstance(error, ValueError) and str(error).startswith("Only one of --run, --multirun, --cfg"):
        return (
            "-m (--multirun) with --cfg, --info or --shell-completion: those show one job; leave -m out "
            "(and give each swept key one value) to see that job's"
        )
    if isinstance(error, ConfigKeyError | ConfigAttributeError) and error.full_key:
        key = str(error.full_key)
        if any(re.fullmatch(rf"~{re.escape(key)}(=.*)?", a) for a in sys.argv[1:]):  # a key every run reads
            return f"~{key}: a run needs {key}, which cannot be left out (give it a value instead)"
    if not isinstance(error, CompactHydraException):
        return None
    cause = error.__cause__
    if isinstance(error, MissingConfigException) and error.options and error.missing_cfg_file:
        group, _, option = str(error.missing_cfg_file).rpartition("/")
        hint = did_you_mean(option, error.options, prefix=f"{group}=") + _installed_without_config(
            group, option
        )
        if group == "hydra/launcher" and option in LAUNCHERS:
            hint += f' It comes with {LAUNCHERS[option]}: pip install "framework[launchers]".'
        return f"{group}={option} is not a config of group {group}.{hint} Options: {', '.join(error.options)}"
    if (
        isinstance(cause, ConfigKeyError | ConfigAttributeError)
        and cause.full_key
        and "not in" in (cause.msg or "")
    ):
        parent = cause.parent_node
        keys = [str(k) for k in parent] if isinstance(parent, DictConfig) else []
        place = MOVED.get(str(cause.full_key))
        if place is not None:
            return moved_message(str(cause.full_key), place)
        full_key = str(cause.full_key)
        section, _, leaf = full_key.rpartition(".")
        nodes = {k: parent.get(k) for k in keys} if isinstance(parent, DictConfig) and section else {}
        inside = [  # its section's free mappings (agent.hyperparams), where the key may belong
            f"{section}.{k}" for k, node in nodes.items()
            if isinstance(node, DictConfig) and _takes_any_key(node, f"{section}.{k}.{leaf}")
        ]  # fmt: skip
        return _unknown_key(full_key, keys, _takes_any_key(parent, full_key), inside)
    if isinstance(cause, OmegaConfBaseException):
        reason = str(cause.msg or cause).strip().splitlines()[0]
        if cause.full_key:
            return wrong_type(str(cause.full_key), reason) or f"Invalid value for {cause.full_key}: {reason}"
        return f"{_first_line(error)}: {reason}"
    if isinstance(error, OverrideParseException) and "=" not in error.override:
        hint = did_you_mean(error.override, commands, prefix="python -m framework ")
        return (
            f"{error.override!r} is neither a command nor an override (key=value, group=option).{hint} "
            f"Commands: {', '.join(commands) or '(none installed)'}. "
            "(python -m framework --help lists the commands and the config groups.)"
        )
    return " ".join(str(error).split())


def _installed_without_config(group: str, option: str) -> str:
    """Where a plugin of the group's kind has the name chosen but no config file names it: that."""
    from framework import registry
    from framework.config import plugin_sections

    kind = plugin_sections().get(group)
    if kind is None or option not in registry.names(kind):
        return ""
    where = registry.info(kind, option)
    return (
        f" The {kind} plugin {option!r} is installed ({where.value}, from {where.distribution}), but no "
        f"config file {group}/{option}.yaml selects it: its package's `framework.conf` entry point names "
        "the folder that holds one."
    )


def moved_message(key: str, place: str) -> str:
    """A key given where it no longer lives: its new place (a saved run's config is moved for it)."""
    return (
        f"{key} is {place} now: give {place}=VALUE instead "
        f"(a run saved with {key} resumes and plays with it as {place})"
    )


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _takes_any_key(parent: object, full_key: str) -> bool:
    """Whether `+full_key=VALUE` would be taken: its section holds any key (`agent.hyperparams`, a dict
    in its plugin's schema), not the root's or a plugin schema's own fields."""
    from dataclasses import fields, is_dataclass

    from omegaconf import DictConfig, OmegaConf

    from framework import registry
    from framework.config import plugin_sections

    section, *path = full_key.split(".")[:-1] or [""]
    if not isinstance(parent, DictConfig) or OmegaConf.get_type(parent) not in (dict, None) or not section:
        return False
    kind = plugin_sections().get(section)
    name = OmegaConf.select(parent._get_root(), f"{section}.name", default=None)
    if kind is None or name is None:
        return kind is None
    try:
        schema: object = registry.load(kind, str(name)).Config
    except Exception:
        return False
    for part in path:
        field = next((f for f in fields(schema) if f.name == part), None) if is_dataclass(schema) else None
        if field is None:
            return False
        schema = field.type if not isinstance(field.type, str) else field.type.split("[")[0]
        if schema in (dict, "dict", "Dict", "Any") or getattr(schema, "__origin__", None) is dict:
            return True
    return False


def _unknown_key(full_key: str, keys: list[str], open_section: bool, inside: Sequence[str] = ()) -> str:
    """An override of a key the composed config does not have, with the keys it does have (and the
    mappings of its section that take any key, `inside`)."""
    section, _, leaf = full_key.rpartition(".")
    where = f"{section}." if section else ""
    hint = did_you_mean(leaf, keys, prefix=where) or "".join(f" Did you mean {m}.{leaf}?" for m in inside[:1])
    listing = f" Keys of {section or 'the config'}: {', '.join(keys)}." if keys else ""
    adding = "" if hint or not open_section else f" `+{full_key}=VALUE` adds a key the config does not have."
    return (
        f"Unknown config key {full_key}.{hint}{listing}{adding} "
        f"(`python -m framework --cfg job` shows the composed config.)"
    )


class JobFailed(Exception):
    """A job failed in a launcher's worker: raised, as sys.exit(1) would crash the worker and lose other jobs'
    results; as the job's FAILED return, a grid sweep exits 1 with `message` (None: said already)."""

    def __init__(self, message: str | None) -> None:
        super().__init__(message)
        self.message = message
