"""A value over a run's steps (DQN's ε, AlphaZero's temperature): a number, or `{kind: constant, value}`,
`{kind: linear, start, end, steps}` (then flat at `end`; `fraction: 0.1` for 10% of total_steps instead of
`steps`), `{kind: piecewise, endpoints: [[step, value], ...], outside_value}`; null keys count as absent.
Hydra merges mappings: replace another kind with `~agent.exploration '+agent.exploration={kind: ...}'`."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

KINDS = ("constant", "linear", "piecewise")


class Schedule(Protocol):
    def __call__(self, step: int) -> float: ...


@dataclass(frozen=True)
class ConstantSchedule:
    """The same value at every step."""

    value: float

    def __call__(self, step: int) -> float:
        return self.value


@dataclass(frozen=True)
class LinearSchedule:
    """From `start` at step 0 to `end` at step `steps`, then flat at `end`."""

    start: float
    end: float
    steps: int

    def __call__(self, step: int) -> float:
        if step >= self.steps:
            return self.end
        return self.start + (self.end - self.start) * max(step, 0) / self.steps


@dataclass(frozen=True)
class PiecewiseSchedule:
    """Linear between (step, value) endpoints; `outside_value` outside them (None: the nearest endpoint's)."""

    endpoints: tuple[tuple[int, float], ...]
    outside_value: float | None = None

    def __call__(self, step: int) -> float:
        steps = [s for s, _ in self.endpoints]
        if step < steps[0] or step > steps[-1]:
            if self.outside_value is not None:
                return self.outside_value
            return self.endpoints[0][1] if step < steps[0] else self.endpoints[-1][1]
        i = bisect.bisect_right(steps, step) - 1
        if i == len(steps) - 1:
            return self.endpoints[-1][1]
        (s0, v0), (s1, v1) = self.endpoints[i], self.endpoints[i + 1]
        return v0 + (v1 - v0) * (step - s0) / (s1 - s0)


def build_schedule(spec: Any, *, name: str, total_steps: int | None = None) -> Schedule:
    """A schedule from config: a number, or a mapping with `kind` (errors name `name`)."""
    if isinstance(spec, bool):
        raise ValueError(f"{name}={spec!r} is not a schedule: give a number or a mapping with 'kind'")
    if isinstance(spec, int | float):
        return ConstantSchedule(float(spec))
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"{name}={spec!r} is not a schedule: give a number or a mapping with 'kind' ({', '.join(KINDS)})"
        )
    spec = {key: value for key, value in spec.items() if value is not None}
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{name}.kind={kind!r} is not a schedule kind; choose one of {', '.join(KINDS)}")
    if kind == "constant":
        _check_keys(spec, name, required=("value",))
        return ConstantSchedule(_number(spec, "value", name))
    if kind == "linear":
        return _linear(spec, name, total_steps)
    _check_keys(spec, name, required=("endpoints",), optional=("outside_value",))
    outside = spec.get("outside_value")
    return PiecewiseSchedule(
        _endpoints(spec["endpoints"], name),
        None if outside is None else _number(spec, "outside_value", name),
    )


def _linear(spec: Mapping[str, Any], name: str, total_steps: int | None) -> LinearSchedule:
    _check_keys(spec, name, required=("start", "end"), optional=("steps", "fraction"))
    start, end = _number(spec, "start", name), _number(spec, "end", name)
    if ("steps" in spec) == ("fraction" in spec):
        raise ValueError(f"{name}: a linear schedule takes exactly one of 'steps' or 'fraction'")
    if "steps" in spec:
        steps = spec["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"{name}.steps={steps!r} must be an integer >= 0")
        return LinearSchedule(start, end, steps)
    fraction = _number(spec, "fraction", name)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"{name}.fraction={fraction!r} must be between 0 and 1 (of total_steps)")
    if total_steps is None:
        raise ValueError(f"{name}: 'fraction' needs the run's total_steps; give 'steps' instead")
    return LinearSchedule(start, end, round(fraction * total_steps))


def _endpoints(raw: Any, name: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ValueError(f"{name}.endpoints={raw!r} must be a non-empty list of [step, value] pairs")
    points = []
    for item in raw:
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 2:
            raise ValueError(f"{name}.endpoints: {item!r} is not a [step, value] pair")
        step, value = item
        if isinstance(step, bool) or not isinstance(step, int | float) or step != int(step):
            raise ValueError(f"{name}.endpoints: step {step!r} must be an integer")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}.endpoints: value {value!r} must be a number")
        points.append((int(step), float(value)))
    steps = [s for s, _ in points]
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError(f"{name}.endpoints: steps {steps} must be strictly increasing")
    return tuple(points)


def _number(spec: Mapping[str, Any], key: str, name: str) -> float:
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}.{key}={value!r} must be a number")
    return float(value)


def _check_keys(
    spec: Mapping[str, Any], name: str, *, required: Sequence[str], optional: Sequence[str] = ()
) -> None:
    valid = ("kind", *required, *optional)
    unknown = [k for k in spec if k not in valid]
    if unknown:
        raise ValueError(
            f"{name}: unknown key(s) {', '.join(map(str, unknown))} for a {spec['kind']} schedule; "
            f"valid keys: {', '.join(valid)} (to replace a default schedule of another kind: "
            f"~{name} '+{name}={{kind: ...}}')"
        )
    missing = [k for k in required if k not in spec]
    if missing:
        raise ValueError(f"{name}: a {spec['kind']} schedule needs {', '.join(missing)}")


def final_value(spec: Any, *, name: str) -> float:
    """The value a schedule settles at (a number is its own): what a trained agent plays with."""
    return build_schedule(spec, name=name, total_steps=1)(2**62)
