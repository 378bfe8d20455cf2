"""What a config key's value may be, declared beside its default, and the check that holds a section
to it before anything starts: `field(default=0.99, metadata=bounds(ge=0, le=1))`, or a plugin's own
check (`{CHECK: check}`, a `ValueCheck`: the page plugins' host).

Declared or not, every integer fits in 64 bits and every float is finite. A list's range holds for
each element, a schedule's (`framework.schedules`) for every value it passes through.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

from framework.errors import ConfigError, did_you_mean

#: The key of a field's metadata that holds its check (`Bounds` or `Host`).
CHECK = "framework.check"
#: The largest integer a key holds: numpy, torch and SQLite take 64 bits.
INT64_MAX = 2**63 - 1
#: The keys of a schedule's mapping whose values the schedule passes through (`framework.schedules`).
SCHEDULE_VALUES = ("value", "start", "end", "outside_value")


@dataclass(frozen=True)
class Bounds:
    """The numbers a key takes: a range (ends optional), values outside it that mean something (`also`)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    also: tuple[float, ...] = ()
    finite: bool = True

    def holds(self, value: float) -> bool:
        if value in self.also:
            return True
        if math.isnan(value) or (self.finite and math.isinf(value)):
            return False
        return not (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def closed(self) -> Bounds:
        """The range with its open ends closed: where a schedule may go after its start."""
        return Bounds(
            ge=self.gt if self.gt is not None else self.ge,
            le=self.lt if self.lt is not None else self.le,
            also=self.also,
            finite=self.finite,
        )

    def text(self) -> str:
        """`in [0, 1]`, `>= 1, or -1`, `> 0`, `a finite number`."""
        low = ("[", self.ge) if self.ge is not None else ("(", self.gt) if self.gt is not None else None
        high = (self.le, "]") if self.le is not None else (self.lt, ")") if self.lt is not None else None
        if low and high:
            where = f"in {low[0]}{show(low[1])}, {show(high[0])}{high[1]}"
        elif low:
            where = f"{'>=' if low[0] == '[' else '>'} {show(low[1])}"
        elif high:
            where = f"{'<=' if high[1] == ']' else '<'} {show(high[0])}"
        else:
            where = "a finite number" if self.finite else "a number"
        return where + "".join(f", or {show(v)}" for v in self.also)


@typing.runtime_checkable
class ValueCheck(typing.Protocol):
    """A plugin's own check of a key's values, in its field's metadata as `{CHECK: check}`."""

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, said after `key=value`; None when it is taken."""


def bounds(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    also: Sequence[float] = (),
    finite: bool = True,
) -> dict[str, Any]:
    """A field's metadata declaring the numbers it takes (pydantic's ge, gt, le, lt)."""
    return {CHECK: Bounds(ge=ge, gt=gt, le=le, lt=lt, also=tuple(also), finite=finite)}


#: A field's metadata for a key that says how a run is shown or reached (a page's port), not what it
#: trains: an override of it is not part of the run's name (the trackers' run_names).
OPERATIONAL = "framework.operational"
SHOWN: Mapping[str, Any] = {OPERATIONAL: True}


def declared(f: Field[Any]) -> Bounds | ValueCheck | None:
    """What a schema's field declares of its values (`bounds`, a plugin's check); None when nothing."""
    check = f.metadata.get(CHECK)
    return check if isinstance(check, Bounds | ValueCheck) else None


def check_values(schema: type, values: Any, prefix: str = "") -> None:
    """Hold each key of `values` (a `schema` instance or mapping) to what `schema` declares; a
    ConfigError names the first key that is not, its value and what it may be."""
    assert is_dataclass(schema)
    hints = typing.get_type_hints(schema)
    known = [f.name for f in fields(schema)]
    for name in values if isinstance(values, Mapping) else ():  # `+eval.episode=3` adds one
        if name not in known:
            raise ConfigError(
                f"Unknown config key {prefix}{name}.{did_you_mean(str(name), known, prefix=prefix)} Keys of "
                f"{prefix[:-1] or 'the config'}: {', '.join(known)}."
            )
    for f in fields(schema):
        key = f"{prefix}{f.name}"
        value = values.get(f.name) if isinstance(values, Mapping) else getattr(values, f.name, None)
        nested = _dataclass_of(hints.get(f.name))
        if nested is not None and value is not None:
            check_values(nested, value, f"{key}.")
            continue
        check = declared(f)
        try:
            if isinstance(check, ValueCheck):
                if value is not None and (problem := check.problem(value)):
                    raise ConfigError(f"{key}={value!r} {problem}")
            elif check is not None or not isinstance(value, Mapping):  # a free mapping: its plugin's
                nullable = _nullable(hints.get(f.name))
                check_number(key, value, check or Bounds(), nullable=nullable, default=f.default)
        except ConfigError as e:
            raise ConfigError(_described(str(e), schema, f.name)) from None


def _described(message: str, schema: type, name: str) -> str:
    """`message` and the first sentence of the key's description, which says what its values mean."""
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", field_docs(schema).get(name, ""), maxsplit=1)[0]
    return f"{message}: {sentence}" if sentence else message


def check_number(
    key: str, value: Any, bounds: Bounds, *, nullable: bool = False, default: Any = MISSING
) -> None:
    """A ConfigError unless `value` (a number, a list of them, a schedule) keeps to `bounds`."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        if not bounds.holds(value) or _too_large(value):
            raise ConfigError(refusal(key, value, bounds, nullable=nullable, default=default))
    elif isinstance(value, Mapping):
        _check_schedule(key, value, bounds)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            check_number(f"{key}[{i}]", item, bounds)


def refusal(key: str, value: Any, bounds: Bounds, *, nullable: bool = False, default: Any = MISSING) -> str:
    """`agent.gamma=1.5 must be in [0, 1] (default 0.99)`: the key, the value, what it may be."""
    what = bounds.text() + (", or null" if nullable else "")
    if isinstance(value, float) and not math.isfinite(value) and value not in bounds.also:
        said = f"{key}={show(value)} is not a finite number: it must be {what}"
    elif _too_large(value):
        said = f"{key}={show(value)} does not fit in 64 bits: it must be {what}"
    else:
        said = f"{key}={show(value)} must be {what}"
    if default is not MISSING and not isinstance(default, Mapping):
        said += f" (default {'null' if default is None else show(default)})"
    return said


def show(value: Any) -> str:
    """A number as a user would write it: 0 rather than 0.0, 1e-05, inf, nan."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def resolved(node: Any) -> Any:
    """`node` as plain data, interpolations resolved; one that cannot be, or a ??? left, is a ConfigError."""
    try:
        return OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as e:
        raise ConfigError(f"{e.full_key} has no value (???): set it, {e.full_key}=VALUE") from None
    except InterpolationResolutionError as e:
        message = str(e.msg or e).strip().splitlines()[0]
        unset = re.search(r"Environment variable '([^']+)' not found", message)
        if unset:
            var = unset.group(1)
            raise ConfigError(
                f"{e.full_key}: the environment variable {var} is not set; set it, or give "
                f"${{oc.env:{var}}} a default: ${{oc.env:{var},DEFAULT}}"
            ) from None
        raise ConfigError(f"{e.full_key} cannot be resolved: {message}") from None


def _check_schedule(key: str, spec: Mapping[str, Any], bounds: Bounds) -> None:
    """A schedule starts within `bounds` and passes only through their closure."""
    points = [(name == "start" or name == "value", spec.get(name)) for name in SCHEDULE_VALUES]
    endpoints = spec.get("endpoints")
    if isinstance(endpoints, Sequence) and not isinstance(endpoints, str):
        points += [(False, p[1]) for p in endpoints if isinstance(p, Sequence) and len(p) == 2]
    after = bounds.closed()
    for first, point in points:
        if not isinstance(point, int | float) or isinstance(point, bool):
            continue  # not a number: framework.schedules says what it should be
        if (bounds if first else after).holds(point) and not _too_large(point):
            continue
        said = f"{key}={dict(spec)} must be {bounds.text()}"
        if after != bounds:
            said += f" (a schedule: {bounds.text()} at the start, {after.text()} after)"
        else:
            said += f" (it reaches {show(point)})"
        raise ConfigError(said)


def _too_large(value: float) -> bool:
    return isinstance(value, int) and not -INT64_MAX - 1 <= value <= INT64_MAX


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field's type names (a nested section: eval, search.inference), if any."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and is_dataclass(candidate):
            return candidate
    return None


def _nullable(hint: Any) -> bool:
    return type(None) in typing.get_args(hint)


def field_docs(schema: type) -> dict[str, str]:
    """The first paragraph of the docstring under each field of a dataclass (and its bases), as a line."""
    docs: dict[str, str] = {}
    for klass in reversed(schema.__mro__[:-1]):
        try:
            tree = ast.parse(inspect.getsource(klass).lstrip() if klass.__module__ != "builtins" else "")
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, [*body[1:], None], strict=True):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
            ):
                value = after.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    docs[node.target.id] = " ".join(value.value.strip().split("\n\n")[0].split())
    return docs
